#pragma once
/// How a run executes, computed once from its Training and Layout: what the framework fuses
/// and how it accumulates, the precision of its linears, what overlaps, what the host waits
/// for. The op builders and the simulator read these instead of testing the framework, the
/// FP8 recipe or the compiler themselves.

#include "tetra/parallel/cuda_graph.hpp"
#include "tetra/parallel/fp8.hpp"
#include "tetra/parallel/layout.hpp"

namespace tetra::parallel {

/// What a framework keeps in memory: the part of ExecutionTraits the memory model reads, cheap
/// to compute per estimate since it depends on the Training alone.
struct MemoryHabits {
  bool megatron = true;
  bool deepspeed = false;
  bool fsdp = false;
  bool fp8_linears = false;    ///< a low-precision recipe is set
  bool compiled_loss = false;  ///< Inductor compiles the loss (TorchNative::loss_compiled)
  /// Megatron-Core keeps the SP shard of a column-parallel GEMM input and re-gathers it in
  /// backward (`megatron/core/tensor_parallel/layers.py`); a plain F.linear after a gather
  /// saves the gathered input (Aleph-Alpha/scaling `core/nn/norm/rms_norm.py` gathers after
  /// the norm, `column_parallel_linear.py` calls F.linear on it).
  bool sp_saves_shard = true;
  /// Megatron-Core's `deallocate_output_tensor` frees a stage's output after the send
  /// (`pipeline_parallel/schedules.py`); other pipeline engines keep it for the backward call.
  bool frees_stage_output = true;
  /// A fused multi-tensor Adam (apex / TE, Megatron-Core): no full-size temporaries at the
  /// step. torch.optim.AdamW (foreach) builds one fp32 temporary the size of the shard, and
  /// DeepSpeed-style ZeRO (Aleph-Alpha/scaling `core/optimizer/parameter_group.py`
  /// `step_prequel`) copies the owned gradient partition to fp32 before the step.
  bool fused_adam = true;
  /// Megatron-Core's fused SwiGLU (`megatron/core/fusions/fused_bias_swiglu.py`) saves only
  /// its input and recomputes silu in backward; eager SwiGLU saves gate, up and silu(gate).
  /// Inductor fuses it too under torch.compile.
  bool fused_swiglu = true;
  /// RMSNorm as one kernel that saves its input (and per-row rstd) only.
  bool fused_norm = true;
  /// torchtitan's train step drops the bf16 logits before backward (`del pred` in `train.py`
  /// at 9dec370): the loss holds only its fp32 log-softmax.
  bool frees_logits_before_backward = false;
  /// Megatron-Core's vocab-parallel cross entropy overwrites its saved softmax with the logit
  /// gradient in backward (`megatron/core/tensor_parallel/cross_entropy.py`); PyTorch's
  /// `loss_parallel` builds the gradient out of place in fp32
  /// (`torch/distributed/tensor/parallel/loss.py` `_nll_loss_and_log_softmax_backward`).
  bool vocab_parallel_loss_in_place = true;
  /// Under torch.compile the block's graph saves what its backward reads (the partitioner of
  /// `torch/_functorch/partitioners.py`), not every output a checkpoint policy marks.
  bool saves_unread_outputs = true;
  /// Transformer Engine saves the quantised FP8 copies of GEMM inputs for backward; torchao's
  /// Float8 linears save the high-precision input and weight and cast again in backward
  /// (`torchao/float8/float8_linear.py` matmul_with_hp_or_float8_args).
  bool saves_quantized_inputs = true;
  /// A fused cross-entropy kernel (Training::fused_cross_entropy): no fp32 log-softmax of the
  /// logits is ever materialised.
  bool fused_loss = false;
  /// Bytes of optimizer state per parameter besides the weights and gradients: exp_avg and
  /// exp_avg_sq (fp32, or bf16 under Megatron-Core's precision-aware optimizer,
  /// `optimizer_config.py` exp_avg_dtype / exp_avg_sq_dtype), an fp32 master copy unless the
  /// weights are fp32 (Megatron-LM `docs/source/api-guide/dist_optimizer.md`: 12 or 16 B per
  /// parameter), and an fp32 copy of fp16 gradients (20 B per parameter).
  double optimizer_bytes = 12;
};

struct ExecutionTraits {
  // ---- Framework habits ----
  /// Megatron-Core (fused TE modules, fused SwiGLU, main_grad accumulation in the wgrad GEMM).
  bool megatron = true;
  /// Aleph Alpha's DeepSpeed-style trainer: gradients flattened and all-reduced in fp32.
  bool deepspeed = false;
  /// PyTorch FSDP2 (torchtitan, Composer): its own model-state sharding and no weight caches.
  bool fsdp = false;
  /// PyTorch-native modules (framework deepspeed / fsdp): every elementwise step of norm,
  /// rotary, SwiGLU, softmax and loss is its own kernel with fp32 intermediates.
  bool eager = false;
  /// Eager and not compiled: those steps run as separate kernels (torch.compile fuses them
  /// into Triton kernels with the byte counts of fused kernels).
  bool eager_kernels = false;
  /// RMSNorm as the eager fp32 chain (eager kernels, fused_rmsnorm = false).
  bool unfused_rmsnorm = false;
  /// q, k, v and the gated MLP's gate and up as separate linears (PyTorch-native models,
  /// framework fsdp); Megatron-Core and DeepSpeed fuse them.
  bool separate_linears = false;
  /// Context parallelism is PyTorch's (framework fsdp with cp > 1), not Transformer Engine's
  /// ring.
  bool torch_cp = false;
  /// Inductor compiles the loss with the blocks (TorchNative::loss_compiled).
  bool compiled_loss = false;
  /// The loss runs on the vocabulary shards of the TP ranks (vocab-parallel cross entropy):
  /// Megatron-Core always, PyTorch's loss_parallel under TP.
  bool loss_on_vocab_shards = true;
  /// Micro-batches per step (global_batch / (mbs * dp)), at least 1.
  int micro_batches = 1;
  /// Bytes per weight element of the eager gradient accumulation after each weight-gradient
  /// GEMM, averaged over the micro-batches: autograd's AccumulateGrad stores the first and
  /// runs `grad += new_grad` for every later one (`pytorch/pytorch:
  /// torch/csrc/autograd/functions/accumulate_grad.h`). 0 under Megatron-Core.
  double grad_accumulate = 0;

