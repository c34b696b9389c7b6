#pragma once
// F24-code's memory estimator (Fujii et al. 2024, arXiv 2411.06465; okoge-kaz/Megatron-LM
// tools/memory_estimate/memory_consumption_estimator.py and
// megatron/training/theoretical_memory_usage.py, branch v0.9.0-abci) on the first pipeline
// stage: the reference that F24's test vectors (tools/memory_estimate/
// tests_memory_consumption_estimator.py) check bit for bit and that the physics model is
// compared with.

#include "tetra/costmodel/memory.hpp"
#include "tetra/parallel/layout.hpp"
#include "tetra/model/model.hpp"

namespace tetra::test {

/// First pipeline stage as F24-code estimates it: the parameter form of
/// theoretical_memory_usage.py (v0.9.0-abci)
/// (norm weights divided by t), the layout's state bytes and ZeRO sharding over DP x CP,
/// s' b h (12 + 4 k/a + 8 h_ffn/h) / t per layer for p in-flight micro-batches,
/// A_embed_in = 8 s' b h p / t, the p = 1 head term, and no buffers or fragmentation.
/// F24-code models dense models without FP8 weights or activation offloading.
[[nodiscard]] costmodel::StageMemory fujii_first_stage(const model::Model& model,
                                                       const parallel::Training& training,
                                                       const parallel::Layout& layout);

}  // namespace tetra::test
