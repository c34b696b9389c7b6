// Where the ranks of a group lie on the nodes, from the layout's rank order (Megatron-Core
// `parallel_state.initialize_model_parallel` numbers ranks innermost first, tp-cp-dp-pp by
// default).
#include "tetra/costmodel/placement.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <string_view>

namespace tetra::costmodel {

using ops::CommDim;

namespace {

int dim_size(const parallel::Layout& l, std::string_view name) {
  if (name == "tp") return std::max(1, l.tp);
  if (name == "cp") return std::max(1, l.cp);
  if (name == "dp") return std::max(1, l.dp);
  if (name == "pp") return std::max(1, l.pp);
  return 0;
}

/// The dimensions of `layout.rank_order`, innermost first; Megatron's "tp-cp-dp-pp" when the
/// order does not name each of them once.
std::array<std::string_view, 4> rank_dims(const parallel::Layout& layout) {
  std::array<std::string_view, 4> parsed{};
  int count = 0;
  std::string_view s = layout.rank_order;
  while (!s.empty() && count < 4) {
    const std::size_t dash = s.find('-');
    const std::string_view tok = s.substr(0, dash);
    if (dim_size(layout, tok) == 0) return {"tp", "cp", "dp", "pp"};
    for (int i = 0; i < count; ++i) {
      if (parsed[static_cast<std::size_t>(i)] == tok) return {"tp", "cp", "dp", "pp"};
    }
    parsed[static_cast<std::size_t>(count++)] = tok;
    if (dash == std::string_view::npos) break;
    s.remove_prefix(dash + 1);
  }
  if (count != 4) return {"tp", "cp", "dp", "pp"};
  return parsed;
}

std::string_view dim_name(CommDim dim) {
  switch (dim) {
    case CommDim::tp: return "tp";
    case CommDim::cp:
    case CommDim::cp_a2a:
    case CommDim::cp_ring: return "cp";
    case CommDim::dp: return "dp";
    case CommDim::pp: return "pp";
    case CommDim::dp_cp: return "dp";
    case CommDim::dp_replicate: return "dp";
    case CommDim::ep:
    case CommDim::expert_dp: return "dp";
  }
  return "dp";
}

}  // namespace

long long rank_stride(const parallel::Layout& layout, CommDim dim) {
  // Expert groups (Megatron-Core parallel_state.py, expert RankGenerator "tp-ep-dp" over the
  // tp x cp x dp ranks of a stage): expert-TP innermost, then EP, then expert DP.
  if (dim == CommDim::ep) return std::max(1, layout.etp);
  if (dim == CommDim::expert_dp) return static_cast<long long>(std::max(1, layout.etp)) * std::max(1, layout.ep);
  if (dim == CommDim::cp_ring) return rank_stride(layout, CommDim::cp) * std::max(1, layout.cp_a2a);
  const auto order = rank_dims(layout);
  const std::string_view name = dim_name(dim);
  long long stride = 1;
  for (const auto d : order) {
    if (d == name || (dim == CommDim::dp_cp && d == "cp")) {
      // HSDP replicas are the outer factor of the DP dimension.
      return dim == CommDim::dp_replicate ? stride * layout.shard_dp() : stride;
    }
    stride *= dim_size(layout, d);
  }
  return stride;
}

std::optional<CommDim> straddling_dim(const parallel::Layout& layout, int domain) {
  const long long d = std::max(1, domain);
  for (const CommDim dim : {CommDim::tp, CommDim::cp}) {
    const long long n = dim == CommDim::tp ? std::max(1, layout.tp) : std::max(1, layout.cp);
    if (n <= 1) continue;
    const long long s = rank_stride(layout, dim);
    const long long span = s * n;
    const bool alike = d % span == 0 || (span % d == 0 && d % s == 0) || s % d == 0;
    if (!alike) return dim;
  }
  return std::nullopt;
}

std::optional<parallel::LayoutIssue> domain_issue(const parallel::Layout& layout, int domain) {
  const auto dim = straddling_dim(layout, domain);
  if (!dim) return std::nullopt;
  const bool tp = *dim == CommDim::tp;
  const long long span = rank_stride(layout, *dim) * (tp ? layout.tp : layout.cp);
  return parallel::LayoutIssue{tp ? "tp" : "cp", "straddles-domain",
                            std::string(tp ? "tp" : "cp") + "=" + std::to_string(tp ? layout.tp : layout.cp) +
                                " groups span " + std::to_string(span) + " ranks, which do not tile the NVLink domain of " +
                                std::to_string(domain) + " GPUs: some groups would straddle two domains"};
}

namespace {

/// Ranks of a group inside the first pod, for a group of `n` ranks `s` apart (the strided
/// groups: EP, expert DP, HSDP replicas, hierarchical CP's levels), or 0 when the pods hold the
/// whole group.
int strided_ranks_per_pod(long long n, long long s, const Pods& pods) {
  if (pods.gpus <= 0 || s * (n - 1) < pods.gpus) return 0;
  return static_cast<int>(std::clamp((pods.gpus + s - 1) / s, 1LL, n));
}

}  // namespace

GroupPlacement place_group(const parallel::Layout& layout, CommDim dim, int gpus_per_node, const Pods& pods) {
  // Order of dimensions, innermost first (default Megatron order).
  const std::array<std::string_view, 4> order = rank_dims(layout);
  std::array<long long, 4> stride{};
  std::array<int, 4> size{};
  long long st = 1;
  for (std::size_t i = 0; i < 4; ++i) {
    size[i] = dim_size(layout, order[i]);
    stride[i] = st;
    st *= size[i];
  }
  auto in_group = [&](std::string_view name) {
    switch (dim) {
      case CommDim::tp: return name == "tp";
      case CommDim::cp: return name == "cp";
      case CommDim::dp: return name == "dp";
      case CommDim::pp: return name == "pp";
      case CommDim::dp_cp: return name == "dp" || name == "cp";
      case CommDim::dp_replicate:
      case CommDim::ep:
      case CommDim::expert_dp:
      case CommDim::cp_a2a:
      case CommDim::cp_ring: return false;  // placed below
    }
    return false;
  };
  const long long gpn = std::max(1, gpus_per_node);
  GroupPlacement g;
  if (dim == CommDim::dp_replicate) {
    // One member per shard group: ranks rank_stride(dp_replicate) apart.
    const long long n = std::max(1, layout.dp_replicate);
    const long long s = std::max(1LL, rank_stride(layout, dim));
    const long long on_node = std::clamp((gpn + s - 1) / s, 1LL, n);
    g.ranks = static_cast<int>(n);
    g.ranks_per_node = static_cast<int>(on_node);
    g.nodes = static_cast<int>(std::max(1LL, n / on_node));
    g.ranks_per_pod = strided_ranks_per_pod(n, s, pods);
    return g;
  }
  if (dim == CommDim::ep || dim == CommDim::expert_dp || dim == CommDim::cp_a2a || dim == CommDim::cp_ring) {
    // ep ranks etp apart, or the expert-DP replicas ep·etp apart, inside the tp x cp x dp
    // ranks of a stage (contiguous under Megatron's orders, pp outermost); hierarchical CP's
    // cp_a2a consecutive CP ranks, or its ring of cp / cp_a2a ranks cp_a2a apart.
    const long long n = dim == CommDim::ep        ? std::max(1, layout.ep)
                        : dim == CommDim::cp_a2a  ? std::max(1, layout.cp_a2a)
                        : dim == CommDim::cp_ring ? std::max(1, layout.cp_ring())
                                                  : std::max(1, layout.edp());
    const long long s = std::max(1LL, rank_stride(layout, dim));
    const long long on_node = std::clamp((gpn + s - 1) / s, 1LL, n);
    g.ranks = static_cast<int>(n);
    g.ranks_per_node = static_cast<int>(on_node);
    g.nodes = static_cast<int>(std::max(1LL, (n + on_node - 1) / on_node));
    g.ranks_per_pod = strided_ranks_per_pod(n, s, pods);
    return g;
  }
  if (dim == CommDim::pp) {
    long long s = 1;
    for (std::size_t i = 0; i < 4; ++i) {
      if (order[i] == "pp") s = stride[i];
    }
    g.ranks = 2;
    const bool same = layout.pp > 1 && s < gpn;
    g.ranks_per_node = same ? 2 : 1;
    g.nodes = same ? 1 : 2;
    if (layout.pp <= 1) g = GroupPlacement{1, 1, 1};
    return g;
  }
  // Enumerate the group of rank 0 (mixed radix over its dimensions) and count the members
  // on rank 0's node and pod; groups are regular, so every node holds the same count.
  long long ranks = 1;
  for (std::size_t i = 0; i < 4; ++i) {
    if (in_group(order[i])) ranks *= size[i];
  }
  long long on_node = 0;
  long long in_pod = 0;
  for (long long idx = 0; idx < ranks; ++idx) {
    long long rem = idx;
    long long rank = 0;
    for (std::size_t i = 0; i < 4; ++i) {
      if (!in_group(order[i])) continue;
      rank += (rem % size[i]) * stride[i];
      rem /= size[i];
    }
    if (rank < gpn) ++on_node;
    if (rank < pods.gpus) ++in_pod;
  }
  g.ranks = static_cast<int>(ranks);
  g.ranks_per_node = static_cast<int>(std::max(1LL, on_node));
  g.nodes = static_cast<int>(std::max(1LL, ranks / g.ranks_per_node));
  g.ranks_per_pod = pods.gpus > 0 && in_pod < ranks ? static_cast<int>(std::max(1LL, in_pod)) : 0;
  return g;
}

}  // namespace tetra::costmodel