  // ---- Precision ----
  double act = 2;  ///< bytes of an activation element
  /// FP8 / FP4 linears (parallel/fp8.hpp): the recipe, the format of their GEMMs and the bytes of
  /// one quantised element with its scales.
  Fp8Recipe recipe = Fp8Recipe::none;
  bool fp8_linears = false;  ///< a recipe is set
  GemmFormat linear_format = GemmFormat::training;
  double quantized = 0;
  /// FP8 copies a Transformer Engine cast writes (Fp8Training::copies).
  double cast_copies = 2;
  /// Transformer Engine casts each weight once per step (`is_first_microbatch`) and reuses
  /// the copy for the later micro-batches; torchao casts at every use.
  bool cached_weight_casts = false;
  /// FP8 parameters all-gathered by the data-parallel sharding (fp8_param_gather).
  bool fp8_param_gather = false;
  /// Bytes per element of the SP all-gather before a column-parallel linear: torchtitan's
  /// Float8ColwiseParallel casts to FP8 before gathering under tensorwise scaling
  /// (`torchao/float8/float8_tensor_parallel.py`); everything else gathers `act`.
  double tp_gather_bytes = 2;

  // ---- Overlap ----
  /// TP communication overlapped with the GEMMs: TE userbuffers (tp_comm_overlap) or
  /// Inductor's micro-pipelined async TP, both under SP.
  bool tp_overlap = false;
  /// The SP all-gathers feeding a GEMM run under it; Inductor fuses an all-gather only with
  /// the matmul that consumes it (`torch/_inductor/fx_passes/micro_pipeline_tp.py`), which
  /// rowwise Float8 breaks by casting the gathered tensor first (pytorch/pytorch #149990).
  bool tp_gather_overlap = false;
  /// EP exchanges paired with another micro-batch's compute (moe_a2a_overlap).
  bool a2a_overlap = false;
  /// Gradient reduction overlapped with the backward (Training::overlap_grad_reduce), except
  /// where the framework reduces only afterwards: Aleph Alpha's DeepSpeed-style trainer on the
  /// compute stream after the backward, FSDP2 under pipelining after a stage's last backward.
  bool overlap_grad_reduce = true;
  /// The parameter all-gather overlapped with the forward (Training::overlap_param_gather),
  /// except under the DeepSpeed-style trainer, which gathers after the optimizer step.
  bool overlap_param_gather = true;

