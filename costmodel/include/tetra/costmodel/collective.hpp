#pragma once
/// Communication cost model: NCCL's own performance model
/// (`NVIDIA/nccl: src/graph/tuning.cc` ncclTopoTuneModel / ncclTopoGetAlgoTime and
/// `src/enqueue.cc` topoGetAlgoInfo, tags v2.21.5-1, v2.27.7-1, v2.30.7-1) for a group of ranks
/// placed on nodes, with the algorithm and protocol NCCL would pick, converted to nccl-tests'
/// algbw / busbw (`NVIDIA/nccl-tests: doc/PERFORMANCE.md`, `src/*.cu` `*GetBw`).
///
/// Inputs NCCL takes from its topology search — channels and per-channel bandwidth of the
/// ring/tree graph (nChannels, bwIntra, bwInter) and of the NVLS graph — are derived from the
/// node's links by `ring_graph` / `tree_graph` / `nvls_graph` the way `src/graph/search.cc`
/// would find them; a calibration profile's measured collective rows or fits replace the model.

#include <optional>
#include <vector>

#include "tetra/costmodel/profile.hpp"
#include "tetra/hw/cluster.hpp"
#include "tetra/parallel/layout.hpp"
#include "tetra/costmodel/placement.hpp"
#include "tetra/ops/ops.hpp"
#include "tetra/parallel/validate.hpp"

