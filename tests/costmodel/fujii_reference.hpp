#pragma once
// F24-code's memory estimator (Fujii et al. 2024, okoge-kaz/Megatron-LM
// tools/memory_estimate; reference/memory.md §10) on the first pipeline stage: the reference
// that F24's test vectors check bit for bit and that the physics model is compared with.

#include "tetra/costmodel/memory.hpp"
#include "tetra/llama/layout.hpp"
#include "tetra/llama/model.hpp"

namespace tetra::test {

/// First pipeline stage as F24-code estimates it: the final-code parameter variant of §2.2
/// (norm weights divided by t), the layout's state bytes and ZeRO sharding over DP x CP,
/// s' b h (12 + 4 k/a + 8 h_ffn/h) / t per layer for p in-flight micro-batches,
/// A_embed_in = 8 s' b h p / t, the p = 1 head term, and no buffers or fragmentation.
/// F24-code models dense models without FP8 weights or activation offloading.
[[nodiscard]] costmodel::StageMemory fujii_first_stage(const llama::Model& model,
                                                       const llama::Training& training,
                                                       const llama::Layout& layout);

}  // namespace tetra::test