  // ---- Host ----
  /// The host waits for the per-expert token counts of each MoE layer
  /// (Training::moe_counts_on_host).
  bool counts_on_host = true;
  /// The router scores with Transformer Engine's fused kernels (Training::moe_router_fusion) and
  /// adds a load-balancing loss (Training::moe_aux_loss).
  bool router_fusion = false;
  bool router_aux_loss = false;
  CudaGraphs graphs;  ///< what runs inside CUDA graphs (no host time)
  // ---- What the framework keeps in memory (MemoryHabits) ----
  MemoryHabits memory;
};

/// The memory habits of `training`'s framework (they do not depend on the layout). Inline: the
/// memory model asks for them in every term of every estimate.
[[nodiscard]] inline MemoryHabits memory_habits(const Training& tr) noexcept {
  MemoryHabits h;
  h.megatron = tr.framework == Framework::megatron;
  h.deepspeed = tr.framework == Framework::deepspeed;
  h.fsdp = tr.framework == Framework::fsdp;
  h.fp8_linears = tr.fp8.enabled();
  h.compiled_loss = tr.torch.loss_compiled();
  h.sp_saves_shard = h.megatron;
  h.frees_stage_output = h.megatron;
  h.fused_adam = h.megatron;
  h.fused_swiglu = h.megatron;
  h.fused_norm = tr.fused_rmsnorm;
  h.fused_loss = tr.fused_cross_entropy;
  h.vocab_parallel_loss_in_place = h.megatron;
  const double moments = 2.0 * bytes_of(tr.adam_moments_dtype);
  if (tr.precision == Precision::fp32) {
    h.optimizer_bytes = moments;  // the weights are the master copy
  } else {
    h.optimizer_bytes = 4.0 + moments;
    if (tr.precision == Precision::fp16 && tr.grad_dtype != Precision::fp32) h.optimizer_bytes += 4.0;
  }
  if (h.fsdp) {
    h.frees_logits_before_backward = true;
    h.saves_quantized_inputs = false;
    if (tr.torch.compile) {
      // Inductor fuses RMSNorm and SiLU x up into single kernels (torchtitan compiles each
      // block, `apply_compile`).
      h.fused_swiglu = true;
      h.fused_norm = true;
      h.saves_unread_outputs = false;
    }
  }
  return h;
}

/// Whether FSDP2 keeps every transformer block unsharded from its forward to its backward
/// (no all-gather before backward): reshard_after_forward = false, or torchtitan's default
/// under PP. False outside framework fsdp.
[[nodiscard]] bool fsdp_keeps_blocks_unsharded(const Training& training, const Layout& layout) noexcept;

/// Whether FSDP2 defers its gradient reduction to the end of the step: under PyTorch's
/// pipelining every micro-batch's backward runs with `set_requires_gradient_sync(False)`, so
/// the stage accumulates unsharded gradients in the reduce dtype and reduce-scatters them after
/// its last backward (`torch/distributed/pipelining/stage.py`
/// `_PipelineStageBase.backward_maybe_with_nosync`, `run_post_backward`). framework fsdp,
/// zero_stage 3, pp > 1.
[[nodiscard]] bool fsdp_defers_gradient_reduction(const Training& training, const Layout& layout) noexcept;

/// The traits of `training` under `layout`.
[[nodiscard]] ExecutionTraits execution_traits(const Training& training, const Layout& layout);

}  // namespace tetra::parallel
