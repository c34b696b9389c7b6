// MoE layer placement and router names (moe.hpp). Layer rules: DeepSeek-V3
// `modeling_deepseek.py` (`layer_idx >= first_k_dense_replace and layer_idx % moe_layer_freq
// == 0`), Megatron-Core `moe_layer_freq` (`i % freq == 0`), Llama 4 `Llama4TextConfig`
// (`moe_layers = range(step - 1, layers, step)`), Qwen3-MoE (`(layer_idx + 1) %
// decoder_sparse_step == 0`).
#include "tetra/model/moe.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include "tetra/base/enum_names.hpp"
#include "tetra/model/model.hpp"

namespace tetra::model {

namespace {

constexpr EnumNames<Router, 3> kRouter = {{
    {Router::softmax_topk, "softmax_topk"},
    {Router::topk_softmax, "topk_softmax"},
    {Router::sigmoid_topk, "sigmoid_topk"}}};

}  // namespace

bool is_moe_layer(const Model& model, int layer) noexcept {
  if (!model.moe || layer < 0 || layer >= model.layers) return false;
  const Moe& e = *model.moe;
  const int freq = std::max(e.moe_layer_freq, 1);
  const int step = std::max(e.interleave_step, 1);
  return layer >= e.first_k_dense && layer % freq == 0 && (layer + 1) % step == 0;
}

int moe_layers_in(const Model& model, int first, int count) noexcept {
  if (!model.moe) return 0;
  int n = 0;
  for (int l = std::max(first, 0); l < first + count && l < model.layers; ++l) {
    if (is_moe_layer(model, l)) ++n;
  }
  return n;
}

int moe_layer_count(const Model& model) noexcept { return moe_layers_in(model, 0, model.layers); }

const char* to_string(Router r) noexcept { return spell(kRouter, r); }

std::optional<Router> parse_router(std::string_view name) noexcept { return lookup(kRouter, name); }

}  // namespace tetra::model
