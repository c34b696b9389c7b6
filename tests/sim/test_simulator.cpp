// End-to-end simulation of one step from presets and the built-in profiles.
#include <doctest/doctest.h>
#include "support/trace_text.hpp"
#include "support/approx.hpp"

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "tetra/costmodel/builtin_profiles.hpp"
#include "tetra/costmodel/memory.hpp"
#include "tetra/costmodel/offload.hpp"
#include "tetra/hw/presets.hpp"
#include "tetra/model/presets.hpp"
#include "tetra/parallel/validate.hpp"
#include "tetra/sim/simulator.hpp"

using tetra::test::approx;
using namespace tetra;

namespace {
struct Fixture {
  model::Model model;
  hw::Cluster cluster;
  parallel::Training training;
  costmodel::CostParams costs;
  Fixture(const char* model_name, const char* cluster_name, int nodes) {
    model = *model::find_model_preset(model_name);
    cluster = *hw::find_cluster_preset(cluster_name);
    cluster.nodes = nodes;
    costs = costmodel::cost_params(cluster);
  }
  sim::SimInput input(const parallel::Layout& l) const {
    return sim::sim_input(model, cluster, training, l, costs);
  }
};

// The layout of scenarios/default.toml: Llama-3.1-70B, 8 x DGX H100, TP 8, PP 4, DP 2.
parallel::Layout default_layout() {
  parallel::Layout l;
  l.tp = 8;
  l.pp = 4;
  l.dp = 2;
  l.sp = true;
  return l;
}
}  // namespace

