#pragma once
/// The shape of a Llama-family (or GPT-style) decoder-only transformer.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tetra/model/moe.hpp"

namespace tetra::model {

/// llama: RMSNorm, SwiGLU MLP, RoPE, no biases.
/// gpt: LayerNorm with bias, GeLU MLP, learned position embeddings, biased linears.
/// gpt_oss: a llama block with biased linears (QKV, output projection, router and experts),
/// a learned softmax sink per head and YaRN RoPE (OpenAI gpt-oss; Megatron-Core runs it with
/// `add_bias_linear`, `softmax_type = "learnable"`, `position_embedding_type = "yarn"`).
enum class Arch { llama, gpt, gpt_oss };

struct Model {
  std::string name;              ///< preset name or "custom"
  Arch arch = Arch::llama;
  int layers = 0;
  int hidden = 0;
  int ffn_hidden = 0;
  int heads = 0;
  int kv_heads = 0;              ///< query groups (GQA); == heads without GQA
  int vocab = 0;                 ///< tokenizer vocabulary before padding
  bool tied_embeddings = false;
  /// Explicit attention head width (HF `head_dim`); 0 = hidden / heads. Qwen3 sets 128 with
  /// hidden 2048 and 32 heads, so q = heads * head_dim differs from hidden.
  int head_dim_override = 0;
  /// An RMSNorm over every query and every key head before RoPE (Qwen3's `q_norm` / `k_norm`;
  /// Megatron-Core `qk_layernorm`, its `q_layernorm` / `k_layernorm` modules). Standard
  /// attention only: MLA normalises its latents instead, and the loader never sets both.
  bool qk_norm = false;
  /// Routed experts (moe.hpp); nothing on a dense model.
  std::optional<Moe> moe;
  /// Multi-head latent attention in place of GQA (moe.hpp); nothing for standard attention.
  std::optional<Mla> mla;
  /// Multi-token-prediction modules after the last layer (DeepSeek-V3
  /// `num_nextn_predict_layers`): each is one more transformer layer (MoE when the model is)
  /// with two RMSNorms and an h x 2h projection, sharing the embedding and the LM head.
  int mtp_layers = 0;

  [[nodiscard]] int head_dim() const noexcept {
    if (head_dim_override > 0) return head_dim_override;
    return heads > 0 ? hidden / heads : 0;
  }
  [[nodiscard]] bool is_moe() const noexcept { return moe.has_value(); }
  [[nodiscard]] bool gated_mlp() const noexcept { return arch != Arch::gpt; }
  /// RMSNorm and RoPE (llama and gpt-oss) rather than LayerNorm and learned positions (gpt).
  [[nodiscard]] bool llama_block() const noexcept { return arch != Arch::gpt; }
};

/// "llama", "gpt" or "gpt-oss" (the scenario's [model] arch values).
[[nodiscard]] const char* to_string(Arch arch) noexcept;
/// Inverse of to_string; nothing for an unknown name.
[[nodiscard]] std::optional<Arch> parse_arch(std::string_view name) noexcept;

}  // namespace tetra::model
