// Priced layer tables shared between simulations of one search.

#include "tetra/sim/layer_cache.hpp"

#include <algorithm>

#include "tetra/costmodel/collective.hpp"
#include "tetra/parallel/execution.hpp"

namespace tetra::sim {

LayerKey layer_key(const parallel::Training& training, const parallel::Layout& layout,
                   int nvlink_domain, const costmodel::Pods& pods) {
  LayerKey k;
  k.tp = layout.tp;
  k.cp = layout.cp;
  k.cp_comm = layout.cp > 1 ? layout.cp_comm : parallel::CpComm::p2p;
  k.cp_a2a = k.cp_comm == parallel::CpComm::a2a_p2p ? layout.cp_a2a : 1;
  k.mbs = layout.mbs;
  k.sp = layout.sp;
  k.recompute = layout.recompute;
  k.recomputed = parallel::recomputed_modules(layout).bits;
  k.ac_freq = layout.recompute == parallel::Recompute::selective_layer ? layout.ac_freq : 0;
  const int dpc = layout.shard_dp() * std::max(1, layout.cp);
  // ops::layer_ops adds per-layer parameter all-gathers over the shard group (DP×CP, or one
  // HSDP replica of it) only under ZeRO-3.
  k.dp_cp = training.zero_stage >= 3 && dpc > 1 ? dpc : 0;
  k.blocks_kept_unsharded = parallel::fsdp_keeps_blocks_unsharded(training, layout);
  const parallel::ExecutionTraits x = parallel::execution_traits(training, layout);
  k.micro_batches = x.cached_weight_casts || x.eager ? x.micro_batches : 0;
  const int gpn = std::max(nvlink_domain, 1);
  const auto tp = costmodel::place_group(layout, ops::CommDim::tp, gpn, pods);
  const auto cp = costmodel::place_group(layout, ops::CommDim::cp, gpn, pods);
  k.tp_ranks = tp.ranks;
  k.tp_per_node = tp.ranks_per_node;
  k.tp_nodes = tp.nodes;
  k.cp_ranks = cp.ranks;
  k.cp_per_node = cp.ranks_per_node;
  k.cp_nodes = cp.nodes;
  k.tp_per_pod = tp.ranks_per_pod;
  k.cp_per_pod = cp.ranks_per_pod;
  if (k.dp_cp > 0) {
    const auto dc = costmodel::place_group(layout, ops::CommDim::dp_cp, gpn, pods);
    k.dpcp_per_pod = dc.ranks_per_pod;
    k.dpcp_ranks = dc.ranks;
    k.dpcp_per_node = dc.ranks_per_node;
    k.dpcp_nodes = dc.nodes;
  }
  k.ep = layout.ep;
  k.etp = layout.etp;
  k.dispatcher = layout.moe_dispatcher;
  k.flex_backend = layout.moe_flex_backend;
  if (layout.ep > 1) {
    const auto ep = costmodel::place_group(layout, ops::CommDim::ep, gpn, pods);
    k.ep_per_pod = ep.ranks_per_pod;
    k.ep_per_node = ep.ranks_per_node;
    k.ep_nodes = ep.nodes;
  }
  return k;
}

std::shared_ptr<const LayerTables> LayerCache::find(const LayerKey& key) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto it = map_.find(key);
  return it == map_.end() ? nullptr : it->second;
}

std::shared_ptr<const LayerTables> LayerCache::insert(const LayerKey& key, LayerTables tables) {
  auto entry = std::make_shared<const LayerTables>(std::move(tables));
  const std::lock_guard<std::mutex> lock(mutex_);
  return map_.try_emplace(key, std::move(entry)).first->second;
}

std::size_t LayerCache::size() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return map_.size();
}

}  // namespace tetra::sim
