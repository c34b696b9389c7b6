// Built-in model shapes. Llama-family values are the `config.json` files published on the
// Hugging Face Hub (num_hidden_layers, hidden_size, intermediate_size, num_attention_heads,
// num_key_value_heads, vocab_size, tie_word_embeddings):
//   LLaMA-1:      huggyllama/llama-13b, huggyllama/llama-30b, huggyllama/llama-65b
//                 (Touvron et al. 2023, arXiv 2302.13971, Table 2: 40/5120/40, 60/6656/52,
//                 80/8192/64)
//   Llama 2:      meta-llama/Llama-2-7b-hf, Llama-2-13b-hf, Llama-2-70b-hf
//   Llama 3.1:    meta-llama/Llama-3.1-8B, Llama-3.1-70B, Llama-3.1-405B
// GPT-3 175B: Brown et al. 2020, arXiv 2005.14165, Table 2.1 (n_layers 96, d_model 12288,
// n_heads 96, d_head 128, n_ctx 2048), d_ff = 4 d_model (section 2.1, following GPT-2), the
// GPT-2 BPE vocabulary of 50257 tokens, input and output embeddings tied.
#include "tetra/llama/presets.hpp"

#include <array>

namespace tetra::llama {

namespace {

Model make(const char* name, Arch arch, int layers, int hidden, int ffn, int heads, int kv,
           int vocab, bool tied) {
  Model m;
  m.name = name;
  m.arch = arch;
  m.layers = layers;
  m.hidden = hidden;
  m.ffn_hidden = ffn;
  m.heads = heads;
  m.kv_heads = kv;
  m.vocab = vocab;
  m.tied_embeddings = tied;
  return m;
}

const std::array<Model, 10>& table() {
  constexpr Arch L = Arch::llama;
  static const std::array<Model, 10> models = {{
      // huggyllama/llama-13b config.json: 40, 5120, 13824, 40 heads, vocab 32000.
      make("llama1-13b", L, 40, 5120, 13824, 40, 40, 32000, false),
      // huggyllama/llama-30b config.json: 60, 6656, 17920, 52 heads, vocab 32000.
      make("llama1-30b", L, 60, 6656, 17920, 52, 52, 32000, false),
      // huggyllama/llama-65b config.json: 80, 8192, 22016, 64 heads, vocab 32000.
      make("llama1-65b", L, 80, 8192, 22016, 64, 64, 32000, false),
      // meta-llama/Llama-2-7b-hf config.json: 32, 4096, 11008, 32 heads, vocab 32000.
      make("llama2-7b", L, 32, 4096, 11008, 32, 32, 32000, false),
      // meta-llama/Llama-2-13b-hf config.json: 40, 5120, 13824, 40 heads, vocab 32000.
      make("llama2-13b", L, 40, 5120, 13824, 40, 40, 32000, false),
      // meta-llama/Llama-2-70b-hf config.json: 80, 8192, 28672, 64 heads, 8 KV heads.
      make("llama2-70b", L, 80, 8192, 28672, 64, 8, 32000, false),
      // meta-llama/Llama-3.1-8B config.json: 32, 4096, 14336, 32 heads, 8 KV, vocab 128256.
      make("llama3.1-8b", L, 32, 4096, 14336, 32, 8, 128256, false),
      // meta-llama/Llama-3.1-70B config.json: 80, 8192, 28672, 64 heads, 8 KV, vocab 128256.
      make("llama3.1-70b", L, 80, 8192, 28672, 64, 8, 128256, false),
      // meta-llama/Llama-3.1-405B config.json: 126, 16384, 53248, 128 heads, 8 KV, 128256.
      make("llama3.1-405b", L, 126, 16384, 53248, 128, 8, 128256, false),
      // GPT-3 175B (Brown et al. 2020, Table 2.1), tied embeddings.
      make("gpt3-175b", Arch::gpt, 96, 12288, 49152, 96, 96, 50257, true),
  }};
  return models;
}

}  // namespace

std::span<const Model> model_presets() { return table(); }

std::optional<Model> find_model_preset(std::string_view name) {
  for (const auto& m : table()) {
    if (m.name == name) return m;
  }
  return std::nullopt;
}

}  // namespace tetra::llama
