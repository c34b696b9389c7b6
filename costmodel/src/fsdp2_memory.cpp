// FSDP2 memory terms. Sources: pytorch/pytorch `torch/distributed/_composable/fsdp/`
// (_fsdp_param.py, _fsdp_param_group.py, _fsdp_collectives.py, _fsdp_state.py, _fsdp_init.py)
// and pytorch/torchtitan `torchtitan/parallelisms/parallelize_llama.py`, `train.py` at 9dec370.
#include "fsdp2_memory.hpp"

#include <algorithm>

#include "tetra/ops/ops.hpp"
#include "tetra/parallel/execution.hpp"

namespace tetra::costmodel::detail {

double fsdp2_shard_ranks(const parallel::Layout& layout) noexcept {
  return static_cast<double>(std::max(layout.shard_dp(), 1)) * std::max(layout.cp, 1);
}

Fsdp2States fsdp2_states(const model::Model& model, const parallel::Training& training,
                         const parallel::Layout& layout, const parallel::StageParams& stage) {
  Fsdp2States st;
  const double shard = fsdp2_shard_ranks(layout);
  const double phi = static_cast<double>(stage.params);
  const double act = parallel::bytes_of(training.precision);
  // `fully_shard` keeps each parameter's shard in the dtype the model was built in (fp32 in
  // torchtitan); the mixed-precision policy casts to param_dtype only for the all-gather. So
  // the shards are Adam's master weights, and their gradients are fp32 shards too.
  st.sharded_params = 4.0 * phi / shard;
  st.sharded_grads = 4.0 * phi / shard;
  st.optimizer = 8.0 * phi / shard;
  // torch.optim.AdamW with foreach=True (torchtitan's default, `build_optimizers`): the
  // _foreach_sqrt of exp_avg_sq is a new fp32 list the size of the shard.
  st.optimizer_temporary = 4.0 * phi / shard;

  const double block = ops::gathered_layer_param_bytes(model, training, layout.tp);
  const double blocks = stage.layers;
  // The root unit (what is not a block: embedding, final norm, output) is never resharded
  // after forward (`FSDPState._lazy_init`: "For the root, do not reshard after forward").
  const double root_params =
      std::max(0.0, phi - static_cast<double>(parallel::params_per_layer(model)) / std::max(layout.tp, 1) * blocks);
  st.resident_unsharded = root_params * act;
  // Blocks kept unsharded between their forward and backward.
  const int raf = training.torch.reshard_after_forward;
  double resident_blocks = 0.0;
  if (parallel::fsdp_keeps_blocks_unsharded(training, layout)) {
    // reshard_after_forward = false, or torchtitan under PP (one all-gather per step, not
    // per micro-batch).
    resident_blocks = blocks;
  } else if (raf == parallel::TorchNative::kReshardDefault) {
    // torchtitan: every block but the last, whose backward follows at once.
    resident_blocks = std::min(blocks, 1.0);
  } else if (raf > 1) {
    resident_blocks = blocks / static_cast<double>(raf);  // a 1/raf share of each block
  }
  st.resident_unsharded += resident_blocks * block;
  // While a block computes: its unsharded parameters and the all-gather output of the block
  // prefetched after it (`foreach_all_gather`; copied out into that block's parameters only
  // when it starts, `wait_for_unshard`, once this one has resharded).
  st.gather_transient = resident_blocks >= blocks ? 0.0 : 2.0 * block;
  // Backward of a block: its unsharded gradients (param dtype), and the reduce-scatter input
  // of the block before it in the reduce dtype (`foreach_reduce`), which FSDP2 frees only
  // when this block's own reduce-scatter is issued (`comm_ctx.reduce_scatter_state`). The
  // root's unsharded gradients wait for the root's post-backward at the end.
  const double block_params = static_cast<double>(parallel::params_per_layer(model)) / std::max(layout.tp, 1);
  const double reduce_bytes = parallel::bytes_of(training.grad_dtype);
  if (parallel::fsdp_defers_gradient_reduction(training, layout)) {
    // Pipelining: no reduce-scatter until the last backward; each block's param-dtype
    // gradient is cast and added into its reduce-dtype accumulator
    // (`FSDPParam.to_accumulated_grad_if_needed`, `_fsdp_param.py`).
    st.accumulated_grads = reduce_bytes * phi;
    st.sharded_grads = 0.0;
    st.reduce_transient = block_params * (act + reduce_bytes);
    return st;
  }
  st.reduce_transient = block_params * (act + reduce_bytes) + root_params * act;
  return st;
}

}  // namespace tetra::costmodel::detail
