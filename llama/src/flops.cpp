// Megatron-LM model FLOPs (`NVIDIA/Megatron-LM: megatron/training/training.py::
// num_floating_point_operations`, reference/costmodels.md section 4.1).
#include "tetra/llama/flops.hpp"

#include "tetra/llama/params.hpp"

namespace tetra::llama {

double megatron_step_flops(const Model& m, long long seq_len, long long global_batch,
                           long long vocab) noexcept {
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

}  // namespace tetra::llama
