// Parameter counts. Sources: F24-code = the estimator of Fujii et al. 2024 (arXiv 2411.06465),
// `okoge-kaz/Megatron-LM: tools/memory_estimate/memory_consumption_estimator.py` (branch
// v0.8.0-abci, 85347a6b) with the norm-term correction of NVIDIA/Megatron-LM PR #1345;
// N21 = Narayanan et al. 2021, arXiv 2104.04473; Megatron-LM.
#include "tetra/parallel/params.hpp"

#include <algorithm>

#include "tetra/model/moe.hpp"

namespace tetra::parallel {

using model::Arch;
using model::Mla;
using model::Model;
using model::Moe;
using model::is_moe_layer;
using model::moe_layer_count;
using model::moe_layers_in;

namespace {

using I = std::int64_t;

/// Weights of one layer split by how parallelism treats them.
struct LayerParts {
  I sharded = 0;     ///< column/row-parallel weights and column-parallel biases (divided by t)
  I replicated = 0;  ///< norm weights/biases and row-parallel output biases (full on every rank)
  I experts = 0;     ///< routed experts, all of them (divided by ep x etp)
};

/// Attention weights. GQA: Q (h x q), K and V (h x k*d_h each), O (q x h), q = a*d_h (= h
/// unless head_dim is explicit) (F24-code). MLA (DeepSeek-V3 `modeling_deepseek.py`
/// DeepseekV3Attention; Megatron-Core `multi_latent_attention.py`): the down projections
/// q_a (h x r_q) and kv_a (h x (r_kv + d_rope)) and the two latent RMSNorms (r_q, r_kv) are
/// replicated over TP (Megatron-Core builds the down projections "duplicated"); the up
/// projections q_b (r_q x a(d_nope + d_rope)), kv_b (r_kv x a(d_nope + d_v)) and O (a d_v x h)
/// are split over TP.
LayerParts attention_parts(const Model& m) noexcept {
  const I h = m.hidden;
  LayerParts p;
  if (m.mla) {
    const Mla& a = *m.mla;
    const I heads = m.heads;
    const I qk = a.qk_head_dim();
    if (a.q_lora_rank > 0) {
      p.replicated += h * a.q_lora_rank + a.q_lora_rank;
      p.sharded += static_cast<I>(a.q_lora_rank) * heads * qk;
    } else {
      p.sharded += h * heads * qk;
    }
    p.replicated += h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank;
    p.sharded += static_cast<I>(a.kv_lora_rank) * heads * (a.qk_nope_head_dim + a.v_head_dim);
    p.sharded += heads * a.v_head_dim * h;
    return p;
  }
  const I q = static_cast<I>(m.heads) * m.head_dim();
  const I kv = static_cast<I>(m.kv_heads) * m.head_dim();  // k * d_h
  p.sharded = 2 * h * q + 2 * h * kv;
  if (m.arch == Arch::gpt_oss) {
    // gpt-oss (Hugging Face `modeling_gpt_oss.py` GptOssAttention): q, k, v and o biases and
    // one learned sink per head; Megatron-Core keeps the QKV bias and the sinks
    // (`softmax_offset`) with the column-parallel heads and the o bias with the row-parallel
    // output, replicated.
    p.sharded += q + 2 * kv + m.heads;
    p.replicated += h;
  }
  // Per-head Q and K norms (Model::qk_norm): one weight of d_h each, shared by the heads
  // (transformers `Qwen3RMSNorm(head_dim)`), replicated over TP.
  if (m.qk_norm) p.replicated += 2LL * m.head_dim();
  return p;
}

/// Bias elements of one routed expert: gpt-oss's gate-up (2 f_e) and down (h) projections
/// (`modeling_gpt_oss.py` GptOssExperts gate_up_proj_bias, down_proj_bias); none otherwise.
I expert_bias(const Model& m) noexcept {
  return m.arch == Arch::gpt_oss && m.moe ? 2LL * m.moe->moe_ffn_hidden + m.hidden : 0;
}

LayerParts layer_parts(const Model& m, bool moe_layer) noexcept {
  const I h = m.hidden;
  const I f = m.ffn_hidden;
  const I kv = static_cast<I>(m.kv_heads) * m.head_dim();  // k * d_h
  LayerParts p = attention_parts(m);
  const I glu = m.gated_mlp() ? 3 : 2;
  if (moe_layer) {
    // MoE block (Megatron-Core `moe_layer.py`): router h x E (TopKRouter, replicated over TP),
    // E routed experts of glu * h * f_e each (split over EP, and over ETP inside an expert),
    // the shared-expert MLP of glu * h * f_s (split over TP); two RMSNorms (2h).
    const Moe& e = *m.moe;
    p.replicated += h * e.num_experts + 2 * h;
    if (m.arch == Arch::gpt_oss) p.replicated += e.num_experts;  // the router's bias
    p.sharded += glu * h * e.shared_width();
    p.experts = static_cast<I>(e.num_experts) * (glu * h * e.moe_ffn_hidden + expert_bias(m));
    return p;
  }
  if (m.arch == Arch::gpt_oss) {
    // A dense gpt-oss MLP (none in the released models): the gated projections and their
    // biases (2 h_ffn column-parallel, h row-parallel), two RMSNorms.
    p.sharded += 3 * h * f + 2 * f;
    p.replicated += 3 * h;
  } else if (m.arch == Arch::llama) {
    // SwiGLU: gate, up, down = 3 h h_ffn; two RMSNorm weight vectors 2h (F24-code).
    p.sharded += 3 * h * f;
    p.replicated += 2 * h;
  } else {
    // GeLU MLP: 2 h h_ffn. Biases: QKV (h + 2 k d_h) and fc1 (h_ffn) are column-parallel
    // (sharded); O and fc2 biases (h each) belong to row-parallel layers (replicated); two
    // LayerNorms with weight and bias: 4h. Total 4h^2 + 2 h h_ffn + 9h + h_ffn, i.e.
    // 12h^2 + 13h for MHA with h_ffn = 4h (N21 section 5.1).
    p.sharded += 2 * h * f + (h + 2 * kv) + f;
    p.replicated += 2 * h + 4 * h;
  }
  return p;
}

/// One multi-token-prediction module without its transformer layer (Megatron-Core
/// `multi_token_prediction.py` MultiTokenPredictionLayer; DeepSeek-V3 report section 2.2):
/// enorm and hnorm (2h, replicated) and the h x 2h eh_proj (split over TP); its final norm is
/// counted with final_norm().
LayerParts mtp_extra(const Model& m) noexcept {
  LayerParts p;
  p.replicated = 2LL * m.hidden;
  p.sharded = 2LL * m.hidden * m.hidden;
  return p;
}

/// Whether the transformer layer of an MTP module has experts: as the model's last layer
/// (Megatron-Core counts it so in `num_floating_point_operations`, `last_layer_is_moe`).
bool mtp_is_moe(const Model& m) noexcept { return is_moe_layer(m, m.layers - 1); }

/// Final norm: RMSNorm weight (h) for llama and gpt-oss, LayerNorm weight and bias (2h) for gpt.
I final_norm(const Model& m) noexcept { return m.llama_block() ? m.hidden : 2LL * m.hidden; }

I ceil_div(I a, I b) noexcept { return b > 0 ? (a + b - 1) / b : a; }

}  // namespace

std::int64_t params_per_layer(const Model& m) noexcept {
  const LayerParts p = layer_parts(m, false);
  return p.sharded + p.replicated;
}

std::int64_t layer_params(const Model& m, int layer) noexcept {
  const LayerParts p = layer_parts(m, is_moe_layer(m, layer));
  return p.sharded + p.replicated + p.experts;
}

std::int64_t mtp_params(const Model& m) noexcept {
  if (m.mtp_layers <= 0) return 0;
  const LayerParts layer = layer_parts(m, mtp_is_moe(m));
  const LayerParts extra = mtp_extra(m);
  const I one = layer.sharded + layer.replicated + layer.experts + extra.sharded +
                extra.replicated + final_norm(m);
  return static_cast<I>(m.mtp_layers) * one;
}

std::int64_t active_params(const Model& m, int seq_len) noexcept {
  I total = total_params(m, seq_len);
  if (!m.moe) return total;
  const I glu = m.gated_mlp() ? 3 : 2;
  const I idle_experts = static_cast<I>(m.moe->num_experts - m.moe->experts_per_token) *
                         (glu * m.hidden * m.moe->moe_ffn_hidden + expert_bias(m));
  const int moe_layers = moe_layer_count(m) + (mtp_is_moe(m) ? std::max(m.mtp_layers, 0) : 0);
  return total - static_cast<I>(moe_layers) * idle_experts;
}

std::int64_t total_params(const Model& m, int seq_len) noexcept {
  const I h = m.hidden;
  const I v = m.vocab;
  I layers = 0;
  if (m.moe) {
    for (int l = 0; l < m.layers; ++l) layers += layer_params(m, l);
  } else {
    layers = static_cast<I>(m.layers) * params_per_layer(m);
  }
  I total = layers + h * v + final_norm(m) + mtp_params(m);
  if (!m.tied_embeddings) total += h * v;                            // LM head
  if (m.arch == Arch::gpt) total += static_cast<I>(std::max(seq_len, 0)) * h;  // positions
  return total;
}

std::int64_t padded_vocab(const Model& m, int tp) noexcept {
  // Megatron `_vocab_size_with_padding`: multiple of make_vocab_size_divisible_by (128) * tp
  // (NVIDIA/Megatron-LM: megatron/training/tokenizer/tokenizer.py).
  const I multiple = 128LL * std::max(tp, 1);
  return ceil_div(m.vocab, multiple) * multiple;
}

std::optional<UnevenSplit> uneven_split(int layers, int pp) noexcept {
  if (pp < 2 || layers < pp || layers % pp == 0) return std::nullopt;
  if (pp == 2) return UnevenSplit{layers / 2, layers - layers / 2};  // no middle ranks
  const int k = (layers + pp - 1) / pp;
  const long long rest = static_cast<long long>(layers) - static_cast<long long>(pp - 2) * k;
  if (rest < 2) return std::nullopt;
  const int first = static_cast<int>(rest / 2);
  return UnevenSplit{first, static_cast<int>(rest) - first};
}

std::optional<UnevenSplit> uneven_chunk_split(int layers, int pp, int vp) noexcept {
  if (vp == 1) return uneven_split(layers, pp);
  if (pp < 2 || vp < 1 || layers < 1) return std::nullopt;
  const long long chunks = static_cast<long long>(pp) * vp;
  if (layers % chunks == 0) return std::nullopt;
  // Every chunk k = ceil(L/(pp vp)); the first and the last chunk share the rest (arXiv
  // 2407.21783 section 3.3.2: the end chunks one layer short, down to embedding/head only).
  const long long k = (layers + chunks - 1) / chunks;
  const long long rest = layers - (chunks - 2) * k;
  if (rest < 0) return std::nullopt;
  const long long first = rest / 2;
  const long long others = static_cast<long long>(vp - 1) * k;
  return UnevenSplit{static_cast<int>(others + first), static_cast<int>(others + rest - first)};
}

std::vector<int> chunk_layers(const Model& m, const Layout& layout) {
  const int p = std::max(layout.pp, 1);
  const int v = std::max(layout.vp, 1);
  std::vector<int> out(static_cast<std::size_t>(p) * v, 0);
  auto at = [&](int r, int c) -> int& { return out[static_cast<std::size_t>(c) * p + r]; };
  if (p == 1) {
    // One rank: its chunks share the layers (extra layers to the earliest chunks).
    for (int c = 0; c < v; ++c) at(0, c) = m.layers / v + (c < m.layers % v ? 1 : 0);
    return out;
  }
  // Ranks with a fixed count (uneven split) and the ranks that share the rest.
  const bool first_fixed = layout.first_stage_layers > 0;
  const bool last_fixed = layout.last_stage_layers > 0;
  int rest = m.layers - (first_fixed ? layout.first_stage_layers : 0) -
             (last_fixed ? layout.last_stage_layers : 0);
  rest = std::max(rest, 0);
  const int shared = p - (first_fixed ? 1 : 0) - (last_fixed ? 1 : 0);
  // Shared ranks: an even spread; a validated layout has no remainder, an unvalidated one
  // gives the extra layers to the earliest shared ranks so the sum stays equal to m.layers.
  int extra = shared > 0 ? rest % shared : 0;
  for (int r = 0; r < p; ++r) {
    if ((r == 0 && first_fixed) || (r == p - 1 && last_fixed)) continue;
    const int lr = rest / shared + (extra > 0 ? 1 : 0);
    if (extra > 0) --extra;
    for (int c = 0; c < v; ++c) at(r, c) = lr / v + (c < lr % v ? 1 : 0);
  }
  // Fixed ends: k layers in each chunk but the outermost one, which takes the rest of the rank.
  const int k = shared > 0 ? (rest / shared) / v
                           : static_cast<int>((static_cast<long long>(m.layers) +
                                               static_cast<long long>(p) * v - 1) /
                                              (static_cast<long long>(p) * v));
  if (first_fixed) {
    for (int c = 1; c < v; ++c) at(0, c) = k;
    at(0, 0) = std::max(layout.first_stage_layers - (v - 1) * k, 0);
  }
  if (last_fixed) {
    for (int c = 0; c + 1 < v; ++c) at(p - 1, c) = k;
    at(p - 1, v - 1) = std::max(layout.last_stage_layers - (v - 1) * k, 0);
  }
  return out;
}

std::vector<int> stage_layers(const Model& m, const Layout& layout) {
  const int pp = std::max(layout.pp, 1);
  std::vector<int> out(static_cast<std::size_t>(pp), 0);
  const std::vector<int> chunks = chunk_layers(m, layout);
  for (std::size_t i = 0; i < chunks.size(); ++i) out[i % out.size()] += chunks[i];
  return out;
}

std::vector<StageParams> stage_params(const Model& m, const Layout& layout, int seq_len) {
  const I t = std::max(layout.tp, 1);
  const I h = m.hidden;
  const LayerParts parts = layer_parts(m, false);
  // One layer's shard on one GPU: W_layer = sharded/t + replicated (F24-code's per-stage form).
  const I w_layer = ceil_div(parts.sharded, t) + parts.replicated;
  // MoE layer on one GPU: the non-expert part over TP, the routed experts over EP x ETP
  // (E/ep experts of glu h f_e / etp each; Megatron-Core `experts.py` TEGroupedMLP).
  const LayerParts moe_parts = m.moe ? layer_parts(m, true) : LayerParts{};
  const I w_moe_dense = ceil_div(moe_parts.sharded, t) + moe_parts.replicated;
  const I w_moe_experts =
      ceil_div(ceil_div(moe_parts.experts, std::max(layout.ep, 1)), std::max(layout.etp, 1));
  std::vector<int> moe_per_rank(static_cast<std::size_t>(std::max(layout.pp, 1)), 0);
  if (m.moe) {
    // Layer indices of every chunk in virtual-stage order (chunk c of rank r is entry c*pp + r).
    const std::vector<int> chunks = chunk_layers(m, layout);
    int first = 0;
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      moe_per_rank[i % moe_per_rank.size()] += moe_layers_in(m, first, chunks[i]);
      first += chunks[i];
    }
  }
  // Embedding (or LM head) shard: h * V_padded / t (vocab-parallel; F24-code, Megatron's
  // `_vocab_size_with_padding`).
  const I embed = h * padded_vocab(m, layout.tp) / t;
  const std::vector<int> layers = stage_layers(m, layout);
  const int pp = static_cast<int>(layers.size());

