// `tetrasim search` on the Llama-3.1-405B / 16,384-GPU space (scenarios/
// llama3.1-405b-16k.toml): whole searches per second and layouts simulated per second, on 1
// and 2 threads; and the enumeration + memory-pruning pass alone. The same search on the
// Llama 4 Maverick / 512-GPU MoE space (scenarios/llama4-maverick.toml, ep and etp lists):
// candidates per second of the two are the per-layout cost compared in the README.

#include <benchmark/benchmark.h>

#include <string>

#include "tetra/costmodel/memory.hpp"
#include "tetra/scenarios/scenario.hpp"
#include "tetra/search/search.hpp"

namespace {

using namespace tetra;

const scenarios::Scenario& scenario() {
  static const scenarios::Scenario sc = scenarios::load_scenario(
      std::string(TETRA_SOURCE_DIR) + "/scenarios/llama3.1-405b-16k.toml", "", false);
  return sc;
}

const scenarios::Scenario& maverick() {
  static const scenarios::Scenario sc = scenarios::load_scenario(
      std::string(TETRA_SOURCE_DIR) + "/scenarios/llama4-maverick.toml", "", false);
  return sc;
}

search::SearchInput input_of(const scenarios::Scenario& sc) {
  search::SearchInput in;
  in.model = &sc.model;
  in.cluster = &sc.cluster;
  in.training = &sc.training;
  in.space = &sc.search;
  in.base.rank_order = sc.layout.rank_order;
  return in;
}

/// The whole search of `sc`; arg = threads.
void run_whole_search(benchmark::State& state, const scenarios::Scenario& sc) {
  const search::SearchInput in = input_of(sc);
  search::SearchOptions options;
  options.threads = static_cast<int>(state.range(0));
  std::uint64_t simulated = 0;
  std::uint64_t enumerated = 0;
  for (auto _ : state) {
    const search::SearchResult r = search::run_search(in, options);
    simulated += r.summary.simulated;
    enumerated += r.summary.enumerated;
    benchmark::DoNotOptimize(r.layouts.data());
  }
  state.counters["layouts_simulated_per_s"] =
      benchmark::Counter(static_cast<double>(simulated), benchmark::Counter::kIsRate);
  state.counters["candidates_per_s"] =
      benchmark::Counter(static_cast<double>(enumerated), benchmark::Counter::kIsRate);
}

void BM_search_405b_16k(benchmark::State& state) { run_whole_search(state, scenario()); }
BENCHMARK(BM_search_405b_16k)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

/// Enumeration, rule checks and the analytical memory peak of every valid layout (no
/// simulation): the cheap first pass.
void BM_enumerate_and_estimate_405b_16k(benchmark::State& state) {
  const auto& sc = scenario();
  std::uint64_t candidates = 0;
  for (auto _ : state) {
    const search::Enumeration en = search::enumerate_layouts(
        sc.model, sc.cluster.total_gpus(), sc.training, sc.search, sc.layout);
    double peak = 0;
    for (const auto& l : en.valid) {
      peak += costmodel::estimate_memory(sc.model, sc.cluster, sc.training, l).peak_bytes;
    }
    benchmark::DoNotOptimize(peak);
    candidates += en.enumerated;
  }
  state.counters["candidates_per_s"] =
      benchmark::Counter(static_cast<double>(candidates), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_enumerate_and_estimate_405b_16k)->Unit(benchmark::kMillisecond);

/// The Maverick MoE search (dense and MoE layers per chunk, ep x etp in the space).
void BM_search_maverick(benchmark::State& state) { run_whole_search(state, maverick()); }
BENCHMARK(BM_search_maverick)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
