#pragma once
/// The shape of a Llama-family (or GPT-style) decoder-only transformer.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tetra::llama {

/// llama: RMSNorm, SwiGLU MLP, RoPE, no biases.
/// gpt: LayerNorm with bias, GeLU MLP, learned position embeddings, biased linears.
enum class Arch { llama, gpt };

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

  [[nodiscard]] int head_dim() const noexcept { return heads > 0 ? hidden / heads : 0; }
  [[nodiscard]] bool gated_mlp() const noexcept { return arch == Arch::llama; }
};

/// "llama" or "gpt" (the SPEC's [model] arch values).
[[nodiscard]] const char* to_string(Arch arch) noexcept;
/// Inverse of to_string; nothing for an unknown name.
[[nodiscard]] std::optional<Arch> parse_arch(std::string_view name) noexcept;

}  // namespace tetra::llama
