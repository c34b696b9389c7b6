// MoE and MLA memory terms (moe_memory.hpp). Tensor lists follow Megatron-Core's MoE layer
// (`megatron/core/transformer/moe/moe_layer.py`: router -> dispatcher.token_permutation ->
// experts -> dispatcher.token_unpermutation, shared experts beside them) and MLA
// (`megatron/core/transformer/multi_latent_attention.py`). Sizes in bytes, bf16 activations.
#include "moe_memory.hpp"

#include "tetra/parallel/execution.hpp"

#include <algorithm>

#include "tetra/parallel/fp8.hpp"
#include "tetra/model/moe.hpp"
#include "tetra/parallel/params.hpp"

namespace tetra::costmodel::detail {

namespace {

/// Share of the layer's blocks that keep their saved tensors: 1 without recomputation or
/// with a selective one (Megatron's selective recompute touches core attention only), 0 under
/// full recompute (only the layer input stays), the non-checkpointed share under
/// selective_layer.
double kept_share(const parallel::Layout& layout) {
  double kept = 0.0;
  for (const parallel::BlockKind& kind : parallel::block_kinds(layout)) {
    if (kind.recompute != parallel::Recompute::full) kept += kind.share;
  }
  return kept;
}

struct Shapes {
  double tokens = 0;  ///< tokens of one micro-batch on this rank outside the TP region, s'b/nd
  double full = 0;    ///< tokens of one micro-batch inside the TP region, s'b
  double t = 1;
  double gd = 1;      ///< divisor of saved GEMM inputs (t with SP, Megatron keeps the shard)
  double in_bytes = 2;  ///< bytes per element of a saved GEMM input (quantised under FP8)
  bool fused_swiglu = true;
};

Shapes shapes(const parallel::Training& tr, const parallel::Layout& l) {
  Shapes s;
  s.full = static_cast<double>(tr.seq_len) / std::max(l.cp, 1) * std::max(l.mbs, 1);
  s.t = std::max(l.tp, 1);
  const bool sp = l.sp && l.tp > 1;
  const parallel::MemoryHabits x = parallel::memory_habits(tr);
  const bool megatron = x.megatron;
  s.tokens = sp ? s.full / s.t : s.full;
  s.gd = (sp && megatron) ? s.t : 1.0;
  s.in_bytes = saves_fp8_inputs(tr) ? parallel::quantized_bytes_per_element(tr.fp8.recipe) : 2.0;
  s.fused_swiglu = x.fused_swiglu;
  return s;
}

}  // namespace

double expert_pairs_per_rank(const model::Model& m, const parallel::Training& tr,
                             const parallel::Layout& l) noexcept {
  if (!m.moe) return 0.0;
  const Shapes s = shapes(tr, l);
  return s.tokens * m.moe->experts_per_token * std::max(l.etp, 1) * tr.moe_expert_load();
}

MoeLayerMemory moe_layer_memory(const model::Model& m, const parallel::Training& tr,
                                const parallel::Layout& l) {
  MoeLayerMemory out;
  if (!m.moe) return out;
  const model::Moe& e = *m.moe;
  const Shapes s = shapes(tr, l);
  const double h = m.hidden;
  const double fe = static_cast<double>(e.moe_ffn_hidden) / std::max(l.etp, 1);
  const double fs = e.shared_width();
  const double f = m.ffn_hidden;
  const double pairs = expert_pairs_per_rank(m, tr, l);
  const double swiglu = s.fused_swiglu ? 4.0 : 6.0;  // gate + up (+ silu(gate) eager)

  // The dense MLP a layer of this model would save instead (memory.cpp layer_saved_full):
  // its GEMM input and, inside the TP region, the SwiGLU tensors and the FC2 input.
  const double dense_mlp = s.in_bytes * s.full * h / s.gd + (swiglu + s.in_bytes) * s.full * f / s.t;

  // Router (router.py TopKRouter): its GEMM input (the normed hidden states, the SP shard)
  // and the fp32 logits and scores over E experts the softmax / sigmoid and top-k backward
  // read (4 + 4 bytes per token and expert).
  double moe = 2.0 * s.tokens * h + 8.0 * s.tokens * e.num_experts;
  // Shared experts: a dense SwiGLU MLP of width f_s over TP (shared_experts.py).
  if (fs > 0) moe += s.in_bytes * s.full * h / s.gd + (swiglu + s.in_bytes) * s.full * fs / s.t;
  // Routed experts (experts.py TEGroupedMLP): the permuted tokens (fc1 input), the fc1 output
  // (gate and up), the fc2 input, and the fp32 routing probability of every pair. Megatron-Core
  // scales by the probabilities inside the activation, whose fused kernel saves them beside its
  // input, and unpermutes without them (core_v0.13.0, "Memory efficient token permutation":
  // fusions/fused_bias_swiglu.py WeightedSwiGLUFunction, token_dispatcher.py unpermute without
  // probs), so the expert output is no longer kept for the probabilities' gradient.
  out.expert_saved = s.in_bytes * pairs * h + swiglu * pairs * fe + s.in_bytes * pairs * fe +
                     4.0 * pairs;
  moe += out.expert_saved;

  // Megatron-Core recompute_modules (recompute_modules.hpp): "moe_act" frees the experts'
  // activation output, the FC2 input in whatever form FC2 saved it; "layernorm" the pre-MLP
  // norm output the router saved; "shared_experts" the shared MLP's tensors but its input;
  // "moe" keeps only the block's input. The dense MLP this layer replaces loses under "mlp"
  // what a dense layer's does (memory.cpp dense_module_savings), so that delta keeps its input.
  using parallel::RecomputeModule;
  if (parallel::recomputes(l, RecomputeModule::moe)) {
    moe = 2.0 * s.tokens * h;
    out.expert_saved = 0.0;
  } else {
    if (parallel::recomputes(l, RecomputeModule::moe_act)) {
      const double act_out = s.in_bytes * pairs * fe;
      moe -= act_out;
      out.expert_saved -= act_out;
    }
    if (parallel::recomputes(l, RecomputeModule::layernorm)) moe -= 2.0 * s.tokens * h;
    if (parallel::recomputes(l, RecomputeModule::shared_experts) && fs > 0) {
      moe -= (swiglu + s.in_bytes) * s.full * fs / s.t;
    }
  }
  // The dense MLP's share of what the dense layer terms count (memory.cpp layer_saved_full,
  // dense_module_savings): its FC1 input stays unless "layernorm" freed it (bf16 only: under
  // Transformer Engine's FP8 the linear keeps its own quantised copy), and "mlp" keeps nothing
  // else.
  const double fc1_input = s.in_bytes * s.full * h / s.gd;
  double dense_kept = parallel::recomputes(l, RecomputeModule::mlp) ? fc1_input : dense_mlp;
  if (parallel::recomputes(l, RecomputeModule::layernorm) && !saves_fp8_inputs(tr)) dense_kept -= fc1_input;
  const double kept = kept_share(l);
  out.saved_delta = kept * (moe - dense_kept);
  out.expert_saved *= kept;

  // While one MoE layer runs: the all-to-all send and receive buffers of the permuted tokens
  // (the local tokens x k out, the rank's pairs in; the combine mirrors them), and in backward
  // the gradients of the fc1 output (2 f_e) and of the activation (f_e), bf16.
  const double sent = s.tokens * e.experts_per_token;
  out.transient = 2.0 * h * (sent + pairs) + 2.0 * 3.0 * pairs * fe;
  return out;
}

double attention_saved_delta(const model::Model& m, const parallel::Training& tr, const parallel::Layout& l) {
  const Shapes s = shapes(tr, l);
  const double h = m.hidden;
  const double a = std::max(m.heads, 1);
  const double kv_share = static_cast<double>(m.kv_heads > 0 ? m.kv_heads : m.heads) / a;
  // What memory.cpp counts inside the TP region per token: Q (2h), K and V (4h k/a), the
  // attention output (2h), all with q = h.
  const double gqa_h = (2.0 + 4.0 * kv_share + 2.0) * h;
  double delta = 0.0;
  if (m.mla) {
    const model::Mla& q = *m.mla;
    // Latents on the SP shard: the q and kv down-projection outputs saved by their RMSNorms
    // (r_q, r_kv + d_rope), and the normed latents saved by the up projections (r_q, r_kv).
    double latent = 2.0 * (q.kv_lora_rank + q.qk_rope_head_dim) * s.tokens +
                    2.0 * q.kv_lora_rank * s.full / s.gd;
    if (q.q_lora_rank > 0) latent += 2.0 * q.q_lora_rank * (s.tokens + s.full / s.gd);
    // Inside the TP region: Q and K of a(d_nope + d_rope), V and the attention output of a d_v.
    double inner = 2.0 * a * (2.0 * q.qk_head_dim() + 2.0 * q.v_head_dim) * s.full / s.t;
    // "mla_up_proj" frees the up projections' outputs, Q, K and V, refilled before the core
    // attention's backward (CheckpointWithoutOutput in multi_latent_attention.py).
    if (parallel::recomputes(l, parallel::RecomputeModule::mla_up_proj)) {
      inner -= 2.0 * a * (2.0 * q.qk_head_dim() + q.v_head_dim) * s.full / s.t;
    }
    delta = latent + inner - gqa_h * s.full / s.t;
  } else {
    if (m.head_dim_override > 0) {
      const double width = static_cast<double>(m.head_dim()) * a;  // q = a d_h
      delta = (2.0 + 4.0 * kv_share + 2.0) * (width - h) * s.full / s.t;
    }
    if (m.qk_norm) {
      // The per-head Q and K norms (Model::qk_norm) save their bf16 inputs, the query's
      // reshaped copy and the key's contiguous copy, and one fp32 reciprocal RMS per head and
      // token (Transformer Engine `pytorch/ops/basic/rmsnorm.py`: save_for_backward(x, rstdevs)).
      const double heads = a * (1.0 + kv_share);
      delta += (2.0 * m.head_dim() + 4.0) * heads * s.full / s.t;
    }
  }
  // Selective recompute drops only the s^2 terms and full recompute everything.
  return kept_share(l) * delta;
}

double moe_layer_linear_params(const model::Model& m, const parallel::Layout& l) {
  if (!m.moe) return 0.0;
  const model::Moe& e = *m.moe;
  int layer = 0;
  while (layer < m.layers && !model::is_moe_layer(m, layer)) ++layer;
  const double glu = m.gated_mlp() ? 3.0 : 2.0;
  const double experts = static_cast<double>(e.num_experts) * glu * m.hidden * e.moe_ffn_hidden;
  // Everything but the experts, the router (h E) and the two norms (2h), over TP.
  const double dense = static_cast<double>(parallel::layer_params(m, layer)) - experts -
                       static_cast<double>(m.hidden) * e.num_experts - 2.0 * m.hidden;
  return dense / std::max(l.tp, 1) + experts / (static_cast<double>(std::max(l.ep, 1)) * std::max(l.etp, 1));
}

}  // namespace tetra::costmodel::detail
