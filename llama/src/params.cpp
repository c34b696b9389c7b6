// Parameter counts: reference/memory.md section 2 (F24-code, N21 section 5.1, Megatron-LM).
#include "tetra/llama/params.hpp"

#include <algorithm>

namespace tetra::llama {

namespace {

using I = std::int64_t;

/// Weights of one layer split by how tensor parallelism treats them.
struct LayerParts {
  I sharded = 0;     ///< column/row-parallel weights and column-parallel biases (divided by t)
  I replicated = 0;  ///< norm weights/biases and row-parallel output biases (full on every rank)
};

LayerParts layer_parts(const Model& m) noexcept {
  const I h = m.hidden;
  const I f = m.ffn_hidden;
  const I kv = static_cast<I>(m.kv_heads) * m.head_dim();  // k * d_h
  LayerParts p;
  // Attention: Q (h x h), K and V (h x k*d_h each), O (h x h) (memory.md 2.1).
  p.sharded = 2 * h * h + 2 * h * kv;
  if (m.arch == Arch::llama) {
    // SwiGLU: gate, up, down = 3 h h_ffn; two RMSNorm weight vectors 2h (memory.md 2.1).
    p.sharded += 3 * h * f;
    p.replicated = 2 * h;
  } else {
    // GeLU MLP: 2 h h_ffn. Biases: QKV (h + 2 k d_h) and fc1 (h_ffn) are column-parallel
    // (sharded); O and fc2 biases (h each) belong to row-parallel layers (replicated); two
    // LayerNorms with weight and bias: 4h. Total 4h^2 + 2 h h_ffn + 9h + h_ffn, i.e.
    // 12h^2 + 13h for MHA with h_ffn = 4h (memory.md 2.1, N21 section 5.1).
    p.sharded += 2 * h * f + (h + 2 * kv) + f;
    p.replicated = 2 * h + 4 * h;
  }
  return p;
}

/// Final norm: RMSNorm weight (h) for llama, LayerNorm weight and bias (2h) for gpt.
I final_norm(const Model& m) noexcept { return m.arch == Arch::llama ? m.hidden : 2LL * m.hidden; }

I ceil_div(I a, I b) noexcept { return b > 0 ? (a + b - 1) / b : a; }

}  // namespace

std::int64_t params_per_layer(const Model& m) noexcept {
  const LayerParts p = layer_parts(m);
  return p.sharded + p.replicated;
}

std::int64_t total_params(const Model& m, int seq_len) noexcept {
  const I h = m.hidden;
  const I v = m.vocab;
  I total = static_cast<I>(m.layers) * params_per_layer(m) + h * v + final_norm(m);
  if (!m.tied_embeddings) total += h * v;                            // LM head
  if (m.arch == Arch::gpt) total += static_cast<I>(std::max(seq_len, 0)) * h;  // positions
  return total;
}

std::int64_t padded_vocab(const Model& m, int tp) noexcept {
  // Megatron `_vocab_size_with_padding`: multiple of make_vocab_size_divisible_by (128) * tp
  // (memory.md 2.3, megatron/training/tokenizer/tokenizer.py).
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
  const LayerParts parts = layer_parts(m);
  // One layer's shard on one GPU: W_layer = sharded/t + replicated (memory.md 2.2).
  const I w_layer = ceil_div(parts.sharded, t) + parts.replicated;
  // Embedding (or LM head) shard: h * V_padded / t (vocab-parallel, memory.md 2.2 / 2.3).
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
    I p = static_cast<I>(s.layers) * w_layer;
    if (s.has_embedding) {
      p += embed;
      // Learned positions (s x h) sit with the word embedding; Megatron does not split them
      // over TP (N21 section 5.1).
      if (m.arch == Arch::gpt) p += static_cast<I>(std::max(seq_len, 0)) * h;
    }
    if (s.has_head) {
      p += final_norm(m);
      // Untied: the LM head. Tied with pp > 1: the last stage keeps its own copy of the
      // embedding for the output layer (memory.md 2.2). Tied with pp == 1: one shared copy.
      if (!m.tied_embeddings || pp > 1) p += embed;
    }
    s.params = p;
    out.push_back(s);
  }
  return out;
}

}  // namespace tetra::llama
