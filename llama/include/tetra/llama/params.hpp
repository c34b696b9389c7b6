#pragma once
/// Exact parameter counts, per layer, per model and per pipeline stage on one GPU
/// (reference/memory.md section 2).

#include <cstdint>
#include <optional>
#include <vector>

#include "tetra/llama/layout.hpp"
#include "tetra/llama/model.hpp"

namespace tetra::llama {

/// Parameters of one transformer layer, unsharded.
/// llama: 2h^2(1 + k/a) + 3 h h_ffn + 2h;  gpt: 4h^2 + 2 h h_ffn + 9h + h_ffn (biases, 2 LayerNorms).
[[nodiscard]] std::int64_t params_per_layer(const Model& m) noexcept;

/// Whole-model parameters: layers + embedding (+ LM head when untied) + final norm
/// (+ learned positions of `seq_len` rows for gpt). Unpadded vocabulary.
[[nodiscard]] std::int64_t total_params(const Model& m, int seq_len) noexcept;

/// Vocabulary padded as Megatron does: up to a multiple of 128 * tp.
[[nodiscard]] std::int64_t padded_vocab(const Model& m, int tp) noexcept;

/// Layers on each pipeline rank (size pp). Even split, or the uneven first/last counts of the
/// layout with the remaining layers spread evenly over the middle ranks.
/// Precondition: the layout was validated (scenarios checks divisibility).
[[nodiscard]] std::vector<int> stage_layers(const Model& m, const Layout& layout);

/// Layers of the first and the last pipeline rank of an uneven split.
struct UnevenSplit {
  int first_stage_layers = 0;
  int last_stage_layers = 0;
};

/// The uneven split used where `pp` does not divide `layers` (Megatron-LM
/// `--decoder-first-pipeline-num-layers` / `--decoder-last-pipeline-num-layers`; Llama 3
/// "reduce one Transformer layer each from the first and the last stages", arXiv 2407.21783
/// section 3.3.2): the pp-2 middle ranks hold k = ceil(layers/pp) layers each, the first and
/// the last rank share the rest, the first taking the smaller half. Nothing when pp divides
/// layers, pp < 2, or the rest leaves no layer on one end.
/// Example: 126 layers, pp 16 -> k = 8, rest 126 - 14*8 = 14 -> first 7, last 7.
[[nodiscard]] std::optional<UnevenSplit> uneven_split(int layers, int pp) noexcept;

/// What pipeline rank `stage` holds on one GPU.
struct StageParams {
  int stage = 0;
  int layers = 0;                 ///< transformer layers on this rank (all its chunks)
  bool has_embedding = false;     ///< input embedding (first rank)
  bool has_head = false;          ///< final norm + LM head (last rank)
  std::int64_t params = 0;        ///< parameters held on one GPU (TP shard), padded vocab
};

/// Parameters held by one GPU of each pipeline rank, explicit per-stage form of
/// reference/memory.md section 2.2 (norm weights replicated over TP, padded vocabulary).
[[nodiscard]] std::vector<StageParams> stage_params(const Model& m, const Layout& layout,
                                                    int seq_len);

}  // namespace tetra::llama
