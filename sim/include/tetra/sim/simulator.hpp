#pragma once
/// One training step of a layout, simulated end to end (DESIGN §2.4): the layer level prices
/// one transformer layer (and the embedding / head) per pass from the op list and the cost
/// models, the step level replays the pipeline schedule with PP, DP and optimizer work, and
/// the memory model turns the simulated activation timeline into per-stage peaks.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tetra/costmodel/builtin_profiles.hpp"
#include "tetra/costmodel/collective.hpp"
#include "tetra/costmodel/compute.hpp"
#include "tetra/costmodel/memory.hpp"
#include "tetra/hw/cluster.hpp"
#include "tetra/llama/layout.hpp"
#include "tetra/llama/model.hpp"
#include "tetra/sim/engine.hpp"
#include "tetra/sim/layer.hpp"
#include "tetra/sim/layer_cache.hpp"
#include "tetra/sim/step.hpp"

namespace tetra::sim {

/// What to simulate. The cost-model parameters are built once per cluster and shared.
struct SimInput {
  const llama::Model* model = nullptr;
  const hw::Cluster* cluster = nullptr;
  const llama::Training* training = nullptr;
  llama::Layout layout;
  const costmodel::ComputeParams* compute = nullptr;
  const costmodel::CommParams* comm = nullptr;
  double step_overhead_s = 0;   ///< fixed time added to the step (costmodel::Factors)
};

/// The input of one step of `layout`; `costs` must outlive the input.
[[nodiscard]] SimInput sim_input(const llama::Model& model, const hw::Cluster& cluster,
                                 const llama::Training& training, const llama::Layout& layout,
                                 const costmodel::CostParams& costs);

struct SimOptions {
  bool record_trace = false;      ///< keep what chrome_trace() needs
  double memory_fraction = 0.8;   ///< reported usable share of memory (SPEC [search])
  /// Priced layer tables shared between runs of one (model, training, cluster, cost
  /// parameters), e.g. by a search (layer_cache.hpp); null: priced afresh. Not used when
  /// recording a trace.
  LayerCache* layer_cache = nullptr;
};

/// Exposed (not hidden) communication time of the most exposed stage, per dimension.
struct ExposedComm {
  double tp = 0, cp = 0, pp = 0, dp = 0;
};

/// One pipeline rank in the result.
struct StageResult {
  int stage = 0;
  int layers = 0;
  double busy_s = 0;
  double idle_s = 0;
  double peak_bytes = 0;          ///< reserved peak from the memory model at the simulated in-flight count
  double inflight = 0;            ///< simulated peak in-flight micro-batches (stage units)
};

/// The outcome of `simulate` (SPEC `simulate` JSON keys).
struct Result {
  double step_time_s = 0;
  double tokens_per_s = 0;
  double tokens_per_s_per_gpu = 0;
  double tflops_per_gpu = 0;      ///< model FLOPs (current-master Megatron formula) / step / GPU
  double mfu = 0;                 ///< tflops_per_gpu over the GPU's dense bf16 peak
  double bubble_fraction = 0;
  ExposedComm exposed;
  bool fits = false;
  double peak_bytes = 0;
  std::vector<StageResult> stages;
  costmodel::MemoryReport memory; ///< the memory model's report with the simulated in-flight counts
  llama::Layout layout;
  int micro_batches = 0;
  double model_flops = 0;         ///< per step, all GPUs
  std::uint64_t events = 0;       ///< events the step engine executed
  // Per-chunk pass times of one micro-batch (first stage, first chunk), seconds.
  double layer_forward_s = 0;
  double layer_backward_s = 0;
};

/// Micro-batches per step replayed event by event; beyond this the step is extrapolated from
/// two shorter replays (the steady state is linear in m).
inline constexpr int kMaxSimulatedMicroBatches = 1024;

/// Reusable simulator: its buffers survive between calls, so a search can run many layouts
/// without allocation storms. Not thread-safe; use one per thread.
class Simulator {
 public:
  /// Simulates one step. Preconditions: the layout passed llama::check_layout.
  /// Throws GraphError on a schedule bug.
  Result run(const SimInput& in, const SimOptions& options = {});

  /// Chrome trace JSON (Perfetto) of the last run made with `record_trace`: one process per
  /// stage, one thread per stream (compute, TP, CP, PP, DP), "X" slices and a memory counter.
  [[nodiscard]] std::string chrome_trace() const;

 private:
  TaskGraph graph_;
  Engine engine_;
  EventQueue queue_;
  StepSpec spec_;
  StepOutcome step_;
  LayerTimes layer_, embedding_, head_;
  std::vector<int> chunk_layers_;   // per virtual stage
  std::vector<double> static_bytes_, frag_;
  bool recorded_ = false;
  int p_ = 1, v_ = 1;
};

/// Convenience: one simulation with its own buffers.
[[nodiscard]] Result simulate(const SimInput& in, const SimOptions& options = {});

}  // namespace tetra::sim
