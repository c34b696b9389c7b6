// One simulated training step of Llama-3.1-405B on 16,384 H100 GPUs (scenarios/
// llama3.1-405b-16k.toml, Llama 3's TP 8 / CP 1 / PP 16 grid): time per simulate and the step
// engine's events per second.

#include <benchmark/benchmark.h>

#include <string>

#include "tetra/costmodel/builtin_profiles.hpp"
#include "tetra/scenarios/scenario.hpp"
#include "tetra/sim/simulator.hpp"

namespace {

using namespace tetra;

struct Fixture {
  scenarios::Scenario sc;
  costmodel::CostParams costs;
  sim::SimInput in;

  explicit Fixture(const std::string& layout)
      : sc(scenarios::load_scenario(std::string(TETRA_SOURCE_DIR) +
                                        "/scenarios/llama3.1-405b-16k.toml",
                                    layout)),
        costs(costmodel::cost_params(sc.cluster)),
        in(sim::sim_input(sc.model, sc.cluster, sc.training, sc.layout, costs)) {}
};

/// Events of one step, counted on a fresh simulator.
double events_of(const sim::SimInput& in) {
  sim::Simulator fresh;
  return static_cast<double>(fresh.run(in).events);
}

void run(benchmark::State& state, const std::string& layout) {
  const Fixture f(layout);
  const double events = events_of(f.in);
  sim::Simulator s;
  for (auto _ : state) {
    sim::Result r = s.run(f.in);
    benchmark::DoNotOptimize(r.step_time_s);
  }
  state.counters["events_per_step"] = events;
  state.counters["events_per_s"] = benchmark::Counter(
      events * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

/// The scenario's [layout]: TP 8, CP 1, PP 16 (7/8x14/7 layers), DP 128, 16 micro-batches, 1F1B.
void BM_simulate_405b_16k_llama3_grid(benchmark::State& state) {
  run(state, "vp=1,schedule=1f1b");
}
BENCHMARK(BM_simulate_405b_16k_llama3_grid)->Unit(benchmark::kMillisecond);

/// The same grid with zb-h1 (split backward: more tasks per step).
void BM_simulate_405b_16k_zbh1(benchmark::State& state) { run(state, "vp=1,schedule=zb-h1"); }
BENCHMARK(BM_simulate_405b_16k_zbh1)->Unit(benchmark::kMillisecond);

/// Llama 3's own layout (arXiv 2407.21783 section 3.3.2): the same grid interleaved with vp 8,
/// 128 chunks of 1 layer, the first holding only the embedding and the last only the head.
void BM_simulate_405b_16k_llama3_interleaved(benchmark::State& state) {
  run(state, "vp=8,schedule=interleaved");
}
BENCHMARK(BM_simulate_405b_16k_llama3_interleaved)->Unit(benchmark::kMillisecond);

/// PP 32 (3/4x30/3 layers), DP 64, 32 micro-batches: the largest pipeline of the space.
void BM_simulate_405b_16k_pp32(benchmark::State& state) {
  run(state, "pp=32,vp=1,first_stage_layers=3,last_stage_layers=3,schedule=zb-h1");
}
BENCHMARK(BM_simulate_405b_16k_pp32)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
