#pragma once
/// Layout enumeration for `tetrasim search` (the [search] table of docs/scenario-format.md): the
/// cartesian product of the [search] lists, each candidate checked by parallel::check_layout,
/// the rejections counted per rule.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tetra/parallel/layout.hpp"
#include "tetra/parallel/params.hpp"
#include "tetra/model/model.hpp"
#include "tetra/search/space.hpp"

namespace tetra::search {

/// Layers of the first and the last pipeline stage of an uneven split (parallel::UnevenSplit).
using UnevenSplit = parallel::UnevenSplit;

/// Megatron-style uneven split of `layers` over `pp` ranks: parallel::uneven_split (Llama 3
/// "reduce one Transformer layer each from the first and the last stages", arXiv 2407.21783
/// §3.3.2). Example: 126 layers, pp 16 → k = 8, rest 126 − 14·8 = 14 → first 7, last 7.
using parallel::uneven_split;

/// The same per model chunk with vp chunks per rank: parallel::uneven_chunk_split.
using parallel::uneven_chunk_split;

/// The pipeline sizes to try: the list of the space, or with `pp_divisors` every divisor of
/// the layer count and every power of two an uneven first / last split serves (ascending).
[[nodiscard]] std::vector<int> pp_values(const SearchSpace& space, int layers);

/// The most candidates a search space may span (the product of its list lengths): refused
/// above, before any is drawn.
inline constexpr double kMaxCandidates = 1e7;

/// Outcome of the enumeration.
struct Enumeration {
  std::vector<parallel::Layout> valid;       ///< candidates that pass every layout rule, in
                                          ///< enumeration order
  std::uint64_t enumerated = 0;           ///< candidates drawn from the space
  std::uint64_t invalid = 0;              ///< enumerated − valid
  std::map<std::string, std::uint64_t> invalid_by_rule;  ///< first broken rule → count
};

/// Enumerates tp × cp × pp × vp × mbs × recompute × schedule × sp (sp only where tp > 1; at
/// tp = 1 a single sp = false candidate). dp is derived as world/(tp·cp·pp) (a size that does
/// not divide the world is rejected by rule "world-size"). Where pp·vp does not divide the
/// layers the candidate takes uneven_chunk_split(layers, pp, vp) (uneven_split() at vp = 1:
/// the end ranks, or with vp > 1 the very first and last chunk, hold what the common chunk
/// size leaves); other fields (rank_order) come from `base`.
/// Each candidate is checked with parallel::check_layout, then (with `nvlink_domain` > 0) for TP /
/// CP groups straddling NVLink domains (costmodel::domain_issue, rule "straddles-domain"), and
/// rejected under the rule it breaks first. Complexity: one check per candidate, O(product of
/// the list sizes).
[[nodiscard]] Enumeration enumerate_layouts(const model::Model& model, long long world,
                                            const parallel::Training& training,
                                            const SearchSpace& space,
                                            const parallel::Layout& base = {}, int nvlink_domain = 0);

/// A total order key of a layout for deterministic tie-breaks ("tp=8,cp=1,pp=16,...").
[[nodiscard]] std::string layout_key(const parallel::Layout& layout);

}  // namespace tetra::search
