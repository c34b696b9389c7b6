// Megatron-LM model FLOPs (`NVIDIA/Megatron-LM: megatron/training/training.py::
// num_floating_point_operations`, master d98e8a6).
#include "tetra/parallel/flops.hpp"

#include <algorithm>

#include "tetra/model/moe.hpp"
#include "tetra/parallel/params.hpp"

namespace tetra::parallel {

using model::Mla;
using model::Model;
using model::is_moe_layer;
using model::moe_layer_count;

namespace {

/// MoE / MLA / MTP form of current Megatron-LM `num_floating_point_operations`
/// (`transformer_flops`): per token, with glu = 3 (SwiGLU) else 2,
///   6·h·[F·glu·L_dense + (f_e·k·glu + f_s·glu)·L_moe]            MLP, routed and shared experts
/// + L_all·attn                                                   attention (GQA or MLA)
/// + 6·mtp·(3h + 2h²)                                             MTP norms and eh_proj
/// + 6·h·V·(mtp + 1)                                              logits (main + MTP heads)
/// MLA: attn = 6·[q_term + r_kv·(h + a(d_nope + d_v) + 1) + h·d_rope + a·d_v·h
///               + s·a·(d_nope + d_rope)/2 + s·a·d_v/2],
///   q_term = r_q·(h + a(d_nope + d_rope) + 1), or h·a(d_nope + d_rope) without q compression.
/// GQA: attn = 6·[h(q + 2kv) + q·s + q·h]. MTP layers count as MoE when the last layer is
/// (`last_layer_is_moe`) and as attention layers. The router GEMM is not counted (as in
/// Megatron-LM).
double moe_step_flops(const Model& m, double s, double B, double V) noexcept {
  const double h = m.hidden;
  const double glu = m.gated_mlp() ? 3.0 : 2.0;
  const double mtp = std::max(m.mtp_layers, 0);
  double moe_layers = moe_layer_count(m);
  double dense_layers = m.layers - moe_layers;
  if (is_moe_layer(m, m.layers - 1)) {
    moe_layers += mtp;
  } else {
    dense_layers += mtp;
  }
  const double all_layers = m.layers + mtp;
  double mlp = m.ffn_hidden * glu * dense_layers;
  if (m.moe) {
    mlp += (static_cast<double>(m.moe->moe_ffn_hidden) * m.moe->experts_per_token * glu +
            static_cast<double>(m.moe->shared_width()) * glu) *
           moe_layers;
  }
  double attn = 0.0;
  const double a = m.heads;
  if (m.mla) {
    const Mla& l = *m.mla;
    const double qk = l.qk_head_dim();
    const double q_term = l.q_lora_rank > 0 ? l.q_lora_rank * (h + a * qk + 1.0) : h * a * qk;
    attn = 6.0 * (q_term + l.kv_lora_rank * (h + a * (l.qk_nope_head_dim + l.v_head_dim) + 1.0) +
                  h * l.qk_rope_head_dim + a * l.v_head_dim * h + s * a * qk / 2.0 +
                  s * a * l.v_head_dim / 2.0);
  } else {
    const double q = static_cast<double>(m.head_dim()) * m.heads;
    const double kv = static_cast<double>(m.head_dim()) * (m.kv_heads > 0 ? m.kv_heads : m.heads);
    attn = 6.0 * (h * (q + 2.0 * kv) + q * s + q * h);
  }
  const double per_token = 6.0 * h * mlp + attn * all_layers + 6.0 * mtp * (3.0 * h + 2.0 * h * h) +
                           6.0 * h * V * (mtp + 1.0);
  return B * s * per_token;
}

}  // namespace

double megatron_step_flops(const Model& m, long long seq_len, long long global_batch,
                           long long vocab) noexcept {
  if (m.moe || m.mla || m.mtp_layers > 0) {
    return moe_step_flops(m, static_cast<double>(seq_len), static_cast<double>(global_batch),
                          static_cast<double>(vocab > 0 ? vocab : m.vocab));
  }
  const double s = static_cast<double>(seq_len);
  const double B = static_cast<double>(global_batch);
  const double T = B * s;
  const double h = m.hidden;
  const double F = m.ffn_hidden;
  const double L = m.layers;
  const double V = static_cast<double>(vocab > 0 ? vocab : m.vocab);
  const double q = static_cast<double>(m.head_dim()) * m.heads;
  const double kv = static_cast<double>(m.head_dim()) * (m.kv_heads > 0 ? m.kv_heads : m.heads);
  const double E = m.gated_mlp() ? 3.0 : 2.0;
  // T·[6·h·F·E·L + 6·L·(h·(q + 2·kv) + q·h) + 6·h·V] + B·s²·L·6·q
  return T * (6.0 * h * F * E * L + 6.0 * L * (h * (q + 2.0 * kv) + q * h) + 6.0 * h * V) +
         B * s * s * L * 6.0 * q;
}

double spec_step_flops(const Model& model, const Training& training, const Layout& layout) noexcept {
  return megatron_step_flops(model, training.seq_len, training.global_batch, padded_vocab(model, layout.tp));
}

double megatron_r060_step_flops(const Model& m, long long seq_len, long long global_batch,
                                long long vocab) noexcept {
  const double s = static_cast<double>(seq_len);
  const double B = static_cast<double>(global_batch);
  const double h = m.hidden;
  const double F = m.ffn_hidden;
  const double L = m.layers;
  const double V = static_cast<double>(vocab > 0 ? vocab : m.vocab);
  const double groups = m.kv_heads > 0 ? m.kv_heads : m.heads;
  const double glu = m.gated_mlp() ? 1.5 : 1.0;
  // 12·B·s·L·h²·(1 + (F/h)·glu + n_groups/n_heads + s/h + V/(2·L·h))   (core_r0.6.0)
  return 12.0 * B * s * L * h * h *
         (1.0 + (F / h) * glu + groups / m.heads + s / h + V / (2.0 * L * h));
}

double megatron_flops_per_token(const Model& m, long long seq_len, long long vocab) noexcept {
  return seq_len > 0 ? megatron_step_flops(m, seq_len, 1, vocab) / static_cast<double>(seq_len) : 0;
}

}  // namespace tetra::parallel
