#pragma once
/// What a framework's data loader builds on the host for every sample. Megatron-Core's
/// GPTDataset (`megatron/core/datasets/gpt_dataset.py`, `_get_ltor_masks_and_position_ids`)
/// builds an s x s causal attention mask in the loader's worker processes unless
/// `--no-create-attention-mask-in-dataloader` is given; it builds it once and caches it, or
/// again for every sample when `reset_position_ids`, `reset_attention_mask` or `eod_mask_loss`
/// is set (the mask then depends on where the documents of the sample end). The cost is host
/// memory traffic (costmodel/data_loader.hpp).

#include <optional>
#include <string_view>

namespace tetra::parallel {

struct Training;

enum class LoaderMask {
  none,        ///< no mask on the host (flash / fused attention with a causal flag, cu_seqlens)
  cached,      ///< one mask per worker, reused: collated and pinned for every sample
  per_sample,  ///< built for every sample (Megatron reset_attention_mask and friends)
};

/// The mask a run's loader builds: the scenario's, or its framework's default. Megatron-LM
/// creates the mask in the data loader by default (`--create-attention-mask-in-dataloader`,
/// megatron/training/arguments.py) and caches it; the PyTorch-native loaders of torchtitan,
/// llm-foundry and Aleph Alpha's trainer build none.
[[nodiscard]] LoaderMask loader_mask(const Training& training) noexcept;

[[nodiscard]] const char* to_string(LoaderMask mask) noexcept;
/// Inverse of to_string; nothing for an unknown name.
[[nodiscard]] std::optional<LoaderMask> parse_loader_mask(std::string_view name) noexcept;

}  // namespace tetra::parallel
