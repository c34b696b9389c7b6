#pragma once
/// PyTorch-native training as torchtitan runs it ([training] framework = "fsdp"): FSDP2's
/// resharding after forward, torch.compile of the transformer blocks and async TP. HSDP's
/// replica count lives in the layout (Layout::dp_replicate); Float8 linears are FP8 recipes
/// (fp8.hpp).

namespace tetra::parallel {

struct Training;
struct Layout;

struct TorchNative {
  /// FSDP2 `fully_shard(reshard_after_forward=...)` for the transformer blocks: after a
  /// block's forward its parameters are freed back to shards over this many ranks
  /// (`torch/distributed/_composable/fsdp/_fsdp_init.py` _get_post_forward_mesh_info).
  /// kReshardDefault = torchtitan's choice (`apply_fsdp`): every block but the last reshards,
  /// none under PP; kReshardFull (true) = the whole shard group; 1 (false) = kept unsharded
  /// until backward; k = shards over groups of k ranks (k divides the shard group).
  int reshard_after_forward = kReshardDefault;
  /// torch.compile of every transformer block (torchtitan `apply_compile`,
  /// `torchtitan/parallelisms/parallelize_llama.py`): Inductor fuses the block's memory-bound
  /// ops into a few Triton kernels and saves for backward only what the backward reads.
  bool compile = false;
  /// Async TP (torchtitan `enable_async_tensor_parallel`): Inductor's micro-pipelined TP
  /// (`torch._inductor.config._micro_pipeline_tp`) decomposes the SP all-gather + matmul and
  /// matmul + reduce-scatter pairs into chunks overlapped with the GEMMs. Needs compile.
  bool async_tp = false;
  /// torchtitan compiles the loss with the blocks (`build_cross_entropy_loss`,
  /// `torchtitan/components/loss.py` at 820504e; `train.py` at 4d88a8a44). At 9dec370 it is
  /// commented out ("compiling loss function causes CUDA errors"): false describes that code.
  /// Takes effect only with compile.
  bool compile_loss = true;

  /// Inductor runs the cross-entropy: one fused pass over the bf16 logits that saves only the
  /// logits and per-token statistics, and writes the bf16 logit gradient in backward.
  [[nodiscard]] bool loss_compiled() const noexcept { return compile && compile_loss; }

  static constexpr int kReshardDefault = -1;
  static constexpr int kReshardFull = 0;
};

}  // namespace tetra::parallel