TEST_SUITE("sim") {
  TEST_CASE("simulate: pipeline boundaries between pods of an oversubscribed fabric") {
    // 32 DGX H100 nodes in pods of 8 nodes, 1:7 above them (the shape of Llama 3's cluster,
    // arXiv 2407.21783 §3.3.1). TP 8, PP 8, DP 4: under Megatron's order (PP outermost) a
    // stage is 32 GPUs and every second boundary leaves its pod with the whole stage sending,
    // each GPU at 64 / (7 x 32) of its NIC; under [TP, CP, PP, DP] (Llama 3's own order) a
    // pipeline is one pod and only the DP rings cross, by one edge per pod.
    Fixture f("llama3.1-70b", "dgx-h100", 32);
    f.training.seq_len = 8192;
    f.training.global_batch = 64;
    parallel::Layout l = default_layout();
    l.pp = 8;
    l.dp = 4;
    const sim::Result flat = sim::simulate(f.input(l));
    f.cluster.inter.pod_gpus = 64;
    f.cluster.inter.oversubscription = 7;
    f.costs = costmodel::cost_params(f.cluster);
    const sim::Result pods = sim::simulate(f.input(l));
    MESSAGE("flat " << flat.step_time_s << " s (PP " << flat.exposed.pp << "), pods " << pods.step_time_s
                    << " s (PP " << pods.exposed.pp << ")");
    CHECK(pods.exposed.pp > flat.exposed.pp);
    CHECK(pods.step_time_s > flat.step_time_s);
    parallel::Layout own = l;
    own.rank_order = "tp-cp-pp-dp";
    const sim::Result own_pods = sim::simulate(f.input(own));
    f.cluster.inter.pod_gpus = 0;
    f.cluster.inter.oversubscription = 1;
    f.costs = costmodel::cost_params(f.cluster);
    const sim::Result own_flat = sim::simulate(f.input(own));
    CHECK(own_pods.exposed.pp == approx(own_flat.exposed.pp));
  }

  TEST_CASE("simulate: a shared layer cache keeps layouts apart that re-run different modules") {
    // The layer tables depend on what a selective layout re-runs (recomputed_modules), so two
    // layouts that differ only in recompute_modules must not share them.
    Fixture f("llama3.1-8b", "dgx-h100", 1);
    f.training.seq_len = 8192;
    f.training.global_batch = 32;
    parallel::Layout core;
    core.tp = 2;
    core.sp = true;
    core.dp = 4;
    core.recompute = parallel::Recompute::selective;
    parallel::Layout mlp = core;
    mlp.recompute_modules.add(parallel::RecomputeModule::mlp);
    CHECK_FALSE(sim::layer_key(f.training, core, 8) == sim::layer_key(f.training, mlp, 8));
    sim::LayerCache cache;
    sim::SimOptions shared;
    shared.layer_cache = &cache;
    const double core_step = sim::simulate(f.input(core), shared).step_time_s;
    const double mlp_step = sim::simulate(f.input(mlp), shared).step_time_s;
    CHECK(cache.size() == 2);
    CHECK(mlp_step == approx(sim::simulate(f.input(mlp)).step_time_s));
    CHECK(mlp_step > core_step);  // the MLP's forward runs again
  }

  TEST_CASE("simulate: a shared layer cache keeps apart layouts whose micro-batch counts differ") {
    // Transformer Engine casts each weight to FP8 once per step, spread over the step's
    // micro-batches, and eager frameworks accumulate gradients once per micro-batch: the layer
    // tables then depend on global_batch / (mbs * dp), which pp changes at a fixed GPU count.
    // Reading a pp = 1 layout's tables for pp = 2 once gave a step 13 us longer than its own.
    for (const parallel::Framework fw : {parallel::Framework::megatron, parallel::Framework::fsdp}) {
      Fixture f("llama3.1-8b", "dgx-h100", 2);
      f.training.seq_len = 4096;
      f.training.global_batch = 64;
      f.training.framework = fw;
      if (fw == parallel::Framework::megatron) f.training.fp8.recipe = parallel::Fp8Recipe::delayed;
      parallel::Layout one;
      one.dp = 16;
      parallel::Layout two = one;
      two.pp = 2;
      two.dp = 8;
      CHECK_FALSE(sim::layer_key(f.training, one, 8) == sim::layer_key(f.training, two, 8));
      sim::LayerCache cache;
      sim::SimOptions shared;
      shared.layer_cache = &cache;
      (void)sim::simulate(f.input(one), shared);
      CHECK(sim::simulate(f.input(two), shared).step_time_s == sim::simulate(f.input(two)).step_time_s);
    }
  }

  TEST_CASE("simulate: the layer key holds every layout field the layer tables read") {
    // For each base run and each change of one layout field (others adjusted to keep the GPU
    // count), the step with tables the base left in a shared cache equals the step with tables
    // of its own: a field the op builders read but the key misses would hand the changed
    // layout the base's tables.
    struct Base {
      const char* model;
      parallel::Framework framework;
      parallel::Fp8Recipe recipe;
      parallel::Layout layout;
    };
    parallel::Layout dense;
    dense.tp = 2;
    dense.sp = true;
    dense.pp = 2;
    dense.dp = 4;
    parallel::Layout moe = dense;
    moe.ep = 4;
    const Base bases[] = {
        {"llama3.1-8b", parallel::Framework::megatron, parallel::Fp8Recipe::delayed, dense},
        {"llama3.1-8b", parallel::Framework::fsdp, parallel::Fp8Recipe::none, dense},
        {"qwen3-30b-a3b", parallel::Framework::megatron, parallel::Fp8Recipe::none, moe},
    };
    using Change = void (*)(parallel::Layout&);
    const std::pair<const char*, Change> changes[] = {
        {"tp", [](parallel::Layout& l) { l.tp *= 2, l.dp /= 2; }},
        {"cp", [](parallel::Layout& l) { l.cp = 2, l.dp /= 2; }},
        {"pp", [](parallel::Layout& l) { l.pp *= 2, l.dp /= 2; }},
        {"dp", [](parallel::Layout& l) { l.dp /= 2, l.pp *= 2; }},
        {"dp_replicate", [](parallel::Layout& l) { l.dp_replicate = 2; }},
        {"vp", [](parallel::Layout& l) { l.vp = 2, l.schedule = parallel::Schedule::interleaved; }},
        {"mbs", [](parallel::Layout& l) { l.mbs = 2; }},
        {"sp", [](parallel::Layout& l) { l.sp = !l.sp; }},
        {"recompute full", [](parallel::Layout& l) { l.recompute = parallel::Recompute::full; }},
        {"recompute selective", [](parallel::Layout& l) { l.recompute = parallel::Recompute::selective; }},
        {"recompute_modules", [](parallel::Layout& l) {
           l.recompute = parallel::Recompute::selective;
           l.recompute_modules.add(parallel::RecomputeModule::mlp);
         }},
        {"ac_freq", [](parallel::Layout& l) { l.recompute = parallel::Recompute::selective_layer, l.ac_freq = 3; }},
        {"schedule", [](parallel::Layout& l) { l.schedule = parallel::Schedule::zb_h1; }},
        {"rank_order", [](parallel::Layout& l) { l.rank_order = "tp-dp-cp-pp"; }},
        {"first_stage_layers", [](parallel::Layout& l) { l.first_stage_layers = 14; }},
        {"ep", [](parallel::Layout& l) { l.ep = l.ep > 1 ? 2 : 1; }},
        {"etp", [](parallel::Layout& l) { l.etp = 2; }},
        {"moe_dispatcher", [](parallel::Layout& l) { l.moe_dispatcher = parallel::MoeDispatcher::flex; }},
        {"moe_flex_backend", [](parallel::Layout& l) {
           l.moe_dispatcher = parallel::MoeDispatcher::flex;
           l.moe_flex_backend = parallel::FlexBackend::hybridep;
         }},
    };
    int compared = 0;
    for (const Base& b : bases) {
      Fixture f(b.model, "dgx-h100", 2);
      f.training.seq_len = 4096;
      f.training.global_batch = 64;
      f.training.framework = b.framework;
      f.training.zero_stage = b.framework == parallel::Framework::fsdp ? 3 : 1;
      f.training.fp8.recipe = b.recipe;
      REQUIRE_FALSE(parallel::check_layout(f.model, 16, f.training, b.layout));
      for (const auto& [field, change] : changes) {
        parallel::Layout l = b.layout;
        change(l);
        if (parallel::check_layout(f.model, 16, f.training, l)) continue;  // not a valid run
        const std::string what = std::string(b.model) + ", " + parallel::to_string(b.framework) + ", " + field;
        CAPTURE(what);
        sim::LayerCache cache;
        sim::SimOptions shared;
        shared.layer_cache = &cache;
        (void)sim::simulate(f.input(b.layout), shared);
        CHECK(sim::simulate(f.input(l), shared).step_time_s == sim::simulate(f.input(l)).step_time_s);
        ++compared;
      }
    }
    CHECK(compared >= 30);
  }

  TEST_CASE("simulate: hierarchical CP (a2a+p2p), each split of cp its own layer tables, against Megatron-Bridge's guide") {
    // Llama 3.1 8B, 128K tokens, 4 DGX H100, full recompute, no mask in the data loader.
    // Megatron-Bridge docs/training/hierarchical-context-parallel.md ("Decision example", 8 KV
    // heads, 4 nodes x 8 GPUs, 128K sequences): option A, TP 1 CP 16 under a2a+p2p [8, 2], and
    // option B, TP 2 CP 4 under a2a, "benchmarks showed identical throughput ... with more
    // memory headroom" for B.
    Fixture f("llama3.1-8b", "dgx-h100", 4);
    f.training.seq_len = 131072;
    f.training.global_batch = 32;
    f.training.attention = parallel::AttentionKernel::cudnn;
    f.training.dataloader_mask = parallel::LoaderMask::none;
    parallel::Layout a;
    a.cp = 16;
    a.dp = 2;
    a.recompute = parallel::Recompute::full;
    a.cp_comm = parallel::CpComm::a2a_p2p;
    a.cp_a2a = 8;
    parallel::Layout b = a;
    b.tp = 2;
    b.sp = true;
    b.cp = 4;
    b.dp = 4;
    b.cp_comm = parallel::CpComm::a2a;
    b.cp_a2a = 1;
    REQUIRE_FALSE(parallel::check_layout(f.model, 32, f.training, a));
    REQUIRE_FALSE(parallel::check_layout(f.model, 32, f.training, b));
    const sim::Result ra = sim::simulate(f.input(a));
    const sim::Result rb = sim::simulate(f.input(b));
    CHECK(ra.tokens_per_s == approx(rb.tokens_per_s).epsilon(0.05));
    CHECK(rb.peak_bytes < ra.peak_bytes);
    // The all-to-all level is part of the layer's shape: a cache that priced [8, 2] hands
    // [4, 4] its own tables.
    parallel::Layout a4 = a;
    a4.cp_a2a = 4;
    sim::LayerCache cache;
    sim::SimOptions shared;
    shared.layer_cache = &cache;
    (void)sim::simulate(f.input(a), shared);
    const double own = sim::simulate(f.input(a4)).step_time_s;
    CHECK(sim::simulate(f.input(a4), shared).step_time_s == own);
    CHECK(own != ra.step_time_s);
  }

  TEST_CASE("simulate: the default scenario gives a plausible step") {
    Fixture f("llama3.1-70b", "dgx-h100", 8);
    f.training.seq_len = 8192;
    f.training.global_batch = 128;
    const auto r = sim::simulate(f.input(default_layout()));
    CAPTURE(r.step_time_s);
    CAPTURE(r.mfu);
    CHECK(r.step_time_s > 0);
    CHECK(r.mfu > 0.25);  // published Megatron runs of this class: 35-50 % MFU
    CHECK(r.mfu < 0.65);
    CHECK(r.stages.size() == 4);
    CHECK(r.bubble_fraction > 0.0);
    CHECK(r.bubble_fraction < 0.1);  // (p-1)/(m+p-1) = 3/67 with 64 micro-batches
    CHECK(r.exposed.tp > 0);        // TP all-gather / reduce-scatter on the forward path block
    CHECK(r.stages[0].inflight == approx(4.0));
  }

  TEST_CASE("simulate: per-tensor FP8 casts write one copy where the GPU's GEMMs take any layout "
            "(TE nvte_is_non_tn_fp8_gemm_supported)") {
    // Llama-3.1-8B on one DGX B200, current scaling: the simulator prices the casts for the
    // cluster's GPU. The same GPU declared TN-only (compute capability 9.0) writes the
    // transposed copy as well, a longer step; MXFP8 keeps both copies on either.
    Fixture f("llama3.1-8b", "dgx-b200", 1);
    f.training.seq_len = 8192;
    f.training.global_batch = 64;
    f.training.fp8.recipe = parallel::Fp8Recipe::current;
    parallel::Layout l;
    l.dp = 8;
    l.mbs = 2;
    const double blackwell = sim::simulate(f.input(l)).step_time_s;
    Fixture tn = f;
    tn.cluster.gpu.compute_capability = 90;
    tn.costs = costmodel::cost_params(tn.cluster);
    const double tn_only = sim::simulate(tn.input(l)).step_time_s;
    CAPTURE(blackwell);
    CAPTURE(tn_only);
    CHECK(blackwell < tn_only);
    // What else compute capability 9.0 changes (the attention kernels) moves MXFP8 by less.
    f.training.fp8.recipe = parallel::Fp8Recipe::mxfp8;
    tn.training.fp8.recipe = parallel::Fp8Recipe::mxfp8;
    const double mx_change =
        sim::simulate(tn.input(l)).step_time_s - sim::simulate(f.input(l)).step_time_s;
    CAPTURE(mx_change);
    CHECK(std::abs(mx_change) < 0.5 * (tn_only - blackwell));
  }

  TEST_CASE("simulate: the same input gives byte-identical traces and the trace is valid JSON") {
    Fixture f("llama3.1-8b", "dgx-h100", 2);
    f.training.seq_len = 4096;
    f.training.global_batch = 32;
    parallel::Layout l;
    l.tp = 2;
    l.pp = 2;
    l.dp = 4;
    l.sp = true;
    sim::SimOptions o;
    o.record_trace = true;
    sim::Simulator a, b;
    const auto ra = a.run(f.input(l), o);
    const auto rb = b.run(f.input(l), o);
    CHECK(ra.step_time_s == rb.step_time_s);
    const std::string ta = tetra::test::trace_text(a);
    CHECK(ta == tetra::test::trace_text(b));
    const auto j = nlohmann::json::parse(ta);
    REQUIRE(j.contains("traceEvents"));
    int processes = 0, counters = 0, slices = 0;
    bool tp_thread = false;
    for (const auto& e : j["traceEvents"]) {
      const std::string ph = e["ph"];
      if (ph == "M" && e["name"] == "process_name") ++processes;
      if (ph == "M" && e["name"] == "thread_name" && e["args"]["name"] == "tp comm") tp_thread = true;
      if (ph == "C") ++counters;
      if (ph == "X") {
        ++slices;
        CHECK(e["dur"].get<double>() >= 0);
      }
    }
    CHECK(processes == 2);
    CHECK(tp_thread);
    CHECK(counters > 0);
    CHECK(slices > 0);
  }

  TEST_CASE("simulate: every schedule runs and interleaving / zb-h1 beat 1f1b on a deep pipeline") {
    Fixture f("llama2-13b", "dgx-a100-80gb", 4);
    f.training.seq_len = 4096;
    f.training.global_batch = 64;
    parallel::Layout l;
    l.tp = 4;
    l.pp = 8;
    l.dp = 1;
    l.sp = true;
    const auto base = sim::simulate(f.input(l));
    l.schedule = parallel::Schedule::zb_h1;
    const auto zb = sim::simulate(f.input(l));
    l.schedule = parallel::Schedule::interleaved;
    l.vp = 5;
    const auto il = sim::simulate(f.input(l));
    l.schedule = parallel::Schedule::gpipe;
    l.vp = 1;
    const auto gp = sim::simulate(f.input(l));
    CHECK(zb.step_time_s < base.step_time_s);
    CHECK(il.step_time_s < base.step_time_s);
    CHECK(gp.stages[0].inflight > base.stages[0].inflight);
  }
}

