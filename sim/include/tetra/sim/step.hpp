#pragma once
/// Step level of the simulator (docs/architecture.md, "Data flow" step 4): one task per
/// (micro-batch, model chunk, pass) on each pipeline rank, in the order the schedule
/// generator gives; PP activation and
/// gradient transfers on the links between ranks; DP gradient buckets issued as the last
/// micro-batch's backward produces them; the optimizer step; parameter all-gathers. One rank
/// per stage is simulated (DP replicas and TP/CP peers are symmetric); the transfers a rank
/// runs at once share its NIC / NVLink ports max-min fairly.
///
/// The inputs are durations already priced by the layer level and the cost models, so this
/// level is testable with hand-made numbers (e.g. free communication).

#include <cstdint>
#include <vector>

#include "tetra/parallel/layout.hpp"
#include "tetra/sim/engine.hpp"
#include "tetra/sim/schedule.hpp"
#include "tetra/sim/time.hpp"

namespace tetra::sim {

/// Times of one model chunk for one micro-batch on its rank.
struct ChunkCost {
  Duration forward;          ///< F
  Duration backward;         ///< full backward (B + W replayed together, with their overlaps)
  Duration backward_input;   ///< B of a split backward (+ recompute forward)
  Duration backward_weight;  ///< W of a split backward
  double activation_bytes = 0;  ///< saved for backward per micro-batch (allocated at F)
  /// CP ring traffic of each pass, seconds alone on its links (0 without CP). When the CP
  /// group crosses nodes it runs beside the pass on the stage's NICs (its exposed part is
  /// already in the pass time) and takes bandwidth from the DP and PP transfers it overlaps.
  double cp_forward_s = 0;
  double cp_backward_s = 0;
  double cp_backward_input_s = 0;
  /// Share of the activations that the W pass still needs (freed at W, the rest at B).
  /// [assumed] 0.5: W keeps the inputs of the weight GEMMs and the output gradients it
  /// multiplies (Qi et al., arXiv 2401.10241 §2.1); only split-backward schedules use it.
  double weight_keep_fraction = 0.5;
};

/// One DP communication bucket of a chunk, in the order backward produces it.
struct BucketCost {
  double params_fraction = 0;  ///< share of the chunk's gradients in this bucket (sums to 1)
  Duration reduce;             ///< reduce-scatter / all-reduce alone on the links, seconds
  Duration gather;             ///< parameter all-gather alone (0 without ZeRO sharding)
};

/// One pipeline rank.
struct StageSpec {
  std::vector<ChunkCost> chunks;                ///< size v
  std::vector<std::vector<BucketCost>> buckets; ///< per chunk; empty when dp·cp == 1
  Duration optimizer;                           ///< grad-norm + Adam on this rank's shard
  bool dp_inter_node = false;                   ///< DP group crosses nodes (uses the NIC)
  bool cp_inter_node = false;                   ///< CP group crosses nodes (uses the NIC)
};

/// Everything the step level needs.
struct StepSpec {
  parallel::Schedule schedule = parallel::Schedule::one_f_one_b;
  int p = 1;   ///< pipeline ranks
  int v = 1;   ///< chunks per rank
  int m = 1;   ///< micro-batches per step
  std::vector<StageSpec> stages;  ///< size p
  Duration pp_forward;   ///< one activation transfer across a boundary, alone on its link
  Duration pp_backward;  ///< one gradient transfer
  /// Per boundary from rank r to rank (r+1) mod p: whether it crosses nodes (size p).
  std::vector<char> pp_inter_node;
  /// Per boundary r -> (r+1) mod p, one transfer in either direction where it differs from
  /// pp_forward (a boundary between pods of an oversubscribed fabric); empty = all alike.
  std::vector<Duration> pp_boundary_transfer;
  bool overlap_grad_reduce = true;
  bool overlap_param_gather = true;
  bool pp_blocking = true;   ///< a rank waits for its own send before its next task (Megatron)
  bool free_links = false;   ///< every link unbounded and every transfer free (tests)
  bool record_memory = false;  ///< keep memory samples (for traces)
  /// Share of a GPU's SMs that a running DP / PP transfer occupies; the stage's compute runs
  /// at 1 − the sum meanwhile (TaskSpec::sm_share).
  double comm_sm_share = 0;
};

/// Per-rank outcome of a step.
struct StageOutcome {
  double busy_s = 0;            ///< compute stream busy (F/B/W + optimizer)
  double idle_s = 0;            ///< step time − busy
  double pipeline_busy_s = 0;   ///< F/B/W only
  double exposed_pp_s = 0;      ///< compute stream waiting on PP transfers
  double exposed_dp_s = 0;      ///< waiting on DP reductions / parameter gathers
  double exposed_cp_s = 0;      ///< CP traffic (slowed on shared links) running past everything else
  double peak_activation_bytes = 0;  ///< timeline peak of saved activations
  double inflight = 0;          ///< peak / (activation bytes of one micro-batch over all chunks)
  double last_compute_end_s = 0;
};

/// Result of one step replay.
struct StepOutcome {
  double step_time_s = 0;
  double pipeline_span_s = 0;   ///< first F start to last backward end over all ranks
  double bubble_fraction = 0;   ///< mean over ranks of idle share of the pipeline span
  std::vector<StageOutcome> stages;
  std::uint64_t events = 0;     ///< events the engine executed
};

/// Builds and runs the step graph. `graph`, `engine` and `queue` are caller-owned so that a
/// search can reuse their buffers; after the call they hold the replay (for traces).
/// Throws GraphError on a schedule bug (cycle / task that never starts).
StepOutcome simulate_step(const StepSpec& spec, TaskGraph& graph, Engine& engine, EventQueue& queue);

/// Convenience overload with its own buffers.
[[nodiscard]] StepOutcome simulate_step(const StepSpec& spec);

/// A lower bound on simulate_step(spec).step_time_s without building or running the graph,
/// for searches that skip steps which cannot beat one already simulated. It relaxes the
/// replay: every transfer at its time alone on its links (sharing only slows it), every
/// compute task at full rate (SM sharing only slows it), and of the graph's edges only
///   - each rank's compute stream in schedule order (pipeline_order), a task after the
///     blocking PP send of the one before it (pp_blocking);
///   - the chain of one micro-batch: the forward on virtual stage u after the forward and
///     the send of u − 1, the backward (B, or B of a split backward) on u after the forward
///     chain to the last stage and the backwards and sends of the stages above u, and after
///     it the backwards and sends still needed down to stage 0;
///   - each rank's DP stream in order: the overlapped parameter all-gathers first, then each
///     gradient bucket after its piece of the backward that completes the chunk's gradients
///     (or after the last compute task without overlap);
///   - the optimizer of every rank after the last compute and the last DP transfer of all
///     ranks, then its late parameter all-gathers.
/// Each rank's replay bounds the step alone; the first, the last two and the ranks with the
/// most compute and DP work are replayed. Less one picosecond per task and transfer and a
/// relative 1e-9 (rounding of task ends and of the engine's rate arithmetic). O(v·m + p·v).
[[nodiscard]] double step_lower_bound(const StepSpec& spec);

/// An upper bound on simulate_step(spec, g, ...).step_time_s from the step's task graph
/// (built into `g`) without running the engine: the longest path through dependencies and
/// stream order, every compute task at full rate and every transfer at its latency plus its
/// work at 1/k of its link's capacity, k the transfers that can share the link at once (one
/// per stream using it: max-min fairness gives each flow at least capacity / k), plus the
/// compute slowdown, charged in full: the share-seconds of the communication of each SM
/// group times its compute streams. With a relative 1e-6 and 4 ps per task for rounding.
/// Used with step_lower_bound to bound an extrapolated step (Simulator::step_lower_bound).
/// O(tasks + dependencies); building the graph is about a tenth of a replay.
[[nodiscard]] double step_upper_bound(const StepSpec& spec, TaskGraph& g);

/// Stream ids inside a step graph: stage·kStepStreams + one of these.
inline constexpr std::uint32_t kStreamCompute = 0;
inline constexpr std::uint32_t kStreamPp = 1;
inline constexpr std::uint32_t kStreamDp = 2;
inline constexpr std::uint32_t kStreamCp = 3;
inline constexpr std::uint32_t kStepStreams = 4;

}  // namespace tetra::sim
