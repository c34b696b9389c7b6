#pragma once
// Model states and communication buffers of one rank under FSDP2 (`fully_shard`), as
// torchtitan applies it (`torchtitan/parallelisms/parallelize_llama.py` apply_fsdp at 9dec370):
// every transformer block is its own FSDP unit and the root module (embedding, final norm,
// output) another. Part of memory.cpp; a separate file because the terms are FSDP2's alone.

#include "tetra/parallel/layout.hpp"
#include "tetra/model/model.hpp"
#include "tetra/parallel/params.hpp"

namespace tetra::costmodel::detail {

struct Fsdp2States {
  double sharded_params = 0;      ///< fp32 parameter shards (also Adam's master weights)
  double sharded_grads = 0;       ///< fp32 gradient shards
  /// Under pipelining: the stage's unsharded gradients accumulated in the reduce dtype until
  /// the deferred reduce-scatter (parallel::fsdp_defers_gradient_reduction in
  /// parallel/execution.hpp); they take the place of the shards, which the reduce-scatter
  /// produces as it frees them.
  double accumulated_grads = 0;
  double optimizer = 0;           ///< Adam exp_avg + exp_avg_sq of the shards, fp32
  double resident_unsharded = 0;  ///< unsharded parameters held from forward through backward
  double gather_transient = 0;    ///< the block computing and the next one's all-gather output
  double reduce_transient = 0;    ///< a block's unsharded gradients and one reduce-scatter input
  double optimizer_temporary = 0; ///< foreach AdamW's fp32 temporary of the shard
};

/// Ranks one parameter is sharded over: the DP ranks of one HSDP replica times CP
/// (torchtitan's `dp_shard_cp` mesh).
[[nodiscard]] double fsdp2_shard_ranks(const parallel::Layout& layout) noexcept;

/// FSDP2 states of one pipeline rank holding `stage`.
[[nodiscard]] Fsdp2States fsdp2_states(const model::Model& model, const parallel::Training& training,
                                       const parallel::Layout& layout, const parallel::StageParams& stage);

}  // namespace tetra::costmodel::detail
