#pragma once
/// PyTorch-native training as torchtitan runs it ([training] framework = "fsdp"): FSDP2's
/// resharding after forward, torch.compile of the transformer blocks and async TP. HSDP's
/// replica count lives in the layout (Layout::dp_replicate); Float8 linears are FP8 recipes
/// (fp8.hpp).

namespace tetra::llama {

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

  static constexpr int kReshardDefault = -1;
  static constexpr int kReshardFull = 0;
};

/// Whether FSDP2 keeps every transformer block unsharded from its forward to its backward
/// (no all-gather before backward): reshard_after_forward = false, or torchtitan's default
/// under PP. False outside framework fsdp.
[[nodiscard]] bool fsdp_keeps_blocks_unsharded(const Training& training, const Layout& layout) noexcept;

}  // namespace tetra::llama
