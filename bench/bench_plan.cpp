// `tetrasim plan` on scenarios/plan-405b.toml (Llama-3.1-405B, five cluster kinds, 1,024 to
// 16,384 GPUs: 25 candidates): the whole plan on 1 and 2 threads; and one candidate's best
// layout by search::find_best (the step-time bound) against the full search it replaces.

#include <benchmark/benchmark.h>

#include <string>

#include "tetra/plan/plan.hpp"
#include "tetra/scenarios/plan.hpp"
#include "tetra/search/search.hpp"

namespace {

using namespace tetra;

const scenarios::PlanScenario& scenario() {
  static const scenarios::PlanScenario sc =
      scenarios::load_plan_scenario(std::string(TETRA_SOURCE_DIR) + "/scenarios/plan-405b.toml");
  return sc;
}

plan::PlanInput input_of(const scenarios::PlanScenario& sc) {
  plan::PlanInput in;
  in.model = &sc.model;
  in.training = &sc.training;
  in.space = &sc.search;
  in.base = sc.base;
  in.settings = sc.settings;
  in.candidates = sc.candidates;
  return in;
}

/// The candidate of `cluster` at `gpus` GPUs.
std::size_t candidate(const scenarios::PlanScenario& sc, const std::string& cluster, long long gpus) {
  for (std::size_t i = 0; i < sc.candidates.size(); ++i) {
    if (sc.candidates[i].name == cluster && sc.candidates[i].cluster.total_gpus() == gpus) return i;
  }
  return 0;
}

/// Every candidate evaluated, then the report; arg = threads.
void BM_plan_405b(benchmark::State& state) {
  const plan::PlanInput in = input_of(scenario());
  search::SearchOptions options;
  options.threads = static_cast<int>(state.range(0));
  std::uint64_t simulated = 0, candidates = 0;
  std::vector<std::size_t> all(in.candidates.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  for (auto _ : state) {
    const std::vector<plan::Evaluation> evals = plan::evaluate_all(in, all, options);
    for (const auto& e : evals) simulated += e.summary.simulated;
    const plan::Report rep = plan::assemble(in, evals);
    benchmark::DoNotOptimize(rep.rows.data());
    candidates += in.candidates.size();
  }
  state.counters["candidates_per_s"] = benchmark::Counter(static_cast<double>(candidates), benchmark::Counter::kIsRate);
  state.counters["layouts_simulated"] =
      benchmark::Counter(static_cast<double>(simulated), benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_plan_405b)->Arg(1)->Arg(2)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);

/// One candidate (DGX H100 at arg GPUs), one thread: find_best.
void BM_best_layout(benchmark::State& state) {
  const auto& sc = scenario();
  const plan::PlanInput in = input_of(sc);
  const std::size_t i = candidate(sc, "dgx-h100", state.range(0));
  search::SearchOptions options;
  options.threads = 1;
  std::uint64_t simulated = 0;
  for (auto _ : state) {
    const plan::Evaluation e = plan::evaluate(in, i, options);
    simulated += e.summary.simulated;
    benchmark::DoNotOptimize(e.best);
  }
  state.counters["layouts_simulated"] =
      benchmark::Counter(static_cast<double>(simulated), benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_best_layout)->Arg(16384)->Arg(1024)->Unit(benchmark::kMillisecond);

/// The same candidate, one thread: the full search that ranks every layout.
void BM_full_search(benchmark::State& state) {
  const auto& sc = scenario();
  const plan::Candidate& c = sc.candidates[candidate(sc, "dgx-h100", state.range(0))];
  search::SearchInput in;
  in.model = &sc.model;
  in.cluster = &c.cluster;
  in.training = &sc.training;
  in.space = &sc.search;
  in.base = sc.base;
  search::SearchOptions options;
  options.threads = 1;
  std::uint64_t simulated = 0;
  for (auto _ : state) {
    const search::SearchResult r = search::run_search(in, options);
    simulated += r.summary.simulated;
    benchmark::DoNotOptimize(r.layouts.data());
  }
  state.counters["layouts_simulated"] =
      benchmark::Counter(static_cast<double>(simulated), benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_full_search)->Arg(16384)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