  std::vector<StageParams> out;
  out.reserve(layers.size());
  for (int r = 0; r < pp; ++r) {
    StageParams s;
    s.stage = r;
    s.layers = layers[static_cast<std::size_t>(r)];
    s.has_embedding = r == 0;
    s.has_head = r == pp - 1;
    s.moe_layers = moe_per_rank[static_cast<std::size_t>(r)];
    I p = static_cast<I>(s.layers - s.moe_layers) * w_layer +
          static_cast<I>(s.moe_layers) * (w_moe_dense + w_moe_experts);
    s.expert_params = static_cast<I>(s.moe_layers) * w_moe_experts;
    if (s.has_embedding) {
      p += embed;
      // Learned positions (s x h) sit with the word embedding; Megatron does not split them
      // over TP (N21 section 5.1).
      if (m.arch == Arch::gpt) p += static_cast<I>(std::max(seq_len, 0)) * h;
    }
    if (s.has_head) {
      p += final_norm(m);
      // Untied: the LM head. Tied with pp > 1: the last stage keeps its own copy of the
      // embedding for the output layer (F24-code). Tied with pp == 1: one shared copy.
      if (!m.tied_embeddings || pp > 1) p += embed;
      // MTP modules sit after the last layer (Megatron-Core places them on the last pipeline
      // stage) and read the input embedding, which that stage then holds too when pp > 1
      // (`GPTModel`: the embedding is built where pre_process or mtp_process).
      if (m.mtp_layers > 0) {
        const bool moe = mtp_is_moe(m);
        const LayerParts lp = layer_parts(m, moe);
        const LayerParts extra = mtp_extra(m);
        const I experts =
            ceil_div(ceil_div(lp.experts, std::max(layout.ep, 1)), std::max(layout.etp, 1));
        const I one = ceil_div(lp.sharded + extra.sharded, t) + lp.replicated + extra.replicated +
                      experts + final_norm(m);
        p += static_cast<I>(m.mtp_layers) * one;
        s.expert_params += static_cast<I>(m.mtp_layers) * experts;
        s.mtp_layers = m.mtp_layers;
        if (pp > 1 && !m.tied_embeddings) p += embed;
      }
    }
    s.params = p;
    out.push_back(s);
  }
  return out;
}

}  // namespace tetra::parallel
