#include "tetra/parallel/execution.hpp"

#include <algorithm>

namespace tetra::parallel {

bool fsdp_keeps_blocks_unsharded(const Training& training, const Layout& layout) noexcept {
  const int raf = training.torch.reshard_after_forward;
  return training.framework == Framework::fsdp && training.zero_stage >= 3 &&
         (raf == 1 || (raf == TorchNative::kReshardDefault && layout.pp > 1));
}

bool fsdp_defers_gradient_reduction(const Training& training, const Layout& layout) noexcept {
  return training.framework == Framework::fsdp && training.zero_stage >= 3 && layout.pp > 1;
}

ExecutionTraits execution_traits(const Training& tr, const Layout& l) {
  ExecutionTraits x;
  const bool sp = l.sp && l.tp > 1;
  x.megatron = tr.framework == Framework::megatron;
  x.deepspeed = tr.framework == Framework::deepspeed;
  x.fsdp = tr.framework == Framework::fsdp;
  x.eager = !x.megatron;
  x.eager_kernels = x.eager && !tr.torch.compile;
  x.unfused_rmsnorm = x.eager_kernels && !tr.fused_rmsnorm;
  x.separate_linears = tr.framework == Framework::fsdp;
  x.torch_cp = tr.framework == Framework::fsdp && l.cp > 1;
  x.compiled_loss = tr.torch.loss_compiled();
  x.loss_on_vocab_shards = x.megatron || (tr.framework == Framework::fsdp && l.tp > 1);
  x.micro_batches = std::max(1, micro_batches(l, tr));
  if (x.eager) {
    const double m = x.micro_batches;
    x.grad_accumulate = 3.0 * bytes_of(tr.grad_dtype) * (m - 1.0) / m;
  }
  x.act = bytes_of(tr.precision);
  x.recipe = tr.fp8.recipe;
  x.fp8_linears = tr.fp8.enabled();
  x.linear_format = gemm_format(x.recipe);
  x.quantized = quantized_bytes_per_element(x.recipe);
  x.cast_copies = tr.fp8.copies();
  x.cached_weight_casts = tr.fp8.enabled() && !torchao_recipe(x.recipe);
  x.fp8_param_gather = tr.fp8.param_gather && tr.fp8.enabled();
  x.tp_gather_bytes = x.recipe == Fp8Recipe::tensorwise ? 1.0 : x.act;
  x.tp_overlap = (tr.tp_comm_overlap || tr.torch.async_tp) && sp;
  x.tp_gather_overlap = x.tp_overlap && !(tr.torch.async_tp && x.recipe == Fp8Recipe::rowwise);
  x.a2a_overlap = tr.moe_a2a_overlap;
  x.overlap_grad_reduce = tr.overlap_grad_reduce && !x.deepspeed && !fsdp_defers_gradient_reduction(tr, l);
  x.overlap_param_gather = tr.overlap_param_gather && !x.deepspeed;
  x.counts_on_host = tr.moe_counts_on_host();
  x.router_fusion = tr.moe_router_fusion;
  x.router_aux_loss = tr.moe_aux_loss;
  x.graphs = tr.cuda_graphs;

  x.memory = memory_habits(tr);
  return x;
}

}  // namespace tetra::parallel
