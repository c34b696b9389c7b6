#pragma once
/// Pipeline schedules as generators of each pipeline rank's task order (not bubble formulas):
/// the event simulation turns the order into time, so unequal pass times and communication
/// stalls show up (sources per schedule below).

#include <cstdint>
#include <vector>

#include "tetra/parallel/layout.hpp"

namespace tetra::sim {

/// The pass of one pipeline task.
enum class StepPass : std::uint8_t {
  forward,          ///< F
  backward,         ///< full backward (input + weight gradients)
  backward_input,   ///< B of a split backward (ZB-H1)
  backward_weight,  ///< W of a split backward (ZB-H1)
};

[[nodiscard]] const char* to_string(StepPass p) noexcept;

/// One task of a pipeline rank: a pass of one micro-batch through one local model chunk.
struct ScheduleItem {
  std::int32_t micro_batch = 0;
  std::int32_t chunk = 0;  ///< local chunk index 0..v-1 (virtual stage = chunk·p + rank)
  StepPass pass = StepPass::forward;
  friend bool operator==(const ScheduleItem&, const ScheduleItem&) = default;
};

/// Task order of pipeline rank `rank` (0-based) for `p` ranks, `v` chunks per rank and `m`
/// micro-batches, appended to `out` after clearing it.
///   - gpipe: all forwards, then all backwards (Huang et al. 2019; arXiv 2104.04473 §2.2).
///   - 1f1b: warm-up min(p−rank−1, m) forwards, then one forward / one backward, then the
///     cool-down backwards (PipeDream-Flush; Megatron `forward_backward_pipelining_without_
///     interleaving`).
///   - interleaved: Megatron's order (`get_pp_rank_microbatches`, `get_schedule_table`):
///     micro-batches in groups of G = p; within a group all micro-batches of chunk 0, then
///     chunk 1, ...; backward walks chunks in reverse; warm-up
///     min((p−rank−1)·2 + (v−1)·G, m·v); all forwards first when that covers everything.
///   - zb-h1: 1F1B with the backward split into B and W; rank r defers each W by r backward
///     slots, so the later ranks pass gradients up at B speed and the deferred Ws fill their
///     cool-down; bubble (p−1)(t_F + t_B − t_W) (Qi et al., arXiv 2401.10241 §3.1, Table 2).
///   - layered: breadth-first layered gradient accumulation with modular placement
///     (Lamy-Poirier, arXiv 2106.02679; placement i mod p as ServiceNow Fast-LLM's
///     `pipeline_rank`): for each local chunk in pipeline order the forward of every
///     micro-batch, then for each chunk in reverse order
///     the backward of every micro-batch.
void pipeline_order(parallel::Schedule schedule, int p, int v, int m, int rank,
                    std::vector<ScheduleItem>& out);

/// Convenience form returning a new vector.
[[nodiscard]] std::vector<ScheduleItem> pipeline_order(parallel::Schedule schedule, int p, int v,
                                                       int m, int rank);

/// Interleaved warm-up count of Megatron for rank `rank`: min((p−rank−1)·2 + (v−1)·G, m·v)
/// with group size G (`megatron/core/pipeline_parallel/schedules.py`, `get_pp_rank_microbatches`).
[[nodiscard]] int interleaved_warmup(int p, int v, int m, int rank, int group) noexcept;

/// Whether the schedule splits the backward into B and W tasks.
[[nodiscard]] bool splits_backward(parallel::Schedule schedule) noexcept;

}  // namespace tetra::sim
