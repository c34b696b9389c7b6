#pragma once
/// Where the ranks of a parallel group lie on the nodes (NVLink domains) of a cluster, from the
/// layout's rank order; which link class a collective is priced on follows from it.

#include <optional>

#include "tetra/ops/ops.hpp"
#include "tetra/parallel/layout.hpp"
#include "tetra/parallel/validate.hpp"

namespace tetra::costmodel {

/// Pods of an oversubscribed fabric (hw::InterNode pod_gpus, oversubscription): `gpus`
/// consecutive ranks under full bisection bandwidth; 0 = one pod.
struct Pods {
  long long gpus = 0;
  double oversubscription = 1.0;
};

/// How a group of ranks lies on the nodes (from the layout's rank_order).
struct GroupPlacement {
  int ranks = 1;
  int ranks_per_node = 1;    ///< ranks of the group sharing one node (NVLink peers)
  int nodes = 1;             ///< nodes the group spans
  /// Ranks of the group inside one pod when the group spans several pods of an oversubscribed
  /// fabric, else 0 (the whole group under full bisection bandwidth).
  int ranks_per_pod = 0;
};

/// Placement of a group of dimension `dim` under `layout.rank_order` (innermost first, e.g.
/// "tp-cp-dp-pp"): the group's stride is the product of the sizes of the dimensions inside
/// it; ranks_per_node = clamp(gpus_per_node / stride, 1, size) when the stride divides the
/// node, else 1; nodes = size / ranks_per_node. dp_cp is the fused DP x CP group (contiguous
/// when cp and dp are adjacent in the order); pp is a pair of neighbouring stages.
/// Under `pods`, ranks_per_pod counts the group's ranks inside one pod the same way.
[[nodiscard]] GroupPlacement place_group(const parallel::Layout& layout, ops::CommDim dim,
                                         int gpus_per_node, const Pods& pods = {});

/// The first of TP and CP whose groups do not lie alike on every NVLink domain of `domain`
/// GPUs, or nothing. A group of stride s and size n spans s·n consecutive ranks; its groups are
/// alike when that span tiles the domain (domain % (s·n) == 0), when whole domains tile the
/// span with whole stride blocks inside each (s·n % domain == 0 and domain % s == 0), or when
/// every member sits in its own domain (s % domain == 0). Otherwise some groups straddle a
/// domain boundary: a TP 16 block on a 72-GPU NVL72 domain (72 = 4.5 x 16).
[[nodiscard]] std::optional<ops::CommDim> straddling_dim(const parallel::Layout& layout, int domain);

/// `straddling_dim` as a layout rule ("straddles-domain", keyed by tp or cp), for the checks
/// that reject a layout before it is priced.
[[nodiscard]] std::optional<parallel::LayoutIssue> domain_issue(const parallel::Layout& layout, int domain);

/// Rank distance between neighbours of dimension `dim` under `layout.rank_order`: the product
/// of the sizes of the dimensions inside it (dp_cp: of the inner of dp and cp).
[[nodiscard]] long long rank_stride(const parallel::Layout& layout, ops::CommDim dim);

}  // namespace tetra::costmodel
