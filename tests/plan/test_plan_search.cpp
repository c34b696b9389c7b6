// The plan's best layout per candidate is the first layout of a full `search` of the same
// cluster and GPU count: search::find_best skips only layouts whose step-time lower bound
// cannot reach the best, and the bound holds for every layout simulated.
#include <doctest/doctest.h>

#include <string>

#include "tetra/costmodel/builtin_profiles.hpp"
#include "tetra/costmodel/memory.hpp"
#include "tetra/plan/plan.hpp"
#include "tetra/scenarios/plan.hpp"
#include "tetra/search/search.hpp"
#include "tetra/sim/simulator.hpp"

using namespace tetra;

namespace {

/// A small Llama, batches large enough that dp = 1 gives 2,048 micro-batches (run()
/// extrapolates those from two shorter replays), both precisions, every schedule the bound
/// handles, on four clusters and GPU counts (a partial node, NVL72 trays).
constexpr const char* kScenario = R"(
[model]
layers = 8
hidden = 1024
ffn_hidden = 4096
heads = 8
kv_heads = 4
vocab = 32000

[training]
seq_len = 2048
global_batch = 2048

[search]
tp = [1, 2, 4]
cp = [1, 2]
pp = [1, 2, 4]
mbs = [1, 2]
vp = [1, 2]
recompute = ["none", "full"]
schedule = ["1f1b", "interleaved", "zb-h1", "gpipe"]
precision = ["bf16", "fp8"]

[plan]
tokens = 1e9

[[plan.candidate]]
cluster = "dgx-h100"
gpus = [8, 16]

[[plan.candidate]]
cluster = "gb200-nvl72"
gpus = 8

[[plan.candidate]]
cluster = "dgx-b200"
gpus = 4
)";

search::SearchInput search_input(const scenarios::PlanScenario& sc, const plan::Candidate& c) {
  search::SearchInput in;
  in.model = &sc.model;
  in.cluster = &c.cluster;
  in.training = &sc.training;
  in.space = &sc.search;
  in.base = sc.base;
  return in;
}

}  // namespace

TEST_SUITE("plan") {
  TEST_CASE("plan best layout == search best layout") {
    const scenarios::PlanScenario sc = scenarios::load_plan_scenario_text(kScenario, "plan-search.toml");
    REQUIRE(sc.candidates.size() == 4);
    plan::PlanInput in;
    in.model = &sc.model;
    in.training = &sc.training;
    in.space = &sc.search;
    in.base = sc.base;
    in.settings = sc.settings;
    in.candidates = sc.candidates;
    std::uint64_t skipped = 0, extrapolated_best = 0;
    for (std::size_t i = 0; i < sc.candidates.size(); ++i) {
      CAPTURE(sc.candidates[i].name);
      CAPTURE(sc.candidates[i].cluster.total_gpus());
      const search::SearchResult full = search::run_search(search_input(sc, sc.candidates[i]));
      search::SearchOptions one, three;
      one.threads = 1;
      three.threads = 3;
      const plan::Evaluation e = plan::evaluate(in, i, one);
      REQUIRE(!full.layouts.empty());
      REQUIRE(e.best.has_value());
      const search::RankedLayout& a = full.layouts.front();
      CHECK(search::layout_key(e.best->layout) == search::layout_key(a.layout));
      CHECK(e.best->fp8.recipe == a.fp8.recipe);
      CHECK(e.best->step_time_s == a.step_time_s);
      CHECK(e.best->tokens_per_s == a.tokens_per_s);
      CHECK(e.best->peak_bytes == a.peak_bytes);
      CHECK(e.summary.valid == full.summary.valid);
      CHECK(e.summary.pruned_by_memory == full.summary.pruned_by_memory);
      CHECK(e.summary.simulated + e.skipped_by_bound == full.summary.simulated);
      skipped += e.skipped_by_bound;
      if (parallel::micro_batches(a.layout, sc.training) > sim::kMaxSimulatedMicroBatches) ++extrapolated_best;
      // The same layouts simulated for every thread count.
      const plan::Evaluation e3 = plan::evaluate(in, i, three);
      CHECK(e3.summary.simulated == e.summary.simulated);
      CHECK(search::layout_key(e3.best->layout) == search::layout_key(e.best->layout));
    }
    CHECK(skipped > 0);  // the bound does prune here
    (void)extrapolated_best;
  }

  TEST_CASE("step lower bound <= simulated step <= step upper bound, every third layout of the space") {
    const scenarios::PlanScenario sc = scenarios::load_plan_scenario_text(kScenario, "plan-search.toml");
    std::size_t checked = 0, extrapolated = 0;
    for (const plan::Candidate& c : sc.candidates) {
      const costmodel::CostParams costs = costmodel::cost_params(c.cluster);
      for (const parallel::Fp8Recipe recipe : sc.search.precision) {
        parallel::Training t = sc.training;
        t.fp8.recipe = recipe;
        const search::Enumeration en = search::enumerate_layouts(sc.model, c.cluster.total_gpus(), t, sc.search,
                                                                 sc.base, c.cluster.nvlink_domain());
        sim::Simulator s;
        sim::LayerCache cache;
        sim::SimOptions so;
        so.layer_cache = &cache;
        for (std::size_t k = 0; k < en.valid.size(); k += 3) {  // every third layout
          const sim::SimInput input = sim::sim_input(sc.model, c.cluster, t, en.valid[k], costs);
          const double upper = s.step_upper_bound(input, so);
          const double bound = s.step_lower_bound(input, so);
          const sim::Result r = s.run(input, so);
          CAPTURE(search::layout_key(en.valid[k]));
          CHECK(bound <= r.step_time_s);
          CHECK(bound > 0.5 * r.step_time_s);  // and not vacuous
          CHECK(upper >= r.step_time_s);
          CHECK(upper < 2.0 * r.step_time_s);
          ++checked;
          if (r.micro_batches > sim::kMaxSimulatedMicroBatches) {
            // The cheap bound (no replay; returned when above `enough`) holds too.
            sim::Simulator cheap;
            CHECK(cheap.step_lower_bound(input, so, 0.0) <= r.step_time_s);
            // run() reused the replay the bound kept: the same step as a fresh simulator's.
            sim::Simulator fresh;
            CHECK(fresh.run(input, so).step_time_s == r.step_time_s);
            ++extrapolated;
          }
        }
      }
    }
    CHECK(checked > 500);
    CHECK(extrapolated > 20);
  }
}
