#pragma once
/// One training step of a layout, simulated end to end (docs/architecture.md, "Data flow"
/// step 4): the layer level prices one transformer layer (and the embedding / head) per pass
/// from the op list and the cost
/// models, the step level replays the pipeline schedule with PP, DP and optimizer work, and
/// the memory model turns the simulated activation timeline into per-stage peaks.

#include <array>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <limits>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "tetra/costmodel/builtin_profiles.hpp"
#include "tetra/costmodel/collective.hpp"
#include "tetra/costmodel/compute.hpp"
#include "tetra/costmodel/data_loader.hpp"
#include "tetra/costmodel/memory.hpp"
#include "tetra/hw/cluster.hpp"
#include "tetra/parallel/layout.hpp"
#include "tetra/model/model.hpp"
#include "tetra/sim/engine.hpp"
#include "tetra/sim/layer.hpp"
#include "tetra/sim/layer_cache.hpp"
#include "tetra/sim/step.hpp"
#include "tetra/sim/trace.hpp"

namespace tetra::sim {

/// What to simulate. The cost-model parameters are built once per cluster and shared.
struct SimInput {
  const model::Model* model = nullptr;
  const hw::Cluster* cluster = nullptr;
  const parallel::Training* training = nullptr;
  parallel::Layout layout;
  const costmodel::ComputeParams* compute = nullptr;
  const costmodel::CommParams* comm = nullptr;
  double step_overhead_s = 0;   ///< fixed time added to the step (costmodel::Factors)
};

/// The input of one step of `layout`; `costs` must outlive the input.
[[nodiscard]] SimInput sim_input(const model::Model& model, const hw::Cluster& cluster,
                                 const parallel::Training& training, const parallel::Layout& layout,
                                 const costmodel::CostParams& costs);

struct SimOptions {
  bool record_trace = false;      ///< keep what write_chrome_trace and for_each_trace_slice need
  double memory_fraction = 1.0;   ///< reported usable share of memory ([search])
  /// Priced layer tables shared between runs of one (model, training, cluster, cost
  /// parameters), e.g. by a search (layer_cache.hpp); null: priced afresh. Not used when
  /// recording a trace.
  LayerCache* layer_cache = nullptr;
};

/// Exposed (not hidden) communication time of the most exposed stage, per dimension.
struct ExposedComm {
  double tp = 0, cp = 0, pp = 0, dp = 0;
  double ep = 0;  ///< MoE dispatch and combine over the expert-parallel group
};

/// One pipeline rank in the result.
struct StageResult {
  int stage = 0;
  int layers = 0;
  double busy_s = 0;
  double idle_s = 0;
  double peak_bytes = 0;          ///< reserved peak from the memory model at the simulated in-flight count
  double inflight = 0;            ///< simulated peak in-flight micro-batches (stage units)
  /// MoE dispatch and combine on the stage's EP stream in the step, overlapped or not: every
  /// pass of every micro-batch through its MoE layers (0 on a dense model or with ep = 1).
  double ep_comm_s = 0;
};

/// The outcome of `simulate` (the keys of `tetrasim simulate --json`, docs/cli.md).
struct Result {
  double step_time_s = 0;
  double tokens_per_s = 0;
  double tokens_per_s_per_gpu = 0;
  double tflops_per_gpu = 0;      ///< model FLOPs (current-master Megatron formula) / step / GPU
  double mfu = 0;                 ///< tflops_per_gpu over the GPU's dense bf16 peak
  double bubble_fraction = 0;
  ExposedComm exposed;
  /// GPU time spent waiting for the host to issue kernels (sim::HostCost), most host-bound
  /// stage.
  double host_wait_s = 0;
  /// Host time a rank's data loader needs for the step's micro-batches
  /// (costmodel/data_loader.hpp); the step takes at least this long.
  double data_loader_s = 0;
  /// Time the step waited for the data loader beyond the replayed step (0 when it kept up).
  double data_loader_wait_s = 0;
  /// Compute-stream time spent waiting for activation-offload copies over the host link,
  /// summed over the step's micro-batches (costmodel/offload.hpp); 0 without offloading.
  double offload_exposed_s = 0;
  bool fits = false;
  double peak_bytes = 0;
  std::vector<StageResult> stages;
  costmodel::MemoryReport memory; ///< the memory model's report with the simulated in-flight counts
  parallel::Layout layout;
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
  /// Simulates one step. Preconditions: the layout passed parallel::check_layout.
  /// Throws GraphError on a schedule bug.
  Result run(const SimInput& in, const SimOptions& options = {});

  /// Writes the Chrome trace JSON (Perfetto) of the last run made with `record_trace` to
  /// `out` event by event, never holding the whole document: one process per stage, one
  /// thread per stream (compute, TP, CP, EP, PP, DP, CP traffic), "X" slices and a memory
  /// counter. TP, CP and EP slices repeat the recorded pattern of each layer of a pass, dense
  /// or MoE as the layer is. `detail` as trace.hpp; automatic as trace_detail() resolves it.
  void write_chrome_trace(std::ostream& out, TraceDetail detail = TraceDetail::full) const;

  /// The streams (trace threads) of every stage of the last recorded run, in display order.
  [[nodiscard]] std::vector<TraceStream> trace_streams() const;

  /// Visits every slice of the last recorded run's full trace in the order
  /// write_chrome_trace writes them, without writing any JSON: what a picture of the step
  /// reads (a step of hundreds of micro-batches has millions of slices).
  void for_each_trace_slice(const std::function<void(const TraceSlice&)>& visit) const;

