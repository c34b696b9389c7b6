#pragma once
/// Mixture-of-experts (MoE) and multi-head latent attention (MLA) shapes of a model, and the
/// MoE parameter counts, model FLOPs and layer placement built on them.
///
/// Conventions follow Megatron-Core (`megatron/core/transformer/transformer_config.py`:
/// `num_moe_experts`, `moe_router_topk`, `moe_ffn_hidden_size`,
/// `moe_shared_expert_intermediate_size`, `moe_layer_freq`, `q_lora_rank`, `kv_lora_rank`,
/// `qk_head_dim`, `qk_pos_emb_head_dim`, `v_head_dim`) and the Hugging Face configs of the
/// models (DeepSeek-V3, Qwen3-MoE, Mixtral, Llama 4), whose key names the scenario files use.

#include <cstdint>
#include <optional>
#include <string_view>

namespace tetra::model {

struct Model;

/// How a token's router scores are turned into expert weights. The router is one h x E GEMM
/// whatever the variant; the variant changes only small element-wise work.
///  softmax_topk: softmax over all E logits, then the top k (Qwen3-MoE, `norm_topk_prob`;
///                Megatron-Core `moe_router_pre_softmax`).
///  topk_softmax: top k logits, softmax over those k (Mixtral; Megatron-Core's default
///                `moe_router_score_function = "softmax"` without pre-softmax).
///  sigmoid_topk: sigmoid scores, top k, normalised (DeepSeek-V3 with its bias-based
///                load balancing, Llama 4 top-1; Megatron-Core `moe_router_score_function =
///                "sigmoid"`).
enum class Router { softmax_topk, topk_softmax, sigmoid_topk };

/// The expert part of a model. Present on a model with routed experts, absent on a dense one.
struct Moe {
  int num_experts = 0;        ///< routed experts per MoE layer (HF n_routed_experts / num_experts /
                              ///< num_local_experts)
  int experts_per_token = 0;  ///< top-k (HF num_experts_per_tok)
  int moe_ffn_hidden = 0;     ///< FFN width of one routed expert (HF moe_intermediate_size)
  int shared_experts = 0;     ///< shared experts every token passes through (HF n_shared_experts)
  /// FFN width of all shared experts together, run as one MLP (Megatron-Core
  /// `moe_shared_expert_intermediate_size`); 0 means shared_experts * moe_ffn_hidden, which is
  /// how DeepSeek-V3 (`intermediate_size = moe_intermediate_size * n_shared_experts`) and
  /// Llama 4 (one shared expert of `intermediate_size`) build it.
  int shared_ffn_hidden = 0;
  int first_k_dense = 0;      ///< the first k layers keep a dense FFN (HF first_k_dense_replace)
  /// Megatron-Core / DeepSeek `moe_layer_freq`: from first_k_dense on, layer l (0-based) is MoE
  /// when l % moe_layer_freq == 0.
  int moe_layer_freq = 1;
  /// Llama 4 `interleave_moe_layer_step` / Qwen3-MoE `decoder_sparse_step`: layer l is MoE when
  /// (l + 1) % step == 0 (Llama 4 Maverick: step 2, layers 1, 3, 5, ...).
  int interleave_step = 1;
  Router router = Router::softmax_topk;

  /// Width of the shared-expert MLP as run (0 when there is none).
  [[nodiscard]] int shared_width() const noexcept {
    if (shared_experts <= 0 && shared_ffn_hidden <= 0) return 0;
    return shared_ffn_hidden > 0 ? shared_ffn_hidden : shared_experts * moe_ffn_hidden;
  }

  friend bool operator==(const Moe&, const Moe&) = default;
};

/// Multi-head latent attention (DeepSeek-V2/V3, arXiv 2405.04434 section 2.1; Megatron-Core
/// `MLATransformerConfig`). Queries go through a rank-q_lora_rank bottleneck (0 = a plain h x
/// heads*(nope+rope) projection, as DeepSeek-V2-Lite), keys and values through a shared
/// rank-kv_lora_rank latent plus one decoupled RoPE key of qk_rope_head_dim shared by all heads.
struct Mla {
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;

  /// Query / key head width seen by the attention kernel: nope + rope.
  [[nodiscard]] int qk_head_dim() const noexcept { return qk_nope_head_dim + qk_rope_head_dim; }

  friend bool operator==(const Mla&, const Mla&) = default;
};

/// Whether transformer layer `layer` (0-based, 0..layers-1) has routed experts: never on a
/// dense model; otherwise layer >= first_k_dense, layer % moe_layer_freq == 0 and
/// (layer + 1) % interleave_step == 0. DeepSeek-V3: all but layers 0-2; Qwen3-MoE, Mixtral,
/// Llama 4 Scout: all; Llama 4 Maverick: the odd layers.
[[nodiscard]] bool is_moe_layer(const Model& model, int layer) noexcept;

/// MoE layers among layers [first, first + count).
[[nodiscard]] int moe_layers_in(const Model& model, int first, int count) noexcept;

/// MoE layers of the whole model.
[[nodiscard]] int moe_layer_count(const Model& model) noexcept;

/// "softmax_topk" | "topk_softmax" | "sigmoid_topk".
[[nodiscard]] const char* to_string(Router r) noexcept;
[[nodiscard]] std::optional<Router> parse_router(std::string_view name) noexcept;

}  // namespace tetra::model
