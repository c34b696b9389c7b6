// F24-code's estimator (fujii_reference.hpp) written out for the tests.
#include "fujii_reference.hpp"

#include <algorithm>

#include "tetra/parallel/params.hpp"

namespace tetra::test {

namespace {

/// Parameters of the first stage on one GPU, as theoretical_memory_usage.py (v0.9.0-abci):
/// ((P_layers - h)/p + h V)/t, plus the head when p = 1.
double first_stage_params(const model::Model& model, const parallel::Layout& layout) {
  const int p = std::max(layout.pp, 1);
  const double t = std::max(layout.tp, 1);
  const double h = model.hidden;
  const double vocab = static_cast<double>(parallel::padded_vocab(model, layout.tp));
  const double p_layers =
      static_cast<double>(model.layers) * static_cast<double>(parallel::params_per_layer(model)) + h;
  double phi = ((p_layers - h) / p + h * vocab) / t;
  if (!model.tied_embeddings && p == 1) phi += h * vocab / t + h;
  return phi;
}

/// Weights, gradients and optimizer states in bytes per parameter, as the physics model
/// counts them: fp32 master weights and Adam moments (fp32 gradients copy under fp16).
void set_model_states(double phi, const parallel::Training& training, const parallel::Layout& layout,
                      costmodel::StageMemory& s) {
  const double w = parallel::bytes_of(training.precision);
  const double g = parallel::bytes_of(training.grad_dtype);
  const double moments = 2.0 * parallel::bytes_of(training.adam_moments_dtype);
  double o = moments;
  if (training.precision != parallel::Precision::fp32) {
    o = 4.0 + moments;
    const bool fp16_grads = training.precision == parallel::Precision::fp16 &&
                            training.grad_dtype != parallel::Precision::fp32;
    if (fp16_grads) o += 4.0;
  }
  // ZeRO-1 shards the optimizer states over DP x CP, ZeRO-2 the gradients too, ZeRO-3 all.
  const double shard = static_cast<double>(std::max(layout.dp, 1)) * std::max(layout.cp, 1);
  const int zero = std::clamp(training.zero_stage, 0, 3);
  s.params_bytes = zero >= 3 ? phi * w / shard : phi * w;
  s.grads_bytes = zero >= 2 ? phi * g / shard : phi * g;
  s.optimizer_bytes = zero >= 1 ? phi * o / shard : phi * o;
}

}  // namespace

costmodel::StageMemory fujii_first_stage(const model::Model& model, const parallel::Training& training,
                                         const parallel::Layout& layout) {
  const parallel::StageParams first = parallel::stage_params(model, layout, training.seq_len).front();
  const int p = std::max(layout.pp, 1);
  const double s_local = static_cast<double>(training.seq_len) / std::max(layout.cp, 1);
  const double b = std::max(layout.mbs, 1);
  const double h = model.hidden;
  const double f = model.ffn_hidden;
  const int kv_heads = model.kv_heads > 0 ? model.kv_heads : model.heads;
  const double kv = static_cast<double>(kv_heads) / std::max(model.heads, 1);
  const double t = std::max(layout.tp, 1);
  const double vocab = static_cast<double>(parallel::padded_vocab(model, layout.tp));

  costmodel::StageMemory s;
  s.stage = first.stage;
  s.layers = first.layers;
  set_model_states(first_stage_params(model, layout), training, layout, s);
  // The first stage holds p micro-batches: F24-code never discounts by m.
  s.inflight = p;
  // F24-code's activation formula: s' b h (12 + 4 k/a + 8 h_ffn/h) / t per layer.
  const double layer = s_local * b * h * (12.0 + 4.0 * kv + 8.0 * f / h) / t;
  s.layer_activations_bytes = s.inflight * first.layers * layer;
  // int64 ids times h (upstream Megatron's theoretical_memory_usage.py has no factor h).
  if (first.has_embedding) s.embedding_bytes = 8.0 * s_local * b * h * p / t;
  if (first.has_head && p == 1) s.logits_bytes = 4.0 * s_local * b * (h + vocab) / t;
  s.activations_bytes = s.layer_activations_bytes + s.embedding_bytes + s.logits_bytes;
  s.optimizer_step_bytes = s.params_bytes + s.grads_bytes + s.optimizer_bytes;
  s.allocated_bytes = s.optimizer_step_bytes + s.activations_bytes;
  s.reserved_bytes = s.allocated_bytes;
  return s;
}

}  // namespace tetra::test