  /// `requested`, with automatic resolved for the last recorded run: full when the full
  /// trace is estimated (from its event count) under kTraceAutoBytes, aggregated otherwise.
  [[nodiscard]] TraceDetail trace_detail(TraceDetail requested) const;

  /// A lower bound on run(in, options).step_time_s, for searches that skip layouts which
  /// cannot beat one already simulated: the step's inputs are priced as run() prices them
  /// (layer tables shared through options.layer_cache, DP buckets, optimizer, PP transfers),
  /// then sim::step_lower_bound relaxes the replay (step.hpp), plus the step overhead; never
  /// below the data loader's time for the step (Result::data_loader_s), nor are the other two.
  /// Costs one layer replay per new per-layer shape, then O(pp·vp·m) arithmetic.
  /// Steps of more than kMaxSimulatedMicroBatches micro-batches, which run() extrapolates
  /// from replays of m1 < m2 micro-batches as s2 + (s2 − s1)·k, get b2 + (b2 − u1)·k with b2
  /// the bound of the m2 replay and u1 ≥ s1: first sim::step_upper_bound of the m1 step's
  /// graph (about a tenth of run()'s work), returned when it exceeds `enough` (the step time
  /// a caller needs to rule the layout out); otherwise s1 itself, replayed here (about a
  /// third of run()'s work) and kept, so that a run() of the same input that follows
  /// directly reuses it. Preconditions as run.
  [[nodiscard]] double step_lower_bound(const SimInput& in, const SimOptions& options = {},
                                        double enough = std::numeric_limits<double>::infinity());

  /// An upper bound on run(in, options).step_time_s from the step's task graph without a
  /// replay (sim::step_upper_bound; for an extrapolated step (1 + k)·u2 − k·b1 from the upper
  /// bound of the m2 step and the lower bound of the m1 step). For tests and for reasoning
  /// about the bounds' gap. Preconditions as run.
  [[nodiscard]] double step_upper_bound(const SimInput& in, const SimOptions& options = {});

  /// sim::step_lower_bound at the step's own micro-batch count, without any replay: the
  /// bound itself when run() replays every micro-batch, an estimate (no bound) for
  /// extrapolated steps, which searches use to order them.
  [[nodiscard]] double step_estimate(const SimInput& in, const SimOptions& options = {});

 private:
  /// The op pricer of one run: compute ops by the cost model, collectives memoised by shape.
  OpPricer pricer(const SimInput& in);
  /// Fills layer_, embedding_ and head_ (from options.layer_cache when it holds the shape).
  void price_layers(const SimInput& in, const SimOptions& options, const OpPricer& price);

  /// Prices the layers and fills spec_ for `in` without a trace, dropping a kept replay: the
  /// common start of the bounds and the estimate.
  void prepare_untraced(const SimInput& in, const SimOptions& options);
  /// Fills spec_ (and p_, v_, chunk_layers_) for `in` from the priced layer tables.
  void build_spec(const SimInput& in, const SimOptions& options, const OpPricer& price);
  /// Adds to chunk `cc` the activation-offload copies its `lc` layers (passes `lt`, k layers
  /// summed in it) cannot hide, and counts them in offload_exposed_s_.
  void add_offload_exposure(const SimInput& in, const LayerTimes& lt, int k, int lc, ChunkCost& cc);
  /// (m1, m2) of an extrapolated step.
  static std::pair<int, int> extrapolation_sizes(parallel::Schedule schedule, int p) noexcept;

  /// The first replay of an extrapolated step, kept by step_lower_bound for run().
  struct Kept {
    const model::Model* model;
    const hw::Cluster* cluster;
    const parallel::Training* training;
    const costmodel::ComputeParams* compute;
    const costmodel::CommParams* comm;
    parallel::Layout layout;
    StepOutcome first;
    [[nodiscard]] bool matches(const SimInput& in) const;
  };
  std::optional<Kept> kept_;

  struct PricedComm {
    ops::OpKind kind;
    ops::CollectiveKind coll;
    ops::CommDim dim;
    int group;
    int route_topk;
    parallel::FlexBackend route_backend;
    double bytes;
    double seconds;
  };
  std::vector<PricedComm> comm_memo_;
  TaskGraph graph_;
  Engine engine_;
  EventQueue queue_;
  StepSpec spec_;
  StepOutcome step_;
  LayerTimes layer_, embedding_, head_;
  /// A MoE layer's passes (ops::moe_layer_ops); used when the model has routed experts.
  LayerTimes moe_layer_;
  bool moe_ = false;
  /// Per virtual stage: the sum of its layers' passes, dense and MoE (MoE models only).
  std::vector<LayerTimes> chunk_times_;
  std::vector<int> chunk_layers_;   // per virtual stage
  /// Per virtual stage, what a forward pass runs in order, for the trace: 'e' embedding, 'd'
  /// dense layer, 'm' MoE layer, 'h' head (recorded runs only).
  std::vector<std::string> trace_blocks_;
  std::vector<costmodel::StageMemory> stage_memory_;  ///< per rank, for the trace's memory counter
  bool recorded_ = false;
  int p_ = 1, v_ = 1;
  double offload_exposed_s_ = 0;  ///< one micro-batch's offload exposure over the chunks
};

/// Convenience: one simulation with its own buffers.
[[nodiscard]] Result simulate(const SimInput& in, const SimOptions& options = {});

}  // namespace tetra::sim