TEST_SUITE("sim") {
  TEST_CASE("simulate: Llama 3's interleaved layout with one layer fewer on the end stages") {
    // arXiv 2407.21783 section 3.3.2 / Table 4: TP 8, CP 1, PP 16, DP 128, 126 layers,
    // interleaved; vp 8 -> 128 chunks of 1 layer, the very first holds only the embedding
    // and the very last only the head (parallel::chunk_layers).
    Fixture f("llama3.1-405b", "dgx-h100", 2048);
    f.training.seq_len = 8192;
    f.training.global_batch = 2048;
    parallel::Layout l;
    l.tp = 8;
    l.pp = 16;
    l.dp = 128;
    l.sp = true;
    l.first_stage_layers = 7;
    l.last_stage_layers = 7;
    const auto flat = sim::simulate(f.input(l));  // 1f1b, vp 1
    l.vp = 8;
    l.schedule = parallel::Schedule::interleaved;
    sim::Simulator s;
    const auto il = s.run(f.input(l));
    REQUIRE(il.stages.size() == 16);
    CHECK(il.stages[0].layers == 7);
    CHECK(il.stages[1].layers == 8);
    CHECK(il.stages[15].layers == 7);
    CHECK(il.micro_batches == 16);
    CHECK(il.step_time_s > 0);
    // Interleaving shrinks the bubble: (p-1)/(v m) against (p-1)/m of 1F1B.
    CHECK(il.bubble_fraction < flat.bubble_fraction);
    // A reused simulator counts the events of its own run only.
    const auto again = s.run(f.input(l));
    CHECK(again.events == il.events);
    CHECK(again.step_time_s == il.step_time_s);
    // Layered gradient accumulation with vp > 1 (modular placement, Lamy-Poirier,
    // arXiv 2106.02679):
    // every micro-batch of a chunk in flight.
    l.schedule = parallel::Schedule::layered;
    l.vp = 2;
    const auto ly = sim::simulate(f.input(l));
    CHECK(ly.step_time_s > 0);
    CHECK(ly.stages[0].layers == 7);
    CHECK(ly.stages[0].inflight == approx(16.0));
  }

  TEST_CASE("simulate: steps longer than the replay cap are extrapolated linearly and stay fast") {
    Fixture f("llama3.1-8b", "dgx-h100", 1);
    f.training.seq_len = 2048;
    parallel::Layout l;
    l.tp = 2;
    l.pp = 4;
    l.dp = 1;
    l.sp = true;
    f.training.global_batch = sim::kMaxSimulatedMicroBatches;  // replayed exactly
    const auto exact = sim::simulate(f.input(l));
    f.training.global_batch = 4 * sim::kMaxSimulatedMicroBatches;  // extrapolated
    const auto big = sim::simulate(f.input(l));
    f.training.global_batch = 1000000;
    const auto huge = sim::simulate(f.input(l));
    // 1F1B in steady state: time per extra micro-batch is constant.
    const double per_mb = (big.step_time_s - exact.step_time_s) / (3.0 * sim::kMaxSimulatedMicroBatches);
    CHECK(per_mb > 0);
    CHECK(huge.step_time_s == approx(exact.step_time_s + per_mb * (1000000 - sim::kMaxSimulatedMicroBatches)).epsilon(1e-6));
    CHECK(huge.stages[0].inflight == approx(4.0));
    CHECK(huge.bubble_fraction < exact.bubble_fraction + 1e-9);
  }
}

