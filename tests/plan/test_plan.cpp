// tetrasim plan: the goodput model against numbers worked by hand from its sources, the
// Pareto front of a hand-made set, days / GPU-hours / cost of one candidate by hand, the
// ranking and verdicts, the shard split, and the plan's best layout against a full search.
#include <doctest/doctest.h>
#include "support/approx.hpp"

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "tetra/hw/presets.hpp"
#include "tetra/parallel/params.hpp"
#include "tetra/model/presets.hpp"
#include "tetra/plan/energy.hpp"
#include "tetra/plan/goodput.hpp"
#include "tetra/plan/plan.hpp"
#include "tetra/search/search.hpp"

using tetra::test::approx;
using namespace tetra;

namespace {

search::RankedLayout row_with(double tokens_per_s, double peak_bytes) {
  search::RankedLayout r;
  r.tokens_per_s = tokens_per_s;
  r.step_time_s = 1e6 / tokens_per_s;
  r.peak_bytes = peak_bytes;
  // The memory model's headroom on an H100 with the default allocator: capacity - reserved.
  r.headroom_bytes = hw::find_cluster_preset("dgx-h100")->gpu.memory_bytes - peak_bytes;
  return r;
}

plan::Candidate candidate(const char* preset, int nodes, std::optional<double> price) {
  plan::Candidate c;
  c.cluster = *hw::find_cluster_preset(preset);
  c.cluster.nodes = nodes;
  c.name = preset;
  c.price_per_gpu_hour = price;
  return c;
}

/// A plan of Llama 3.1 8B (seq 8192, global batch 128) over 8.64e10 tokens, 1 day at 1e6
/// tokens/s, without failures; `model` and `training` must outlive it.
plan::PlanInput one_day_plan(const model::Model& model, parallel::Training& training) {
  training.seq_len = 8192;
  training.global_batch = 128;
  plan::PlanInput in;
  in.model = &model;
  in.training = &training;
  in.settings.tokens = 8.64e10;
  in.settings.goodput.failures_per_gpu_hour = 0;
  return in;
}

}  // namespace

