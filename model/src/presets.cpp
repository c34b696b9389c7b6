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
// Mixture-of-experts presets: the `config.json` of each model on the Hugging Face Hub, cited
// one by one in the table below (keys as read by model_from_hf_config, hf_config.cpp).
#include "tetra/model/presets.hpp"

#include <array>

namespace tetra::model {

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

/// A MoE model: `ffn` is the dense FFN width (layers without experts), `e` the expert part.
Model make_moe(const char* name, int layers, int hidden, int ffn, int heads, int kv, int vocab,
               int head_dim, Moe e) {
  Model m = make(name, Arch::llama, layers, hidden, ffn, heads, kv, vocab, false);
  if (head_dim * heads != hidden) m.head_dim_override = head_dim;
  m.moe = e;
  return m;
}

/// `m` with an RMSNorm on every query and key head (Model::qk_norm).
Model qk_normed(Model m) {
  m.qk_norm = true;
  return m;
}

Moe experts(int n, int k, int width, int shared, int first_dense, int step, Router router) {
  Moe e;
  e.num_experts = n;
  e.experts_per_token = k;
  e.moe_ffn_hidden = width;
  e.shared_experts = shared;
  e.first_k_dense = first_dense;
  e.interleave_step = step;
  e.router = router;
  return e;
}

Model deepseek_v3() {
  // deepseek-ai/DeepSeek-V3 config.json (DeepSeek-V3 technical report, arXiv 2412.19437,
  // section 4.2): 61 layers, hidden 7168, intermediate_size 18432 (dense layers 0-2),
  // moe_intermediate_size 2048, n_routed_experts 256, num_experts_per_tok 8, n_shared_experts 1,
  // first_k_dense_replace 3, moe_layer_freq 1, scoring_func sigmoid, 128 heads, q_lora_rank 1536,
  // kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128, vocab 129280,
  // untied. num_nextn_predict_layers 1 is left out (mtp_layers = 0): the 671B of the report
  // count the main model only.
  Model m = make_moe("deepseek-v3", 61, 7168, 18432, 128, 128, 129280, 56,
                     experts(256, 8, 2048, 1, 3, 1, Router::sigmoid_topk));
  m.mla = Mla{1536, 512, 128, 64, 128};
  return m;
}

const std::array<Model, 17>& table() {
  constexpr Arch L = Arch::llama;
  static const std::array<Model, 17> models = {{
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
      // meta-llama/Llama-4-Scout-17B-16E config.json, text_config: 48 layers, hidden 5120,
      // 40 heads, 8 KV heads, head_dim 128, intermediate_size 8192 (each expert and the shared
      // expert), intermediate_size_mlp 16384, num_local_experts 16, num_experts_per_tok 1,
      // interleave_moe_layer_step 1, vocab 202048, untied. Sigmoid top-1 router.
      make_moe("llama4-scout", 48, 5120, 16384, 40, 8, 202048, 128,
               experts(16, 1, 8192, 1, 0, 1, Router::sigmoid_topk)),
      // meta-llama/Llama-4-Maverick-17B-128E config.json, text_config: as Scout but
      // num_local_experts 128 and interleave_moe_layer_step 2 (odd layers MoE, even layers a
      // dense 16384-wide MLP).
      make_moe("llama4-maverick", 48, 5120, 16384, 40, 8, 202048, 128,
               experts(128, 1, 8192, 1, 0, 2, Router::sigmoid_topk)),
      // mistralai/Mixtral-8x7B-v0.1 config.json: 32 layers, hidden 4096, intermediate_size
      // 14336 (per expert), 32 heads, 8 KV heads, num_local_experts 8, num_experts_per_tok 2,
      // vocab 32000, untied (arXiv 2401.04088 Table 1).
      make_moe("mixtral-8x7b", 32, 4096, 14336, 32, 8, 32000, 128,
               experts(8, 2, 14336, 0, 0, 1, Router::topk_softmax)),
      // mistralai/Mixtral-8x22B-v0.1 config.json: 56 layers, hidden 6144, intermediate_size
      // 16384, 48 heads, 8 KV heads, 8 experts, top-2, vocab 32000, untied.
      make_moe("mixtral-8x22b", 56, 6144, 16384, 48, 8, 32000, 128,
               experts(8, 2, 16384, 0, 0, 1, Router::topk_softmax)),
      // Qwen/Qwen3-30B-A3B config.json: 48 layers, hidden 2048, 32 heads, 4 KV heads, head_dim
      // 128, moe_intermediate_size 768, num_experts 128, num_experts_per_tok 8,
      // decoder_sparse_step 1, mlp_only_layers [], intermediate_size 6144 (unused), vocab
      // 151936, untied, norm_topk_prob (softmax, then top-k); Qwen3MoeAttention's q_norm and
      // k_norm (transformers `modeling_qwen3_moe.py`).
      qk_normed(make_moe("qwen3-30b-a3b", 48, 2048, 6144, 32, 4, 151936, 128,
                         experts(128, 8, 768, 0, 0, 1, Router::softmax_topk))),
      // Qwen/Qwen3-235B-A22B config.json: 94 layers, hidden 4096, 64 heads, 4 KV heads,
      // head_dim 128, moe_intermediate_size 1536, 128 experts, top-8, intermediate_size 12288
      // (unused), vocab 151936, untied; q_norm and k_norm as Qwen3-30B-A3B.
      qk_normed(make_moe("qwen3-235b-a22b", 94, 4096, 12288, 64, 4, 151936, 128,
                         experts(128, 8, 1536, 0, 0, 1, Router::softmax_topk))),
      deepseek_v3(),
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

}  // namespace tetra::model
