#pragma once
// Memory terms of mixture-of-experts layers and multi-head latent attention: the expert states
// sharded over expert parallelism and the expert data-parallel group, the saved tensors of the
// router, the dispatched tokens and the grouped expert GEMMs, the dispatch buffers, and MLA's
// latent activations. Part of memory.cpp; a separate file because the terms are MoE's alone.
// Conventions: Megatron-Core `megatron/core/transformer/moe/` (router.py, token_dispatcher.py,
// experts.py, moe_utils.py permute/unpermute) and `multi_latent_attention.py`.

#include "tetra/parallel/layout.hpp"
#include "tetra/model/model.hpp"

namespace tetra::costmodel::detail {

/// Per-micro-batch quantities of one MoE layer on one GPU, bytes.
struct MoeLayerMemory {
  /// Saved for backward by one MoE layer beyond what a dense layer of the model saves (the
  /// dense MLP's tensors replaced by the router's, the shared experts' and the routed
  /// experts'), under the layout's recompute mode. May be negative.
  double saved_delta = 0;
  /// The routed-expert part of the layer's saved tensors alone (for breakdowns).
  double expert_saved = 0;
  /// Working set while the layer runs beyond its saved tensors: the dispatch and combine
  /// buffers of the permuted tokens and the expert GEMMs' output gradients.
  double transient = 0;
};

/// Token-expert pairs one GPU's experts process per micro-batch: tokens per rank (s'·b, over
/// t with SP) × top-k × etp (the ETP group gathers its ranks' tokens) × the routing
/// imbalance, capped by the capacity factor when one is set.
[[nodiscard]] double expert_pairs_per_rank(const model::Model& model, const parallel::Training& training,
                                           const parallel::Layout& layout) noexcept;

/// The MoE layer terms above; zeros for a dense model.
[[nodiscard]] MoeLayerMemory moe_layer_memory(const model::Model& model,
                                              const parallel::Training& training,
                                              const parallel::Layout& layout);

/// Saved bytes per layer and micro-batch that the model's attention holds beyond the GQA
/// tensors memory.cpp counts with q = h: MLA's latents and its own Q/K/V widths, or the wider
/// Q/K/V/O of an explicit head_dim (Qwen3: 32 x 128 = 4096 on hidden 2048), plus the inputs the
/// per-head Q and K norms save (Model::qk_norm). 0 for a standard Llama. Recompute as for moe_layer_memory.
[[nodiscard]] double attention_saved_delta(const model::Model& model, const parallel::Training& training,
                                           const parallel::Layout& layout);

/// Whether the linears save their FP8-quantised inputs for backward: Transformer Engine does
/// under a recipe; torchao's Float8 linears (framework fsdp) save the bf16 ones and cast again
/// (ExecutionTraits::saves_quantized_inputs).
[[nodiscard]] bool saves_fp8_inputs(const parallel::Training& training) noexcept;

/// Linear weights of one MoE layer on one GPU (the FP8 weight cache's share): the non-expert
/// linears over tp and the E/ep experts over etp.
[[nodiscard]] double moe_layer_linear_params(const model::Model& model, const parallel::Layout& layout);

}  // namespace tetra::costmodel::detail