namespace tetra::costmodel {

/// NCCL releases whose tuning constants the model carries (`src/graph/tuning.cc` of each tag).
enum class NcclVersion { v2_21_5, v2_27_7, v2_30_7 };

/// NCCL algorithms and protocols (indices as `src/include/plugin/nccl_tuner.h`).
enum class NcclAlgo { tree = 0, ring = 1, collnet_direct = 2, collnet_chain = 3, nvls = 4, nvls_tree = 5, pat = 6 };
enum class NcclProto { ll = 0, ll128 = 1, simple = 2 };

/// "2.21.5" / "2.27.7" / "2.30.7" (and other versions mapped to the nearest older one with
/// the same constants); empty or unknown -> the newest.
[[nodiscard]] NcclVersion parse_nccl_version(const std::string& text) noexcept;
[[nodiscard]] const char* to_string(NcclVersion v) noexcept;
[[nodiscard]] const char* to_string(NcclAlgo a) noexcept;
[[nodiscard]] const char* to_string(NcclProto p) noexcept;

/// What NCCL's topology search reports for one graph (`Pattern .., nChannels N, bw I/O`).
struct GraphInfo {
  int channels = 0;          ///< graph->nChannels (before the post-set duplication)
  double bw_intra_GBps = 0;  ///< graph->bwIntra, GB/s per channel
  double bw_inter_GBps = 0;  ///< graph->bwInter, GB/s per channel
};

/// The links a communicator's topology search sees, in NCCL's units (GB/s = 1e9 B/s):
/// per-GPU NVLink bandwidth = links x per-link (`src/graph/topo.h`: SM80_NVLINK_BW 20.0 x 12
/// links on A100, SM90_NVLINK_BW 20.6 x 18 on H100/H200), NIC = speed_Mbps / 8000
/// (`src/graph/topo.cc`: 200 Gb/s HDR -> 25, 400 Gb/s NDR -> 50).
struct NcclTopology {
  int compute_capability = 90;
  bool nvlink = true;          ///< intra-node links are NVLink (else PCI latencies/bandwidth)
  bool nvls = false;           ///< NVLink SHARP (third-generation NVSwitch)
  bool cpu_amd = false;        ///< llMaxBws row and net overhead (x86 AMD)
  double nvlink_GBps = 370.8;  ///< NCCL's intra-node bandwidth of one GPU (all its links)
  /// GPUs of a node joined pairwise by NVLink with no switch (0: switched). Each GPU's links
  /// are split evenly over its peers, so a group of k of the node's GPUs reaches only the
  /// (k - 1) / (mesh_gpus - 1) of them that lead to its own members (NCCL's paths follow the
  /// links: `src/graph/paths.cc`), and a pair copy only the links between the pair.
  int mesh_gpus = 0;
  double pci_GBps = 12.0;      ///< PCI_BW
  double nic_GBps = 50.0;      ///< one NIC
  int nics_per_node = 8;
  int gpus_per_node = 8;
  double p2p_intra_Bps = 0;    ///< achievable GPU pair copy inside a node
  double p2p_inter_Bps = 0;    ///< achievable GPU-to-GPU across nodes (one NIC)
  double p2p_intra_lat_s = 0;
  double p2p_inter_lat_s = 0;
  double alltoall_intra_busbw_Bps = 0;  ///< measured intra-node all-to-all busbw (0: derive)
  /// Measured inter-node all-to-all busbw over the bound of each rank's remote share crossing
  /// its NIC share at p2p_inter_Bps (1: the bound).
  double alltoall_nic_efficiency = 1.0;
  /// HybridEP's rate for the tokens it sends across nodes, over the NIC share
  /// (hierarchical_all_to_all with FlexBackend::hybridep).
  double hybridep_nic_efficiency = 1.0;
};

/// The graph NCCL's search (`src/graph/search.cc` ncclTopoCompute, ncclTopoDupChannels)
/// would find for a group placement, derived from the links:
///  - candidate per-channel speeds from `speedArrayIntra` / `sm90SpeedArrayIntra` (one node) or
///    `speedArrayInter` / `sm90SpeedArrayInter` (several nodes), highest first, continuing while
///    the next speed is > 0.49 of the best found; channels per speed = how many fit into the
///    NVLink bandwidth (and, across nodes, into the NICs the group's ranks own on a node:
///    ranks_per_node x nics_per_node / gpus_per_node, each NIC carrying floor(nic/speed));
///    the first speed with the largest channels x speed wins (at most 32 channels);
///  - ncclTopoDupChannels: channels x2 and speed /2 when speed >= 25 (on cc > 80 only if
///    speed >= 50 or channels <= 4);
///  - pass 2 raises the speed with the same channels while it still fits (ring), or raises
///    bwIntra up to 2 x bwInter (tree).
/// NVLS: one channel per GPU of the node (the NVLS heads), the highest intra speed with
/// channels x speed within the NVLink bandwidth; across nodes bwInter is the NIC speed.
/// DGX A100 one node: 12 channels at 20 GB/s (6 at 40, duplicated); DGX H100: 12 at 30 (6 at
/// 60, duplicated), NVLS 8 at 40; across nodes: 8 at 24 (A100, HDR) / 8 at 48 (H100, NDR).
/// `NCCL_DEBUG=INFO` prints the real values (`Pattern .., nChannels .., bw ../..`); a profile's
/// measured rows take precedence.
[[nodiscard]] GraphInfo ring_graph(const NcclTopology& t, int ranks_per_node, int nodes) noexcept;
/// The intra-node bandwidth a group with `ranks_per_node` ranks on each node can use (NCCL units).
[[nodiscard]] double group_nvlink_GBps(const NcclTopology& t, int ranks_per_node) noexcept;
[[nodiscard]] GraphInfo tree_graph(const NcclTopology& t, int ranks_per_node, int nodes) noexcept;
[[nodiscard]] GraphInfo nvls_graph(const NcclTopology& t, int ranks_per_node, int nodes) noexcept;

/// Everything the collective model needs for one cluster.
struct CommParams {
  NcclVersion version = NcclVersion::v2_30_7;
  NcclTopology topo;
  bool allow_nvls = true;    ///< NCCL_NVLS_ENABLE (only effective where topo.nvls has channels)
  bool allow_tree = true;
  bool allow_ll = true;
  bool allow_ll128 = true;
  /// Measured rows / fits of a profile: where a (op, ranks, ranks_per_node) matches, they
  /// replace the model (rows interpolated in log size, fits t = lat + S·f/busbw).
  std::vector<CollectiveRow> rows;   ///< sorted by (op, ranks, ranks_per_node, bytes)
  std::vector<CollectiveFit> fits;
  // Cluster factors (factors.hpp): `collective` and `p2p_seconds` divide the time of a group
  // inside one node by intra_node_factor, of a group across nodes by inter_node_factor.
  double intra_node_factor = 1.0;
  double inter_node_factor = 1.0;
  /// Pods of an oversubscribed fabric: traffic between them is bounded by cross_pod_seconds.
  Pods pods;
};

/// One priced collective.
struct CollectiveEstimate {
  double seconds = 0;
  double algbw_Bps = 0;      ///< S / t (nccl-tests)
  double busbw_Bps = 0;      ///< algbw x bus factor (nccl-tests)
  NcclAlgo algo = NcclAlgo::ring;
  NcclProto proto = NcclProto::simple;
  bool measured = false;     ///< taken from a profile's rows / fits
};

/// nccl-tests' bus factor: 2(n−1)/n for all-reduce, (n−1)/n for all-gather / reduce-scatter /
/// all-to-all, 1 for send/recv.
[[nodiscard]] double bus_factor(ops::CollectiveKind kind, int ranks) noexcept;

/// NCCL's (latency µs, bandwidth GB/s) for one (collective, algorithm, protocol) on a group,
/// as ncclTopoTuneModel computes them; bandwidth 0 = not eligible. `bw` is NCCL's algorithm
/// bandwidth (after the bus -> algorithm conversion).
struct NcclLatBw {
  double lat_us = 0;
  double bw_GBps = 0;
};
[[nodiscard]] NcclLatBw nccl_lat_bw(ops::CollectiveKind kind, NcclAlgo algo, NcclProto proto,
                                    const GroupPlacement& g, const CommParams& p) noexcept;

/// NCCL's time of one call (ncclTopoGetAlgoTime) in seconds for `bytes` = nBytes as NCCL
/// counts them (the whole buffer for all-gather / reduce-scatter); < 0 when disabled.
[[nodiscard]] double nccl_algo_seconds(ops::CollectiveKind kind, NcclAlgo algo, NcclProto proto,
                                       double bytes, const GroupPlacement& g,
                                       const CommParams& p) noexcept;

/// The collective at nccl-tests size `bytes` (S of `NVIDIA/nccl-tests: doc/PERFORMANCE.md`:
/// count·typesize for all-reduce, the whole gathered buffer for all-gather / reduce-scatter)
/// on group `g`:
/// measured rows / fits when the profile has them, else the fastest eligible (algorithm,
/// protocol) of NCCL's model. send_recv is priced as `p2p_seconds` across the slower link.
/// The time is divided by the group's cluster factor (intra- or inter-node). A group of one
/// rank costs 0.
[[nodiscard]] CollectiveEstimate collective(ops::CollectiveKind kind, double bytes,
                                            const GroupPlacement& g, const CommParams& p) noexcept;

/// A MoE dispatch (or combine) of all-to-all size `bytes` (each token's `topk` routed copies)
/// that crosses nodes once per destination node: DeepEP's normal kernels send a token over
/// the network to the GPU of the same local index on each node that holds one of
/// its experts, which forwards it over NVLink to those experts' GPUs (DeepSeek-V3 technical
/// report, arXiv 2412.19437, section 3.2.2; deepseek-ai/DeepEP README, "forwarding data from
/// NVLink domain to RDMA domain"). With `experts` spread evenly over the group's nodes and
/// routing uniform, a node holds none of a token's experts with probability
/// P0 = prod_{i<k} (E − E/N − i) / (E − i); each rank sends bytes/k · (N − 1)(1 − P0) over its
/// NIC share, and all of `bytes` as an all-to-all inside its node; the two run pipelined, so
/// the slower sets the time. One node: the plain all-to-all. DeepEP's network share runs at
/// NCCL's all-to-all rate on the NICs; HybridEP's at its own measured rate
/// (NcclTopology::hybridep_nic_efficiency).
[[nodiscard]] double hierarchical_all_to_all(double bytes, int topk, int experts, parallel::FlexBackend backend,
                                             const GroupPlacement& g, const CommParams& p) noexcept;

/// Point-to-point transfer of `bytes` between two GPUs, inside a node (NVLink) or across
/// nodes (the GPU's NIC), at the slower link of the pair, over the cluster factor of that link.
[[nodiscard]] double p2p_seconds(double bytes, bool same_node, const CommParams& p) noexcept;

/// The least time a collective of a group spanning nodes needs on its nodes' NICs, every group
/// of its kind in the node running at once (each rank runs the same program); 0 inside a node,
/// and for all-to-alls, which are priced on one GPU's NIC share already. A ring (or tree)
/// leaves a node by one edge per channel, and whatever the channels, the node sends bytes ·
/// bus factor of each group's buffer across; the node holds gpus_per_node / ranks_per_node such
/// groups on nics_per_node NICs: bytes · bus factor / (ranks_per_node · one GPU's share of the
/// NICs' line rate), over the cluster's inter-node factor. NCCL's own search (nccl_lat_bw)
/// gives a communicator at least one whole NIC, which this bound corrects where a node has
/// fewer NICs than concurrent groups of the dimension.
[[nodiscard]] double node_nic_seconds(ops::CollectiveKind kind, double bytes, const GroupPlacement& g,
                                      const CommParams& p) noexcept;

/// The least time a collective of a group spanning pods (GroupPlacement::ranks_per_pod > 0)
/// needs on the oversubscribed layer above them, every group of its kind running at once; 0
/// when the group stays inside a pod. The layer carries pod_gpus / oversubscription NICs'
/// worth. A ring (or tree) leaves a pod by one edge per group, and the pod holds
/// pod_gpus / ranks_per_pod such groups, so each crossing edge gets ranks_per_pod /
/// oversubscription of a node edge: bytes · bus factor · oversubscription / (ranks_per_pod ·
/// one GPU's NIC share). An all-to-all sends (n − ranks_per_pod) / n of every rank's buffer
/// out of the pod at once: that share · bytes · oversubscription / one GPU's NIC share. Both
/// divided by the cluster's inter-node factor, as every transfer across nodes is.
[[nodiscard]] double cross_pod_seconds(ops::CollectiveKind kind, double bytes, const GroupPlacement& g,
                                       const CommParams& p) noexcept;

/// A pipeline transfer between stages in different pods when `senders` GPUs of the pod send
/// across at once (every GPU of the stage): each gets pod_gpus / (oversubscription · senders)
/// of its NIC, at most all of it (and the inter-node factor, as p2p_seconds).
[[nodiscard]] double cross_pod_p2p_seconds(double bytes, long long senders, const CommParams& p) noexcept;

/// Time of one repetition of a communication op of the op list under `layout`.
[[nodiscard]] double comm_op_seconds(const ops::Op& op, const parallel::Layout& layout,
                                     const CommParams& p) noexcept;

}  // namespace tetra::costmodel
