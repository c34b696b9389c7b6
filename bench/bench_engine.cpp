// Throughput of the simulator's hot paths: raw events/s of the event queue, a step graph
// with shared links, and one simulate() of a large layout.

#include <benchmark/benchmark.h>

#include <cstdint>

#include "tetra/costmodel/builtin_profiles.hpp"
#include "tetra/hw/presets.hpp"
#include "tetra/model/presets.hpp"
#include "tetra/sim/engine.hpp"
#include "tetra/sim/simulator.hpp"
#include "tetra/sim/step.hpp"

using namespace tetra;

// Events/s of the bare queue: each handler schedules the next one (a chain of N events
// with 64 pending at a time).
static void BM_EventQueue(benchmark::State& state) {
  sim::EventQueue q;
  const std::int64_t n = state.range(0);
  std::int64_t left = 0;
  std::uint64_t events = 0;
  struct Chain {
    sim::EventQueue* q;
    std::int64_t* left;
    void operator()() const {
      if (--*left > 0) q->schedule_in(sim::Duration::ps(1 + (*left % 7)), Chain{q, left});
    }
  };
  for (auto _ : state) {
    q.clear();
    left = n;
    for (int i = 0; i < 64; ++i) q.schedule_in(sim::Duration::ps(i), Chain{&q, &left});
    q.run();
    events += q.executed();
  }
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EventQueue)->Arg(1 << 20);

// One step graph: 1F1B, p = 16, m = 128, DP buckets, transfers on shared links.
static void BM_StepGraph(benchmark::State& state) {
  sim::StepSpec spec;
  spec.schedule = parallel::Schedule::one_f_one_b;
  spec.p = 16;
  spec.m = 128;
  spec.pp_forward = sim::Duration::from_seconds(1e-3);
  spec.pp_backward = spec.pp_forward;
  spec.pp_inter_node.assign(16, 1);
  for (int r = 0; r < spec.p; ++r) {
    sim::StageSpec st;
    st.chunks.push_back({sim::Duration::from_seconds(0.05), sim::Duration::from_seconds(0.1),
                         sim::Duration::from_seconds(0.05), sim::Duration::from_seconds(0.05), 1e9, 0.5});
    st.buckets.assign(1, std::vector<sim::BucketCost>(20, {0.05, sim::Duration::from_seconds(0.004),
                                                              sim::Duration::from_seconds(0.002)}));
    st.dp_inter_node = true;
    st.optimizer = sim::Duration::from_seconds(0.01);
    spec.stages.push_back(st);
  }
  sim::TaskGraph g;
  sim::Engine e;
  sim::EventQueue q;
  std::uint64_t events = 0;
  for (auto _ : state) {
    auto out = sim::simulate_step(spec, g, e, q);
    events += out.events;
    benchmark::DoNotOptimize(out.step_time_s);
  }
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["tasks"] = static_cast<double>(g.tasks().size());
}
BENCHMARK(BM_StepGraph)->Unit(benchmark::kMillisecond);

// One simulate() of a big step: Llama-3.1-405B on 2048 DGX H100 nodes (16,384 GPUs),
// TP 8, PP 16, interleaved with 4 chunks, DP 128, 16 micro-batches per DP rank.
static void BM_SimulateBigStep(benchmark::State& state) {
  model::Model model = *model::find_model_preset("llama3.1-405b");
  hw::Cluster cluster = *hw::find_cluster_preset("dgx-h100");
  cluster.nodes = 2048;
  parallel::Training training;
  training.seq_len = 8192;
  training.global_batch = 2048;
  parallel::Layout layout;
  layout.tp = 8;
  layout.pp = 16;
  layout.dp = 128;
  layout.vp = 4;
  layout.sp = true;
  layout.schedule = parallel::Schedule::interleaved;
  const auto costs = costmodel::cost_params(cluster);
  const sim::SimInput in = sim::sim_input(model, cluster, training, layout, costs);
  sim::Simulator s;
  std::uint64_t events = 0;
  for (auto _ : state) {
    auto r = s.run(in);
    events += r.events;
    benchmark::DoNotOptimize(r.step_time_s);
  }
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SimulateBigStep)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
