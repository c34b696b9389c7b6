#pragma once
/// The host side of the input pipeline: how long a rank's PyTorch DataLoader needs to hand over
/// one micro-batch, when what it builds is an attention mask of s x s bytes
/// (parallel/data_loader.hpp). The loader runs beside the GPU (worker processes prefetch), so it
/// bounds the step from below instead of adding to it: over a run a rank consumes as many
/// micro-batches per step as its loader builds, whatever the prefetch depth.

#include "tetra/hw/cluster.hpp"
#include "tetra/parallel/layout.hpp"

namespace tetra::costmodel {

/// Host bytes behind one sample, Megatron-Core GPTDataset at core_r0.8-0.9
/// (`megatron/core/datasets/gpt_dataset.py` `__getitem__`, `_get_ltor_masks_and_position_ids`),
/// PyTorch's `default_collate` and pin-memory thread (`torch/utils/data/_utils/collate.py`,
/// `pin_memory.py`). The tokens, labels, loss mask and positions (a few bytes per token) are
/// left out.
struct LoaderSampleBytes {
  double fresh = 0;     ///< written into newly allocated memory (first touch), in a worker
  double resident = 0;  ///< read from memory already touched, in a worker
  double pinned = 0;    ///< copied into the pinned batch by the training process's pin thread
};

/// per_sample: `torch.ones((s, s))` fp32 (4 s² fresh), `torch.tril` out of place (4 s² read,
/// 4 s² fresh), `< 0.5` to bool (4 s² read, s² fresh), the collate's stack into shared memory
/// (s² read, s² fresh): 10 s² fresh and 9 s² resident; the pin thread copies s². cached: the
/// collate and the pin copy of the kept bool mask (s² fresh, s² read; s² pinned). The loop that
/// zeroes each document's block is data-dependent and left out (a rewrite of resident memory).
[[nodiscard]] LoaderSampleBytes loader_sample_bytes(parallel::LoaderMask mask, double seq_len) noexcept;

/// Seconds a rank's loader needs per micro-batch: each worker builds whole micro-batches of mbs
/// samples (fresh bytes at first_touch_Bps, resident at copy_Bps), `dataloader_workers` of them
/// in parallel, while the pin thread copies each batch at copy_Bps; the slower of the two paces
/// the loader. With no workers the training process does both in turn. 0 when the loader builds
/// no mask.
[[nodiscard]] double loader_seconds_per_micro_batch(const parallel::Training& training,
                                                    const parallel::Layout& layout,
                                                    const hw::Host& host) noexcept;

}  // namespace tetra::costmodel