TEST_SUITE("sim") {
  TEST_CASE("a cluster's step overhead (costmodel::Factors) adds to the step and idles every stage") {
    Fixture f("llama3.1-8b", "dgx-h100", 2);
    f.training.seq_len = 4096;
    f.training.global_batch = 32;
    parallel::Layout l;
    l.tp = 2;
    l.pp = 2;
    l.dp = 4;
    l.sp = true;
    const auto plain = sim::simulate(f.input(l));
    costmodel::Factors factors;
    factors.step_overhead_s = 0.75;
    costmodel::apply_factors(factors, f.costs);
    const auto slow = sim::simulate(f.input(l));
    CHECK(slow.step_time_s == approx(plain.step_time_s + 0.75));
    CHECK(slow.tokens_per_s == approx(32.0 * 4096 / (plain.step_time_s + 0.75)));
    REQUIRE(slow.stages.size() == plain.stages.size());
    for (std::size_t r = 0; r < slow.stages.size(); ++r) {
      CHECK(slow.stages[r].busy_s == plain.stages[r].busy_s);
      CHECK(slow.stages[r].idle_s == approx(plain.stages[r].idle_s + 0.75));
    }
  }

  TEST_CASE("simulate: a data loader slower than the GPUs paces the step and idles every stage") {
    // Llama 3.1 8B at 16k tokens, TP 8 on one DGX H100, 8 micro-batches of 1: Megatron-Core
    // building a mask for every sample needs (10 s² / 2.73e9 + 9 s² / 18.85e9) / 2 = 0.55572 s a
    // micro-batch with two workers at the default host rates (costmodel/data_loader.hpp).
    Fixture f("llama3.1-8b", "dgx-h100", 1);
    f.training.seq_len = 16384;
    f.training.global_batch = 8;
    parallel::Layout l;
    l.tp = 8;
    l.sp = true;
    f.training.dataloader_mask = parallel::LoaderMask::none;
    const auto plain = sim::simulate(f.input(l));
    CHECK(plain.data_loader_s == 0);
    CHECK(plain.data_loader_wait_s == 0);
    f.training.dataloader_mask = parallel::LoaderMask::per_sample;
    const auto paced = sim::simulate(f.input(l));
    REQUIRE(plain.step_time_s < 8 * 0.55572);  // the GPUs alone are faster than the loader
    CHECK(paced.data_loader_s == approx(8 * 0.55572).epsilon(1e-4));
    CHECK(paced.step_time_s == approx(paced.data_loader_s));
    CHECK(paced.data_loader_wait_s == approx(paced.step_time_s - plain.step_time_s));
    REQUIRE(paced.stages.size() == plain.stages.size());
    CHECK(paced.stages[0].busy_s == plain.stages[0].busy_s);
    CHECK(paced.stages[0].idle_s == approx(plain.stages[0].idle_s + paced.data_loader_wait_s));
    // The bounds a search prunes with hold the loader's pace too: the lower bound is the step
    // itself here, and the upper bound stays above it.
    sim::Simulator bounds;
    CHECK(bounds.step_lower_bound(f.input(l)) == approx(paced.step_time_s));
    CHECK(bounds.step_estimate(f.input(l)) == approx(paced.step_time_s));
    CHECK(bounds.step_upper_bound(f.input(l)) >= paced.step_time_s);
    // A cached mask is collated and pinned only: far faster than the GPUs, so no wait.
    f.training.dataloader_mask = parallel::LoaderMask::cached;
    const auto cached = sim::simulate(f.input(l));
    CHECK(cached.data_loader_s > 0);
    CHECK(cached.data_loader_wait_s == 0);
    CHECK(cached.step_time_s == plain.step_time_s);
    // A host at half the recorded speed (costmodel::Factors::host) builds the masks in twice
    // the time: 2 x 8 x 0.55572 s.
    f.training.dataloader_mask = parallel::LoaderMask::per_sample;
    costmodel::Factors half;
    half.host = 0.5;
    costmodel::apply_factors(half, f.costs);
    const auto slow_host = sim::simulate(f.input(l));
    CHECK(slow_host.data_loader_s == approx(2 * 8 * 0.55572).epsilon(1e-4));
    CHECK(slow_host.step_time_s == approx(slow_host.data_loader_s));
    costmodel::apply_factors(costmodel::Factors{}, f.costs);
    // Faster host memory: the loader keeps up again.
    f.cluster.host.first_touch_Bps = 100e9;
    f.cluster.host.copy_Bps = 100e9;
    const auto fast = sim::simulate(f.input(l));
    CHECK(fast.data_loader_wait_s == 0);
    CHECK(fast.step_time_s == plain.step_time_s);
  }

  TEST_CASE("simulate: a host-bound step follows the host's speed (costmodel::Factors::host)") {
    // Llama 3.1 8B on one DGX H100 at 64 tokens a micro-batch, 32 micro-batches a step: many
    // kernels are shorter than the 32.5 us the host takes to issue them, so the GPU waits for
    // the host (sim/layer.hpp HostCost); a host at half the speed lengthens the step by the
    // added wait.
    Fixture f("llama3.1-8b", "dgx-h100", 1);
    f.training.seq_len = 64;
    f.training.global_batch = 256;
    parallel::Layout l;
    l.dp = 8;
    const auto plain = sim::simulate(f.input(l));
    REQUIRE(plain.host_wait_s > 0);
    costmodel::Factors half;
    half.host = 0.5;
    costmodel::apply_factors(half, f.costs);
    const auto slow = sim::simulate(f.input(l));
    CHECK(slow.host_wait_s > plain.host_wait_s);
    CHECK(slow.step_time_s - plain.step_time_s ==
          approx(slow.host_wait_s - plain.host_wait_s).epsilon(0.05));
  }

  TEST_CASE("simulate: activation offloading waits for the copies its layers cannot hide") {
    // Llama 3.1 70B on 8 DGX H100, DP 64, 2 micro-batches of 1 x 8192. Offloading 79 of the 80
    // layers leaves one layer's forward (backward) to hide each copy over PCIe Gen5
    // (costmodel/offload.hpp: waits after layers 1, 2, ..., 79), at 55.06 GB/s.
    Fixture f("llama3.1-70b", "dgx-h100", 8);
    f.training.seq_len = 8192;
    f.training.global_batch = 128;
    parallel::Layout l;
    l.dp = 64;
    const auto kept = sim::simulate(f.input(l));
    CHECK(kept.offload_exposed_s == 0);
    l.offload_layers = 79;
    const auto most = sim::simulate(f.input(l));
    const double bytes = costmodel::offloaded_bytes_per_layer(f.model, f.cluster, f.training, l);
    const double copy = bytes / 55.06e9;
    REQUIRE(copy > most.layer_forward_s);  // a layer's activations take longer than its forward
    const double per_micro_batch = 79 * (std::max(0.0, copy - most.layer_forward_s) +
                                         std::max(0.0, copy - most.layer_backward_s));
    CHECK(most.offload_exposed_s == approx(2 * per_micro_batch).epsilon(1e-6));
    // One stage: every exposed second is on the step's critical path.
    CHECK(most.step_time_s - kept.step_time_s == approx(most.offload_exposed_s).epsilon(0.02));
    // A quarter of the layers: four layers' compute behind each copy hides it.
    l.offload_layers = 20;
    const auto quarter = sim::simulate(f.input(l));
    CHECK(quarter.offload_exposed_s == 0);
    CHECK(quarter.step_time_s == approx(kept.step_time_s));
    // NVLink-C2C (GB200's share, 193.6 GB/s) hides what PCIe cannot on the same GPUs' times.
    l.offload_layers = 79;
    f.cluster.gpu.host_link_Bps = 225e9;
    CHECK(sim::simulate(f.input(l)).offload_exposed_s < 0.25 * most.offload_exposed_s);
  }

  TEST_CASE("simulate: per-layer checkpointing costs the share-weighted mean of its two kinds of block") {
    // selective_layer with ac_freq = 2: half the blocks recompute in full, half not
    // (parallel::block_kinds), so one layer's passes are the means of the two.
    Fixture f("llama3.1-8b", "dgx-h100", 1);
    f.training.seq_len = 8192;
    f.training.global_batch = 16;
    f.training.framework = parallel::Framework::fsdp;
    f.training.zero_stage = 3;
    parallel::Layout l;
    l.dp = 8;
    l.mbs = 2;
    auto layer = [&](parallel::Recompute r) {
      l.recompute = r;
      return sim::simulate(f.input(l));
    };
    const auto none = layer(parallel::Recompute::none);
    const auto full = layer(parallel::Recompute::full);
    const auto half = layer(parallel::Recompute::selective_layer);
    CHECK(half.layer_forward_s == approx(0.5 * (none.layer_forward_s + full.layer_forward_s)));
    CHECK(half.layer_backward_s == approx(0.5 * (none.layer_backward_s + full.layer_backward_s)));
    CHECK(half.step_time_s > none.step_time_s);
    CHECK(half.step_time_s < full.step_time_s);
  }
}
