#pragma once
/// Exact parameter counts, per layer, per model and per pipeline stage on one GPU
/// (Fujii et al. 2024, arXiv 2411.06465, estimator `okoge-kaz/Megatron-LM:
/// tools/memory_estimate/memory_consumption_estimator.py`; Narayanan et al. 2021,
/// arXiv 2104.04473 §5.1).

#include <cstdint>
#include <optional>
#include <vector>

#include "tetra/parallel/layout.hpp"
#include "tetra/model/model.hpp"

namespace tetra::parallel {

/// Parameters of one transformer layer, unsharded.
/// llama: 2h^2(1 + k/a) + 3 h h_ffn + 2h;  gpt: 4h^2 + 2 h h_ffn + 9h + h_ffn (biases, 2 LayerNorms).
[[nodiscard]] std::int64_t params_per_layer(const model::Model& m) noexcept;

/// Parameters of transformer layer `layer` (0-based), unsharded: params_per_layer() for a
/// dense layer; for a MoE layer (is_moe_layer) attention + router h*E + all E routed experts
/// (3 h f_e each, SwiGLU) + the shared-expert MLP (3 h f_s) + 2h norms. MLA attention replaces
/// GQA's 2h(q + kv) by q_a + q_b + kv_a + kv_b + O and the two latent norms.
[[nodiscard]] std::int64_t layer_params(const model::Model& m, int layer) noexcept;

/// Parameters of the model's multi-token-prediction modules (mtp_layers of them): each one
/// transformer layer (MoE when the last layer is), enorm + hnorm (2h), eh_proj (2h^2) and a
/// final norm (h); the embedding and the LM head are shared with the main model.
[[nodiscard]] std::int64_t mtp_params(const model::Model& m) noexcept;

/// Whole-model parameters: layers + embedding (+ LM head when untied) + final norm
/// (+ learned positions of `seq_len` rows for gpt) + MTP modules. Unpadded vocabulary.
/// DeepSeek-V3 (mtp_layers = 0): 671,026,404,352.
[[nodiscard]] std::int64_t total_params(const model::Model& m, int seq_len) noexcept;

/// Parameters one token passes through: total_params() less the routed experts it is not
/// sent to, (E - k) experts in every MoE layer (and MTP layer). The router, shared experts,
/// both embeddings and every dense part count. DeepSeek-V3: 37,552,282,624.
[[nodiscard]] std::int64_t active_params(const model::Model& m, int seq_len) noexcept;

/// Vocabulary padded as Megatron does: up to a multiple of 128 * tp.
[[nodiscard]] std::int64_t padded_vocab(const model::Model& m, int tp) noexcept;

/// Layers on each pipeline rank (size pp), all its model chunks together: the sum of
/// chunk_layers() over the chunks of the rank. Even split, or the uneven first/last counts of
/// the layout with the remaining layers spread evenly over the middle ranks.
/// Precondition: the layout was validated (scenarios checks divisibility).
[[nodiscard]] std::vector<int> stage_layers(const model::Model& m, const Layout& layout);

/// Transformer layers of every model chunk, in virtual-stage order: entry c*pp + r is chunk c
/// of pipeline rank r (size pp*vp; chunk 0 of rank 0 also holds the embedding, chunk vp-1 of
/// rank pp-1 the final norm and LM head).
/// Even layouts: layers/(pp*vp) per chunk. Uneven layouts: `first_stage_layers` and
/// `last_stage_layers` count the layers of the first and the last pipeline rank (all their
/// chunks). With vp = 1 that is the rank's one chunk. With vp > 1 every chunk holds the common
/// size k except the very first chunk (chunk 0 of rank 0) and the very last (chunk vp-1 of
/// rank pp-1), which take what the end ranks have left: first_stage_layers - (vp-1)*k and
/// last_stage_layers - (vp-1)*k, possibly 0 (embedding or head only). k is the middle ranks'
/// layers / vp, or ceil(layers/(pp*vp)) when pp = 2 and both ends are fixed.
/// This is Llama 3's interleaved layout: "we reduce one Transformer layer each from the first
/// and the last stages ... the first model chunk on the first stage has only the embedding, and
/// the last model chunk on the last stage has only output projection and loss calculation"
/// (arXiv 2407.21783 section 3.3.2): 126 layers, pp 16, vp 8 -> k = 1, first_stage_layers =
/// last_stage_layers = 7, the first and the last chunk 0 layers (Megatron-LM expresses it with
/// `--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split`, the
/// embedding and the loss each taking one layer slot of the 128).
/// Precondition: the layout was validated; otherwise counts are clamped at 0.
[[nodiscard]] std::vector<int> chunk_layers(const model::Model& m, const Layout& layout);

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

/// The uneven split per model chunk for `vp` chunks per rank (the rule of chunk_layers()):
/// every chunk holds k = ceil(layers/(pp*vp)) layers except the very first and the very last
/// chunk, which share the rest layers - (pp*vp-2)*k (0 <= rest <= 2k), the first taking the
/// smaller half; returned as the layers of the first and the last pipeline rank,
/// (vp-1)*k + end chunk. vp = 1 is uneven_split(). Nothing when pp*vp divides layers, pp < 2,
/// vp < 1 or the rest is negative (too few layers for the chunks).
/// Examples (arXiv 2407.21783 section 3.3.2, 126 layers, pp 16): vp 8 -> k = 1, rest 126 -
/// 126*1 = 0 -> end chunks 0 and 0 -> first 7*1 + 0 = 7, last 7; vp 4 -> k = 2, rest 126 -
/// 62*2 = 2 -> end chunks 1 and 1 -> first 3*2 + 1 = 7, last 7.
[[nodiscard]] std::optional<UnevenSplit> uneven_chunk_split(int layers, int pp, int vp) noexcept;

/// What pipeline rank `stage` holds on one GPU.
struct StageParams {
  int stage = 0;
  int layers = 0;                 ///< transformer layers on this rank (all its chunks)
  bool has_embedding = false;     ///< input embedding (first rank)
  bool has_head = false;          ///< final norm + LM head (last rank)
  std::int64_t params = 0;        ///< parameters held on one GPU (TP shard), padded vocab
  int moe_layers = 0;             ///< of `layers`, those with routed experts
  int mtp_layers = 0;             ///< MTP modules (last rank)
  /// Of `params`, the routed-expert weights on this GPU: E/ep experts, each split over etp.
  /// Their gradients are reduced, and their optimizer states sharded, over the expert
  /// data-parallel group (Layout::edp()), not over dp x cp.
  std::int64_t expert_params = 0;
};

/// Parameters held by one GPU of each pipeline rank, the explicit per-stage form of Fujii et
/// al.'s estimator (`okoge-kaz/Megatron-LM: tools/memory_estimate/
/// memory_consumption_estimator.py`, 85347a6b) with norm weights replicated over TP and the
/// vocabulary padded as Megatron's `_vocab_size_with_padding`.
[[nodiscard]] std::vector<StageParams> stage_params(const model::Model& m, const Layout& layout,
                                                    int seq_len);

}  // namespace tetra::parallel
