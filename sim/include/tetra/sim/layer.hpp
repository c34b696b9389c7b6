#pragma once
/// Layer level of the simulator (docs/architecture.md, "Data flow" step 4): the op DAG of one
/// transformer layer (or the embedding / head) for one micro-batch, replayed on a compute
/// stream and TP / CP / other
/// communication streams with the overlaps the framework really does (ops.hpp: `Op::async`
/// overlaps the next compute op and must finish before the one after; every other collective
/// blocks the compute stream; a CP ring p2p op with count c−1 directly before an attention
/// op with the same count interleaves repetition by repetition). The result is the time of
/// each pass and its exposed communication per dimension.

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "tetra/ops/ops.hpp"
#include "tetra/sim/engine.hpp"

namespace tetra::sim {

/// Communication dimensions reported separately.
/// ep: a MoE layer's dispatch and combine over the expert-parallel group.
enum class CommAxis : std::uint8_t { tp = 0, cp = 1, pp = 2, dp = 3, ep = 4 };
inline constexpr std::size_t kCommAxes = 5;

/// Maps an op's process group to a reported axis (dp_cp counts as dp).
[[nodiscard]] CommAxis axis_of(ops::CommDim dim) noexcept;

/// One communication interval of a pass, relative to the pass start (for traces).
struct CommInterval {
  CommAxis axis = CommAxis::tp;
  double start_s = 0;
  double end_s = 0;
  const char* name = "";
};

/// A replayed pass.
struct PassTime {
  double seconds = 0;                       ///< makespan of the pass
  double compute_s = 0;                     ///< compute ops alone
  std::array<double, kCommAxes> exposed_s{};  ///< compute stream idle, blamed on an axis
  std::array<double, kCommAxes> comm_s{};     ///< communication time per axis (overlapped or not)
  double host_s = 0;                        ///< GPU idle waiting for the host to issue work
  std::vector<CommInterval> comm;           ///< only when recorded
};

/// The four passes of one op list: forward, full backward (recompute + input + weight
/// gradients in program order), and the split backward's B (recompute + input gradients)
/// and W (weight gradients).
struct LayerTimes {
  PassTime forward;
  PassTime backward;
  PassTime backward_input;
  PassTime backward_weight;
};

/// The share-weighted sum of the times of several kinds of layer (parallel::block_kinds);
/// recorded communication intervals are those of the first kind.
[[nodiscard]] LayerTimes blend(const std::vector<std::pair<LayerTimes, double>>& kinds);

/// Prices one repetition of an op in seconds.
using OpPricer = std::function<double(const ops::Op&)>;

/// The host (CPU) side: the framework issues each kernel of an op from the CPU, `kernel_s`
/// per kernel outside CUDA graphs (Op::graphed), one kernel per repetition of the op. A pass
/// cannot end before the host has issued it all. Where the host waits for the GPU
/// (Op::host_wait: a `sync_s` device-to-host round trip, and for a dispatcher's token counts
/// `resume_s` of its own work before its next launch), the host's issue times enter the
/// replay: each op starts only once the host has issued it, so after every sync the GPU waits
/// for the host to catch up. Without syncs the host runs ahead of the GPU across passes and
/// only its total bounds the pass. kernel_s = 0: no host cost.
struct HostCost {
  double kernel_s = 0;
  double sync_s = 0;
  double resume_s = 0;
};

/// Replays the passes of `ops`. `record` keeps the communication intervals (traces).
/// `comm_sm_share` is the share of the GPU's SMs a running collective occupies; compute
/// overlapped with it runs at 1 − that rate (see TaskSpec::sm_share). Ops of Pass::optimizer
/// are ignored (the step level handles them).
[[nodiscard]] LayerTimes replay_layer(const std::vector<ops::Op>& ops, const OpPricer& price,
                                      bool record = false, double comm_sm_share = 0,
                                      HostCost host = {});

/// Replays one ordered op sequence (all of one pass) on `graph`/`engine` buffers.
[[nodiscard]] PassTime replay_pass(const std::vector<const ops::Op*>& ops,
                                   const std::vector<double>& seconds, bool record,
                                   TaskGraph& graph, Engine& engine, EventQueue& queue,
                                   double comm_sm_share = 0, HostCost host = {});

}  // namespace tetra::sim
