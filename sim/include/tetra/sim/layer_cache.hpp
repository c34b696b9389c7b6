#pragma once
/// Priced layer tables shared between simulations, so that a search prices each layer shape
/// once and reads the table without copying it. The layer level of a step (the forward /
/// backward passes of one transformer layer, the embedding and the head, replayed over the
/// cost models) depends only
/// on the per-layer shape of the layout, so layouts that differ in pp, vp, dp (without
/// ZeRO-3), schedule or the stage split reuse one replay.
///
/// Contract: one cache serves one (model, training, cluster, cost-model parameters); the
/// caller keeps those fixed. Thread-safe: many Simulators (one per thread) may share a cache.

#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "tetra/costmodel/placement.hpp"
#include "tetra/parallel/layout.hpp"
#include "tetra/sim/layer.hpp"

namespace tetra::sim {

/// The per-layer shape of a layout: every layout field the layer, embedding and head op lists
/// and their prices read.
struct LayerKey {
  int tp = 1;
  int cp = 1;
  parallel::CpComm cp_comm = parallel::CpComm::p2p;  ///< how the CP ranks exchange (cp > 1)
  int cp_a2a = 1;  ///< the all-to-all level of hierarchical CP (cp_comm a2a_p2p)
  int mbs = 1;
  bool sp = false;
  parallel::Recompute recompute = parallel::Recompute::none;
  /// The modules a selective layout re-runs (parallel::recomputed_modules), as their bit set.
  std::uint8_t recomputed = 0;
  int ac_freq = 0;  ///< selective_layer's checkpoint frequency, else 0
  int dp_cp = 0;  ///< DP×CP group size when ZeRO-3 gathers parameters per layer, else 0
  /// Micro-batches per step where a layer's ops read them, else 0: Transformer Engine casts a
  /// weight to FP8 once per step (its cost spread over the micro-batches), and eager
  /// frameworks accumulate gradients once per micro-batch after the first.
  int micro_batches = 0;
  bool blocks_kept_unsharded = false;  ///< parallel::fsdp_keeps_blocks_unsharded (reads pp)
  /// Placement (ranks, ranks per node, nodes) of the TP, CP and DP×CP groups on the nodes,
  /// which decides the link class each collective is priced on.
  int tp_ranks = 1, tp_per_node = 1, tp_nodes = 1;
  int cp_ranks = 1, cp_per_node = 1, cp_nodes = 1;
  int dpcp_ranks = 1, dpcp_per_node = 1, dpcp_nodes = 1;
  /// MoE layers (ops::moe_layer_ops): expert-parallel and expert-TP sizes, the token
  /// dispatcher (with the flex dispatcher's backend) and the EP group's placement.
  int ep = 1, etp = 1;
  parallel::MoeDispatcher dispatcher = parallel::MoeDispatcher::alltoall;
  parallel::FlexBackend flex_backend = parallel::FlexBackend::deepep;
  int ep_per_node = 1, ep_nodes = 1;
  /// Ranks of the TP, CP, DP×CP and EP groups inside one pod of an oversubscribed fabric when
  /// a group spans pods, else 0 (costmodel::cross_pod_seconds).
  int tp_per_pod = 0, cp_per_pod = 0, dpcp_per_pod = 0, ep_per_pod = 0;
  friend auto operator<=>(const LayerKey&, const LayerKey&) = default;
};

/// The key of `layout` for a cluster whose NVLink domains hold `nvlink_domain` GPUs (and whose
/// fabric has `pods`).
[[nodiscard]] LayerKey layer_key(const parallel::Training& training, const parallel::Layout& layout,
                                 int nvlink_domain, const costmodel::Pods& pods = {});

/// The replayed passes of one transformer layer, the embedding and the head.
struct LayerTables {
  LayerTimes layer;
  LayerTimes embedding;
  LayerTimes head;
  LayerTimes moe_layer;  ///< a MoE layer (equal to `layer` on a dense model)
};

/// Map from per-layer shape to its tables.
class LayerCache {
 public:
  /// The tables stored under `key`, or null.
  [[nodiscard]] std::shared_ptr<const LayerTables> find(const LayerKey& key) const;
  /// Stores `tables` under `key` unless an entry exists (then that one is kept: both are
  /// replays of the same inputs); returns the stored entry.
  std::shared_ptr<const LayerTables> insert(const LayerKey& key, LayerTables tables);
  /// Distinct shapes stored.
  [[nodiscard]] std::size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::map<LayerKey, std::shared_ptr<const LayerTables>> map_;
};

}  // namespace tetra::sim