TEST_SUITE("plan") {
  TEST_CASE("Llama 3's failure rate per GPU-hour") {
    // arXiv 2407.21783 §3.3.4: 419 unexpected interruptions in a 54-day snapshot on 16,384
    // H100: 419 / (54 · 24 · 16,384) = 419 / 21,233,664 = 1.97328e-5 per GPU-hour, one
    // failure of the whole job every 54 · 24 / 419 = 3.093 h.
    CHECK(plan::kDefaultFailuresPerGpuHour == approx(1.97328167e-5).epsilon(1e-8));
    CHECK(1.0 / (plan::kDefaultFailuresPerGpuHour * 16384) == approx(3.0931).epsilon(1e-4));
  }

  TEST_CASE("Young / Daly interval and goodput by hand") {
    // 16,384 GPUs at Llama 3's rate: M = 3600 / (1.97328e-5 · 16,384) = 11,135.08 s.
    // A 4 TB checkpoint at 2 TB/s (Llama 3's sustained storage, §3.3.1): δ = 2 s.
    // Young 1974 (CACM 17(9)): τ = sqrt(2 δ M) = sqrt(2 · 2 · 11,135.08) = 211.046 s.
    // Checkpoints: δ/τ = 2 / 211.046 = 0.0094766.
    // Failures (Daly 2006, first order): (R + (τ + δ)/2) / M = (600 + 106.523) / 11,135.08
    //   = 0.0634502 of the wall time.
    // Goodput = (1 − 0.0634502) / (1 + 0.0094766) = 0.9277578.
    plan::GoodputParams p;  // the defaults: Llama 3's rate and storage, 10 min restart
    const plan::Goodput g = plan::goodput(16384, 4e12, p);
    CHECK(g.checkpoint_write_s == approx(2.0));
    CHECK(g.mtbf_s == approx(11135.083532).epsilon(1e-9));
    CHECK(g.interval_s == approx(211.04581).epsilon(1e-8));
    CHECK(g.checkpoint_fraction == approx(0.0094766155).epsilon(1e-8));
    CHECK(g.failure_fraction == approx(0.0634501666).epsilon(1e-8));
    CHECK(g.goodput == approx(0.9277578292).epsilon(1e-9));

    SUBCASE("the interval scales with sqrt(delta M)") {
      // 4x the checkpoint, 1/4 of the GPUs: δ 4x, M 4x, so τ 4x.
      const plan::Goodput h = plan::goodput(4096, 16e12, p);
      CHECK(h.interval_s == approx(4.0 * g.interval_s).epsilon(1e-12));
    }
    SUBCASE("no failures: nothing lost, no interval") {
      p.failures_per_gpu_hour = 0;
      const plan::Goodput h = plan::goodput(16384, 4e12, p);
      CHECK(h.goodput == 1.0);
      CHECK(std::isinf(h.interval_s));
      CHECK(std::isinf(h.mtbf_s));
    }
    SUBCASE("failures faster than the restart: the job never finishes") {
      p.restart_s = 20000;  // longer than M
      CHECK(plan::goodput(16384, 4e12, p).goodput == 0.0);
    }
  }

  TEST_CASE("checkpoint bytes are weights and Adam states, 14 B per parameter in BF16") {
    // memory model (Megatron-LM docs/user-guide/features/dist_optimizer.md): 2 B bf16 weights
    // + 12 B fp32 master and moments.
    const model::Model m = *model::find_model_preset("llama3.1-405b");
    parallel::Training t;
    t.seq_len = 8192;
    t.global_batch = 2048;
    const double params = static_cast<double>(parallel::total_params(m, t.seq_len));
    CHECK(plan::checkpoint_bytes(m, t, *hw::find_cluster_preset("dgx-h100")) == approx(14.0 * params));
    CHECK(14.0 * params == approx(5.682e12).epsilon(1e-3));
  }

  TEST_CASE("Pareto front of a hand-made set") {
    // (days, cost): A(10,100) B(20,50) C(15,80) D(30,50) E(10,120) F(40,20) G(20,50)
    // D is dominated by B (fewer days, same cost), E by A (same days, cheaper); B and G are
    // equal, so neither dominates the other.
    const std::vector<std::pair<double, double>> pts{{10, 100}, {20, 50}, {15, 80}, {30, 50},
                                                     {10, 120}, {40, 20}, {20, 50}};
    const std::vector<bool> front = plan::pareto_front(pts);
    CHECK(front == std::vector<bool>{true, true, true, false, false, true, true});
    CHECK(plan::pareto_front({}).empty());
  }

  TEST_CASE("shard split: round robin, every candidate once") {
    CHECK(plan::shard_indices(7, 1, 3) == std::vector<std::size_t>{0, 3, 6});
    CHECK(plan::shard_indices(7, 2, 3) == std::vector<std::size_t>{1, 4});
    CHECK(plan::shard_indices(7, 3, 3) == std::vector<std::size_t>{2, 5});
    CHECK(plan::shard_indices(2, 3, 3).empty());
    CHECK(plan::shard_indices(5, 1, 1) == std::vector<std::size_t>{0, 1, 2, 3, 4});
  }

  TEST_CASE("energy by hand: GPUs × power under training load × hours × PUE") {
    // Llama 3's 54-day snapshot on 16,384 H100 SXM (arXiv 2407.21783 §3.3.4) at the 700 W the
    // H100 datasheet rates: 16,384 × 700 W × 1,296 h = 14,863.5648 MWh of GPU energy; at the
    // Uptime Institute's 2024 average PUE of 1.56, 23,187.1611 MWh from the grid.
    const hw::Gpu h100 = *hw::find_gpu_preset("h100-sxm-80gb");
    CHECK(plan::training_power_w(h100) == 700.0);
    CHECK(plan::kDefaultPue == 1.56);
    CHECK(plan::energy_mwh(16384, plan::training_power_w(h100), 54 * 24, 1.0) == approx(14863.5648).epsilon(1e-12));
    CHECK(plan::energy_mwh(16384, plan::training_power_w(h100), 54 * 24, plan::kDefaultPue) ==
          approx(23187.161088).epsilon(1e-12));
    // Meta's model card counts Llama 3.1 405B's training the same way: 30.84 M H100 GPU-hours
    // at 700 W (meta-llama/llama-models: models/llama3_1/MODEL_CARD.md) = 21,588 MWh.
    CHECK(plan::energy_mwh(1, 700, 30.84e6, 1.0) == approx(21588.0).epsilon(1e-12));
    // A GPU held to a lower limit draws the limit; one without a known rating, nothing known.
    hw::Gpu capped = h100;
    capped.power_limit_w = 500;
    CHECK(plan::training_power_w(capped) == 500.0);
    CHECK(plan::energy_mwh(8, 500, 10, 1.2) == approx(0.048));  // 8 × 500 W × 10 h × 1.2
    hw::Gpu custom;
    CHECK(plan::training_power_w(custom) == 0.0);
    // Every preset GPU has a rating, the datasheet's board power.
    const double rated[] = {400, 400, 700, 700, 700, 1000, 1100, 1200, 1400};
    std::size_t i = 0;
    for (const hw::Gpu& g : hw::gpu_presets()) {
      CAPTURE(g.name);
      REQUIRE(i < std::size(rated));
      CHECK(plan::training_power_w(g) == rated[i++]);
    }
  }

  TEST_CASE("days, GPU-hours and cost of one candidate by hand") {
    const model::Model model = *model::find_model_preset("llama3.1-8b");
    parallel::Training training;
    plan::PlanInput in = one_day_plan(model, training);
    in.settings.tokens = 1e12;
    in.settings.goodput = plan::GoodputParams{};  // Llama 3's failure rate unless a subcase says
    in.candidates.push_back(candidate("dgx-h100", 8, 2.0));  // 64 GPUs at 2.0 per GPU-hour
    std::vector<plan::Evaluation> ev(1);
    ev[0].best = row_with(1e6, 50.0 * 1024 * 1024 * 1024);  // 1M tokens/s, 50 GiB peak

    SUBCASE("without failures") {
      in.settings.goodput.failures_per_gpu_hour = 0;
      const plan::Report rep = plan::assemble(in, ev);
      const plan::Row& r = rep.rows[0];
      // 1e12 tokens / 1e6 tokens/s = 1e6 s = 11.5741 days; 64 GPUs × 277.78 h = 17,777.8
      // GPU-hours; × 2.0 = 35,555.6.
      CHECK(r.compute_days == approx(11.574074).epsilon(1e-7));
      CHECK(r.days == approx(11.574074).epsilon(1e-7));
      CHECK(r.gpu_hours == approx(17777.778).epsilon(1e-7));
      REQUIRE(r.cost);
      CHECK(*r.cost == approx(35555.556).epsilon(1e-7));
      // 79.65 GiB H100 (80 GB label) − 50 GiB, passed on from the search row.
      CHECK(r.headroom_bytes / (1024.0 * 1024 * 1024) == approx(29.65).epsilon(1e-3));
      // Energy: 17,777.78 GPU-hours × 700 W (H100 SXM, plan/energy.hpp) = 12.4444 MWh of GPU
      // energy; × PUE 1.56 (Uptime Institute 2024) = 19.4133 MWh.
      CHECK(r.gpu_power_w == 700.0);
      REQUIRE(r.energy_mwh);
      CHECK(*r.energy_mwh == approx(19.413333).epsilon(1e-7));
      CHECK(rep.priced);
      CHECK(r.pareto);
      CHECK(r.rank_days == 1);
      CHECK(r.rank_cost == 1);
    }
    SUBCASE("with failures and checkpoints") {
      // λ = 1/6400 per GPU-hour on 64 GPUs: one failure per 100 h, M = 360,000 s.
      // Checkpoint 8,030,261,248 params × 14 B = 112,423,657,472 B at 1/36 of that per second:
      // δ = 36 s. τ = sqrt(2 · 36 · 360,000) = 5,091.169 s; δ/τ = 0.00707107;
      // failures (0 + (5,091.169 + 36)/2) / 360,000 = 0.00712107; goodput =
      // (1 − 0.00712107) / (1 + 0.00707107) = 0.985908. Days 11.574074 / 0.985908 = 11.739513.
      in.settings.goodput.failures_per_gpu_hour = 1.0 / 6400.0;
      in.settings.goodput.restart_s = 0;
      in.settings.goodput.checkpoint_bandwidth_Bps = 112423657472.0 / 36.0;
      const plan::Report rep = plan::assemble(in, ev);
      const plan::Row& r = rep.rows[0];
      CHECK(rep.checkpoint_bytes == approx(112423657472.0));
      CHECK(r.goodput.checkpoint_write_s == approx(36.0));
      CHECK(r.goodput.mtbf_s == approx(360000.0));
      CHECK(r.goodput.interval_s == approx(5091.169).epsilon(1e-6));
      CHECK(r.goodput.goodput == approx(0.9859075).epsilon(1e-6));
      CHECK(r.days == approx(11.739513).epsilon(1e-6));
      CHECK(r.gpu_hours == approx(64 * 24 * 11.739513).epsilon(1e-6));
      CHECK(*r.cost == approx(2.0 * 64 * 24 * 11.739513).epsilon(1e-6));
    }
  }

  TEST_CASE("ranking, Pareto front, deadline and budget over several candidates") {
    const model::Model model = *model::find_model_preset("llama3.1-8b");
    parallel::Training training;
    plan::PlanInput in = one_day_plan(model, training);
    in.settings.deadline_days = 1.5;
    in.settings.budget = 5000;
    // 0: 64 GPUs, 1e6 tok/s, 2.0 → 1 day, 1,536 GPU-h, 3,072
    // 1: 128 GPUs, 1.6e6 tok/s, 3.0 → 0.625 days, 1,920 GPU-h, 5,760 (over budget)
    // 2: 64 GPUs, 0.5e6 tok/s, 1.0 → 2 days, 3,072 GPU-h, 3,072 (misses the deadline;
    //    same cost as 0, slower: dominated)
    // 3: 64 GPUs, no layout fits
    // 4: 64 GPUs, 0.8e6 tok/s, 1.5 → 1.25 days, 1,920 GPU-h, 2,880 (cheapest)
    in.candidates = {candidate("dgx-h100", 8, 2.0), candidate("dgx-h100", 16, 3.0), candidate("dgx-a100-80gb", 8, 1.0),
                     candidate("dgx-a100-40gb", 8, 0.5), candidate("hgx-h200", 8, 1.5)};
    std::vector<plan::Evaluation> ev(5);
    ev[0].best = row_with(1e6, 1e9);
    ev[1].best = row_with(1.6e6, 1e9);
    ev[2].best = row_with(0.5e6, 1e9);
    ev[4].best = row_with(0.8e6, 1e9);
    const plan::Report rep = plan::assemble(in, ev);
    CHECK(rep.rows[0].days == approx(1.0));
    CHECK(*rep.rows[1].cost == approx(5760.0));
    CHECK(*rep.rows[4].cost == approx(2880.0));
    CHECK(rep.by_days == std::vector<std::size_t>{1, 0, 4, 2});
    CHECK(rep.by_cost == std::vector<std::size_t>{4, 0, 2, 1});
    CHECK(rep.pareto == std::vector<std::size_t>{1, 0, 4});
    CHECK(rep.meeting == std::vector<std::size_t>{4, 0});
    CHECK_FALSE(rep.rows[3].fits);
    CHECK(rep.rows[3].rank_days == 0);
    // No band on these candidates: the prediction decides.
    CHECK(*rep.rows[1].deadline == plan::Verdict::meets);
    CHECK(*rep.rows[1].budget == plan::Verdict::misses);
    CHECK(*rep.rows[2].deadline == plan::Verdict::misses);
    CHECK(rep.at_risk.empty());

    SUBCASE("without prices: the front is the fastest, no cost") {
      for (auto& c : in.candidates) c.price_per_gpu_hour.reset();
      in.settings.budget.reset();
      const plan::Report r2 = plan::assemble(in, ev);
      CHECK_FALSE(r2.priced);
      CHECK(r2.by_cost.empty());
      CHECK(r2.pareto == std::vector<std::size_t>{1});
      CHECK_FALSE(r2.rows[0].cost.has_value());
      CHECK(r2.meeting == std::vector<std::size_t>{1, 0, 4});  // by days, deadline 1.5
    }
  }

  TEST_CASE("verdicts read the band: met at its slow end, at risk inside it, missed beyond its fast end") {
    // A band of 8 .. 12 days around a 10-day prediction.
    const std::optional<plan::Range> band = plan::Range{8.0, 12.0};
    CHECK(plan::verdict_of(10.0, band, 12.0) == plan::Verdict::meets);
    CHECK(plan::verdict_of(10.0, band, 11.0) == plan::Verdict::at_risk);
    CHECK(plan::verdict_of(10.0, band, 8.0) == plan::Verdict::at_risk);
    CHECK(plan::verdict_of(10.0, band, 7.9) == plan::Verdict::misses);
    CHECK(plan::verdict_of(10.0, std::nullopt, 10.0) == plan::Verdict::meets);
    CHECK(plan::verdict_of(10.0, std::nullopt, 9.9) == plan::Verdict::misses);
    CHECK(std::string(plan::to_string(plan::Verdict::at_risk)) == "at risk");

    const model::Model model = *model::find_model_preset("llama3.1-8b");
    parallel::Training training;
    plan::PlanInput in = one_day_plan(model, training);
    in.settings.deadline_days = 1.2;
    // A band of signed errors -20 % .. +5 %: the measured step lies between predicted / 1.05
    // and predicted / 0.8, so a 1-day prediction spans 0.952381 .. 1.25 days.
    costmodel::StepBand step_band;
    step_band.basis = "zero-shot";
    step_band.regime = "megatron";
    step_band.band.rows = 100;
    step_band.band.low_error = -0.20;
    step_band.band.high_error = 0.05;
    // 0: 1e6 tok/s, 1 day: 0.952 .. 1.25, the deadline inside: at risk.
    // 1: 1.1e6 tok/s, 0.909 days: 0.866 .. 1.136, within even at the slow end: meets.
    // 2: 0.8e6 tok/s, 1.25 days: 1.190 .. 1.5625, within only at the fast end: at risk.
    // 3: 0.7e6 tok/s, 1.429 days: 1.361 .. 1.786, beyond the fast end: misses.
    std::vector<plan::Evaluation> ev;
    for (const double tokens_per_s : {1e6, 1.1e6, 0.8e6, 0.7e6}) {
      in.candidates.push_back(candidate("dgx-h100", 8, std::nullopt));
      in.candidates.back().band = step_band;
      ev.emplace_back().best = row_with(tokens_per_s, 1e9);
    }
    const plan::Report rep = plan::assemble(in, ev);
    REQUIRE(rep.rows[0].days_band.has_value());
    CHECK(rep.rows[0].days_band->low == approx(1.0 / 1.05));
    CHECK(rep.rows[0].days_band->high == approx(1.25));
    CHECK(*rep.rows[0].deadline == plan::Verdict::at_risk);
    CHECK(*rep.rows[1].deadline == plan::Verdict::meets);
    CHECK(*rep.rows[2].deadline == plan::Verdict::at_risk);
    CHECK(*rep.rows[3].deadline == plan::Verdict::misses);
    CHECK(rep.meeting == std::vector<std::size_t>{1});
    CHECK(rep.at_risk == std::vector<std::size_t>{0, 2});  // by days
  }
}
