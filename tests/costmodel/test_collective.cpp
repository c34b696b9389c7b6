// Collective model: NCCL's tuning model (`NVIDIA/nccl: src/graph/tuning.cc`, v2.30.7-1;
// `src/enqueue.cc`) and nccl-tests busbw (`NVIDIA/nccl-tests: doc/PERFORMANCE.md`), checked
// against hand computations and published busbw (GTC24 S62129 / GTC25 S72583 slides,
// NVIDIA/nccl-tests issue #212, stas00/ml-engineering network/README.md, vTrain's A100 LUTs).
#include <doctest/doctest.h>

#include <array>

#include "tetra/costmodel/builtin_profiles.hpp"
#include "tetra/costmodel/collective.hpp"
#include "tetra/hw/presets.hpp"
#include "support/approx.hpp"

using tetra::test::approx;
using namespace tetra;
using namespace tetra::costmodel;
using ops::CollectiveKind;

namespace {

hw::Cluster cluster(const char* name) {
  auto c = hw::find_cluster_preset(name);
  REQUIRE(c);
  return *c;
}

CommParams params(const char* name) {
  const hw::Cluster c = cluster(name);
  return make_comm_params(c, builtin_profile(c));
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

double busbw_gbs(CollectiveKind k, int nodes, const CommParams& p) {
  return collective(k, kGiB, GroupPlacement{8 * nodes, 8, nodes}, p).busbw_Bps / 1e9;
}

}  // namespace

TEST_SUITE("costmodel") {
  TEST_CASE("Graphs NCCL's search finds on DGX A100 / DGX H100 (src/graph/search.cc)") {
    const CommParams a = params("dgx-a100-80gb");
    const CommParams h = params("dgx-h100");
    // A100: 12 links x 20.0 = 240 GB/s; 6 channels at 40 fill it; duplicated -> 12 at 20.
    CHECK(a.topo.nvlink_GBps == approx(240.0));
    CHECK(ring_graph(a.topo, 8, 1).channels == 12);
    CHECK(ring_graph(a.topo, 8, 1).bw_intra_GBps == approx(20.0));
    // H100: 18 x 20.6 = 370.8; 6 at 60 (= 360) is the first best; duplicated (>= 50) -> 12 at 30.
    CHECK(h.topo.nvlink_GBps == approx(370.8));
    CHECK(ring_graph(h.topo, 8, 1).channels == 12);
    CHECK(ring_graph(h.topo, 8, 1).bw_intra_GBps == approx(30.0));
    // NVLS: one head per GPU, 8 x 40 <= 370.8.
    CHECK(nvls_graph(h.topo, 8, 1).channels == 8);
    CHECK(nvls_graph(h.topo, 8, 1).bw_intra_GBps == approx(40.0));
    // Across nodes one channel per NIC: 400 Gb/s -> 50 GB/s -> speed 48; 200 Gb/s -> 25 -> 24.
    CHECK(ring_graph(h.topo, 8, 4).channels == 8);
    CHECK(ring_graph(h.topo, 8, 4).bw_inter_GBps == approx(48.0));
    CHECK(ring_graph(a.topo, 8, 4).channels == 8);
    CHECK(ring_graph(a.topo, 8, 4).bw_inter_GBps == approx(24.0));
  }

  TEST_CASE("A 4-GPU NVLink mesh: a group reaches only the links to its own members") {
    // NVIDIA HGX H100 4-GPU boards (TSUBAME 4.0, JUPITER's 4 x GH200 nodes): the 18 links of a
    // GPU go 6 to each of its 3 peers, 150 GB/s per direction to a peer (JSC JUPITER
    // configuration page: "300 GB/s between pairs of GPUs"). NCCL's paths follow those links.
    hw::Cluster c = cluster("dgx-h100");
    c.gpus_per_node = 4;
    c.intra.kind = hw::IntraKind::nvlink_mesh;
    const CommParams m = make_comm_params(c, builtin_profile(c));
    CHECK(m.topo.mesh_gpus == 4);
    CHECK_FALSE(m.topo.nvls);
    // 370.8 x (k - 1) / 3: a pair 123.6, three GPUs 247.2, all four 370.8.
    CHECK(group_nvlink_GBps(m.topo, 2) == approx(123.6));
    CHECK(group_nvlink_GBps(m.topo, 3) == approx(247.2));
    CHECK(group_nvlink_GBps(m.topo, 4) == approx(370.8));
    // A pair's ring: 2 channels at 60 (120 <= 123.6; slower speeds fill no more), duplicated
    // (>= 50) to 4 at 30; pass 2 cannot raise 4 channels to 40 (160 > 123.6): 120 GB/s.
    CHECK(ring_graph(m.topo, 2, 1).channels == 4);
    CHECK(ring_graph(m.topo, 2, 1).bw_intra_GBps == approx(30.0));
    // The same pair on an NVSwitch: the whole 370.8: 12 channels at 30.
    CHECK(ring_graph(params("dgx-h100").topo, 2, 1).channels == 12);
    // A pair copy: 88 % of the pair's 150 GB/s = 132 GB/s.
    CHECK(m.topo.p2p_intra_Bps == approx(0.88 * 450e9 / 3));
  }

  TEST_CASE("NCCL latency / bandwidth formulas by hand (tuning.cc ncclTopoTuneModel)") {
    const CommParams a = params("dgx-a100-80gb");
    const CommParams h = params("dgx-h100");
    const GroupPlacement node{8, 8, 1};
    // Ring/Simple all-reduce, A100, 8 ranks: lat = 8.4 + 14 * 3.4 = 56.0 us;
    // bw = 12 * 20 = 240 bus -> x 8/14 = 137.14 GB/s algorithm bandwidth.
    NcclLatBw r = nccl_lat_bw(CollectiveKind::all_reduce, NcclAlgo::ring, NcclProto::simple, node, a);
    CHECK(r.lat_us == approx(56.0));
    CHECK(r.bw_GBps == approx(240.0 * 8 / 14));
    // Ring/LL: lat = 6.6 + 14 * 0.6 = 15.0; bw = min(llMaxBw 87.7, 0.5 * 240) * 8/14 = 50.114.
    r = nccl_lat_bw(CollectiveKind::all_reduce, NcclAlgo::ring, NcclProto::ll, node, a);
    CHECK(r.lat_us == approx(15.0));
    CHECK(r.bw_GBps == approx(87.7 * 8 / 14));
    // Ring/LL128: min(0.92 * 240, 12 * 20) * 8/14 = 220.8 * 8/14.
    r = nccl_lat_bw(CollectiveKind::all_reduce, NcclAlgo::ring, NcclProto::ll128, node, a);
    CHECK(r.bw_GBps == approx(220.8 * 8 / 14));
    // NVLS all-reduce, H100: 40 * 0.85 * 7/8 * 2 = 59.5 per channel, x 8 = 476 bus,
    // x 8/14 = 272.0 GB/s algorithm bandwidth (nccl-tests #212: "algbw ~275"); lat = 25 us.
    r = nccl_lat_bw(CollectiveKind::all_reduce, NcclAlgo::nvls, NcclProto::simple, node, h);
    CHECK(r.bw_GBps == approx(476.0 * 8 / 14));
    CHECK(r.lat_us == approx(25.0));
    // Ring all-gather, H100: lat = 8.4 + 7 * 3.4 = 32.2; bw = 360 * 8/7.
    r = nccl_lat_bw(CollectiveKind::all_gather, NcclAlgo::ring, NcclProto::simple, node, h);
    CHECK(r.lat_us == approx(32.2));
    CHECK(r.bw_GBps == approx(360.0 * 8 / 7));
    // Tree/Simple all-reduce, H100, 4 nodes: lat = 8.4 + 2 * (7 * 4.0 + log2(4) * 14) = 120.4;
    // bw = min(0.92 * 8 * 48, 8 * perChMaxTreeBw 36.0) * 0.5 = 144.
    const GroupPlacement four{32, 8, 4};
    r = nccl_lat_bw(CollectiveKind::all_reduce, NcclAlgo::tree, NcclProto::simple, four, h);
    CHECK(r.lat_us == approx(120.4));
    CHECK(r.bw_GBps == approx(144.0));
    // Ring/Simple all-reduce, H100, 4 nodes: 2(n-1) = 62 steps, 6 inter-node:
    // lat = 8.4 + 56 * max(3.4, 3 * 1.0) + 6 * 14 = 282.8 us.
    r = nccl_lat_bw(CollectiveKind::all_reduce, NcclAlgo::ring, NcclProto::simple, four, h);
    CHECK(r.lat_us == approx(282.8));
    // ... and the plateau factor 1.4 applies to a 1 GiB call:
    // t = 282.8 * 1.4 + 2^30 / (1000 * 384 * 32/62) us = 395.92 + 5417.6 = 5813.5 us.
    CHECK(nccl_algo_seconds(CollectiveKind::all_reduce, NcclAlgo::ring, NcclProto::simple, kGiB, four, h) ==
          approx(5813.5e-6).epsilon(1e-4));
    // NVLS is single-node only without CollNet; PAT needs one GPU per node.
    CHECK(nccl_lat_bw(CollectiveKind::all_reduce, NcclAlgo::nvls, NcclProto::simple, four, h).bw_GBps == 0);
    CHECK(nccl_lat_bw(CollectiveKind::all_gather, NcclAlgo::pat, NcclProto::simple, four, h).bw_GBps == 0);
    CHECK(nccl_lat_bw(CollectiveKind::all_gather, NcclAlgo::pat, NcclProto::simple, GroupPlacement{4, 1, 4}, h).bw_GBps > 0);
  }

  TEST_CASE("Tree correction factor and NCCL versions (tuning.cc at v2.21.5, v2.27.7, v2.30.7)") {
    CommParams h = params("dgx-h100");
    const GroupPlacement four{32, 8, 4};
    // 1 MiB: logSize = log2(2^20 / 64) = 14 -> Simple factor 0.5 on the bandwidth.
    const double t = nccl_algo_seconds(CollectiveKind::all_reduce, NcclAlgo::tree, NcclProto::simple, 1048576.0, four, h);
    CHECK(t == approx((120.4 + 1048576.0 / (1000 * 144.0 * 0.5)) * 1e-6));
    // v2.21.5: Tree/Simple base 0 and 28 us hardware latency: 2 * (7 * 28 + 2 * 28) = 504 us.
    h.version = parse_nccl_version("2.21.5");
    CHECK(h.version == NcclVersion::v2_21_5);
    CHECK(nccl_lat_bw(CollectiveKind::all_reduce, NcclAlgo::tree, NcclProto::simple, four, h).lat_us == approx(504.0));
    // v2.27.7: NVLS all-reduce bw = min(bwIntra, bwInter) = 40 per channel, x 8, ratio 5/6.
    h.version = parse_nccl_version("2.27.7");
    CHECK(nccl_lat_bw(CollectiveKind::all_reduce, NcclAlgo::nvls, NcclProto::simple, GroupPlacement{8, 8, 1}, h).bw_GBps ==
          approx(320.0 * 5 / 6));
    CHECK(parse_nccl_version("") == NcclVersion::v2_30_7);
    CHECK(parse_nccl_version("2.30.7") == NcclVersion::v2_30_7);
  }

  TEST_CASE("nccl-tests busbw definitions (doc/PERFORMANCE.md)") {
    CHECK(bus_factor(CollectiveKind::all_reduce, 8) == approx(1.75));
    CHECK(bus_factor(CollectiveKind::all_gather, 8) == approx(0.875));
    CHECK(bus_factor(CollectiveKind::send_recv, 2) == approx(1.0));
    const CommParams a = params("dgx-a100-80gb");
    const CollectiveEstimate e = collective(CollectiveKind::all_reduce, kGiB, GroupPlacement{8, 8, 1}, a);
    CHECK(e.algbw_Bps == approx(kGiB / e.seconds));
    CHECK(e.busbw_Bps == approx(e.algbw_Bps * 1.75));
    CHECK(collective(CollectiveKind::all_reduce, kGiB, GroupPlacement{1, 1, 1}, a).seconds == 0);
  }

  TEST_CASE("All-reduce busbw at 1 GiB inside a node matches nccl-tests (GTC24/25, ml-engineering)") {
    // DGX A100: 232 (GTC24/25), 235 (ml-engineering network/README.md).
    const double a100 = busbw_gbs(CollectiveKind::all_reduce, 1, params("dgx-a100-80gb"));
    CHECK(a100 == approx(233.5).epsilon(0.10));
    // DGX H100: NCCL picks NVLS, ~480 (GTC24/25; nccl-tests #212).
    const CommParams h = params("dgx-h100");
    const CollectiveEstimate nv = collective(CollectiveKind::all_reduce, kGiB, GroupPlacement{8, 8, 1}, h);
    CHECK(nv.algo == NcclAlgo::nvls);
    CHECK(nv.busbw_Bps / 1e9 == approx(480).epsilon(0.10));
    // Without NVLS: ring, 370 (GTC24/25; nccl-tests #212 "effective NVLink bandwidth of 370GB/s").
    CommParams ring = h;
    ring.allow_nvls = false;
    CHECK(busbw_gbs(CollectiveKind::all_reduce, 1, ring) == approx(370).epsilon(0.10));
    // All-gather / reduce-scatter: ring, 370 (nccl-tests #212).
    CHECK(busbw_gbs(CollectiveKind::all_gather, 1, h) == approx(370).epsilon(0.10));
    CHECK(busbw_gbs(CollectiveKind::reduce_scatter, 1, h) == approx(370).epsilon(0.10));
  }

  TEST_CASE("All-reduce busbw at 1 GiB across nodes (GTC24/25: 32 GPUs)") {
    // DGX A100, 8x 200 Gb/s: 192 GB/s at 32 GPUs (GTC24 / GTC25).
    const CommParams a = params("dgx-a100-80gb");
    for (int nodes : {2, 4, 8}) {
      CAPTURE(nodes);
      CHECK(busbw_gbs(CollectiveKind::all_reduce, nodes, a) == approx(192).epsilon(0.10));
    }
    // At 16 nodes NCCL's ring latency (254 steps, x1.4 plateau) costs 13 % at 1 GiB; the
    // published figure is for 32 GPUs only.
    CHECK(busbw_gbs(CollectiveKind::all_reduce, 16, a) == approx(192).epsilon(0.15));
    // DGX H100, 8x 400 Gb/s: 370 (GTC25) - 380 (GTC24) at 32 GPUs.
    const CommParams h = params("dgx-h100");
    for (int nodes : {4, 8, 16}) {
      CAPTURE(nodes);
      CHECK(busbw_gbs(CollectiveKind::all_reduce, nodes, h) == approx(375).epsilon(0.10));
    }
    // Two nodes: NCCL's choice is NVLS-tree (inter bandwidth doubled for <= 2 nodes, capped at
    // perChMaxNVLSTreeBw 57.7 x 8 channels), above the 32-GPU figure; the ring alone matches it.
    CommParams ring = h;
    ring.allow_nvls = false;
    CHECK(busbw_gbs(CollectiveKind::all_reduce, 2, ring) == approx(375).epsilon(0.10));
    const CollectiveEstimate two = collective(CollectiveKind::all_reduce, kGiB, GroupPlacement{16, 8, 2}, h);
    CHECK(two.algo == NcclAlgo::nvls_tree);
  }

  TEST_CASE("All-to-all across nodes at the published 32-GPU busbw (GTC25)") {
    // nccl-tests all-to-all on 32 GPUs of 4 nodes: 48 GB/s busbw on DGX H100 (8x 400 Gb/s),
    // 24 GB/s on DGX A100 (8x 200 Gb/s). Each rank's remote 24/32 of the buffer crosses its
    // NIC (48.5 / 23.5 GB/s effective), a bound of 48.5 x 31/24 = 62.65 and 30.35 GB/s.
    // (At 1 GiB the all-to-all's launch latency, about 30 us, costs 0.1-0.2 %.)
    CHECK(busbw_gbs(CollectiveKind::all_to_all, 4, params("dgx-h100")) == approx(48.0).epsilon(3e-3));
    CHECK(busbw_gbs(CollectiveKind::all_to_all, 4, params("dgx-a100-80gb")) == approx(24.0).epsilon(3e-3));
    // 64 GPUs on 8 nodes: the same share of that bound, 48 / 62.65 x 48.5 x 63/56 = 41.80 GB/s.
    CHECK(busbw_gbs(CollectiveKind::all_to_all, 8, params("dgx-h100")) == approx(41.80).epsilon(3e-3));
    // One node: the measured intra-node 320 GB/s (GTC25), untouched.
    CHECK(busbw_gbs(CollectiveKind::all_to_all, 1, params("dgx-h100")) == approx(320.0).epsilon(0.02));
  }

  TEST_CASE("Flex dispatch: one copy per destination node over the network, the rest over NVLink") {
    // DeepSeek-V3 routing (256 experts, top-8) over ep 32 on 4 DGX H100 nodes, S = 1 GiB.
    // A node holds none of a token's experts with P0 = prod_{i<8} (192 - i) / (256 - i) =
    // 0.096446; a token reaches 3 (1 - P0) = 2.7107 remote nodes instead of 8 x 24/32 = 6
    // remote copies. Each rank sends S/8 x 2.7107 = 363.8 MB at NCCL's all-to-all rate on the
    // NICs, 48 GB/s of busbw over 31/24 = 37.16 GB/s (builtin_profiles.cpp [GTC]): 9.790 ms,
    // plus the launch, 8.4 + 31 x 0.5 = 23.9 us: 9.814 ms. Inside the node the 1 GiB
    // all-to-all takes 1 GiB x 7/8 / 320 GB/s = 2.94 ms, hidden under it. The plain
    // all-to-all sends S x 24/32 = 805.3 MB: 21.67 ms, plus the launch.
    const CommParams h = params("dgx-h100");
    const GroupPlacement g{32, 8, 4};
    const double flex = hierarchical_all_to_all(kGiB, 8, 256, parallel::FlexBackend::deepep, g, h);
    CHECK(flex == approx(9.814e-3).epsilon(0.002));
    CHECK(collective(CollectiveKind::all_to_all, kGiB, g, h).seconds == approx(21.69e-3).epsilon(0.002));
    // One node: the plain all-to-all.
    const GroupPlacement node{8, 8, 1};
    CHECK(hierarchical_all_to_all(kGiB, 8, 256, parallel::FlexBackend::deepep, node, h) ==
          approx(collective(CollectiveKind::all_to_all, kGiB, node, h).seconds));
    // Qwen3-30B-A3B routing (128 experts, top-8) over 2 nodes: P0 = 0.0030959, so nearly every
    // token crosses once: S/8 x 0.99690 / 37.16 GB/s = 3.600 ms, plus 15.9 us of launch.
    const GroupPlacement two{16, 8, 2};
    CHECK(hierarchical_all_to_all(kGiB, 8, 128, parallel::FlexBackend::deepep, two, h) ==
          approx(3.616e-3).epsilon(0.002));
  }

  TEST_CASE("HybridEP across nodes at its measured rate") {
    // NVIDIA/skills nemo-mbridge-perf-expert-parallel-overlap SKILL.md (7149a88): Qwen3-30B-A3B
    // on 2 DGX H100, EP 16, BF16, HybridEP, 64 micro-batches of 4096 tokens a step: 9.079 ms
    // of communication under compute is 0.11 % of it, 8.254 s; over 64 x 48 layers x 4
    // exchanges that is 671.7 us an exchange. One exchange: S = 4096 tokens x 8 copies x 2048
    // x 2 bytes = 134.2 MB, of which S/8 x 0.99690 = 16.725 MB crosses at 25.5 GB/s, 655.9 us,
    // plus the 15.9 us launch: 671.8 us.
    const CommParams h = params("dgx-h100");
    const GroupPlacement two{16, 8, 2};
    const double s = 4096.0 * 8 * 2048 * 2;
    const double hybrid = hierarchical_all_to_all(s, 8, 128, parallel::FlexBackend::hybridep, two, h);
    CHECK(hybrid == approx(671.7e-6).epsilon(0.002));
    CHECK(64 * 48 * 4 * hybrid == approx(8.254).epsilon(0.002));
    // Inside one node both backends are the plain all-to-all.
    const GroupPlacement node{8, 8, 1};
    CHECK(hierarchical_all_to_all(s, 8, 128, parallel::FlexBackend::hybridep, node, h) ==
          approx(collective(CollectiveKind::all_to_all, s, node, h).seconds));
  }

  TEST_CASE("Group placement follows rank_order (innermost first)") {
    parallel::Layout l;
    l.tp = 8;
    l.dp = 4;
    GroupPlacement g = place_group(l, ops::CommDim::tp, 8);
    CHECK(g.ranks == 8);
    CHECK(g.ranks_per_node == 8);
    CHECK(g.nodes == 1);
    g = place_group(l, ops::CommDim::dp, 8);  // stride 8: one rank per node
    CHECK(g.ranks == 4);
    CHECK(g.ranks_per_node == 1);
    CHECK(g.nodes == 4);
    l.tp = 2;
    l.cp = 2;
    l.dp = 4;
    g = place_group(l, ops::CommDim::dp_cp, 8);  // ranks {0,2,4,6} on node 0 of 8
    CHECK(g.ranks == 8);
    CHECK(g.ranks_per_node == 4);
    CHECK(g.nodes == 2);
    l.rank_order = "dp-tp-cp-pp";  // DP innermost: the 4 DP ranks share a node
    g = place_group(l, ops::CommDim::dp, 8);
    CHECK(g.ranks_per_node == 4);
    l.pp = 2;
    l.rank_order = "tp-cp-dp-pp";  // PP stride 16 >= 8: neighbours on different nodes
    g = place_group(l, ops::CommDim::pp, 8);
    CHECK(g.nodes == 2);
  }

  TEST_CASE("Hierarchical CP groups: cp_a2a consecutive CP ranks, the ring of cp / cp_a2a ranks cp_a2a apart (Megatron-Core create_hierarchical_groups)") {
    // tp 2, cp 8 on 8-GPU nodes: the CP ranks of TP rank 0 are 0, 2, ..., 14, four per node.
    parallel::Layout l;
    l.tp = 2;
    l.cp = 8;
    l.cp_comm = parallel::CpComm::a2a_p2p;
    auto placed = [&](ops::CommDim dim) {
      const GroupPlacement g = place_group(l, dim, 8);
      return std::array<int, 3>{g.ranks, g.ranks_per_node, g.nodes};
    };
    // All-to-all groups {0, 2}, {4, 6}, ...: inside a node. Ring {0, 4, 8, 12}: two per node.
    l.cp_a2a = 2;
    CHECK(placed(ops::CommDim::cp_a2a) == std::array<int, 3>{2, 2, 1});
    CHECK(placed(ops::CommDim::cp_ring) == std::array<int, 3>{4, 2, 2});
    CHECK(rank_stride(l, ops::CommDim::cp_ring) == 4);
    // cp_a2a = 4: groups {0, 2, 4, 6} fill a node's TP-rank-0 half; the ring {0, 8} crosses.
    l.cp_a2a = 4;
    CHECK(placed(ops::CommDim::cp_a2a) == std::array<int, 3>{4, 4, 1});
    CHECK(placed(ops::CommDim::cp_ring) == std::array<int, 3>{2, 1, 2});
  }

  TEST_CASE("A node's NICs shared by the groups of one dimension (node_nic_seconds)") {
    // DGX A100 with its eight HDR NICs (25 GB/s line rate each) against the same node with
    // one. TP 4, DP 64 on 256 GPUs: every DP group holds 2 GPUs of each of 32 nodes, and the 4
    // DP groups of a node reduce at once.
    hw::Cluster c = cluster("dgx-a100-80gb");
    const CommParams eight = make_comm_params(c, builtin_profile(c));
    parallel::Layout l;
    l.tp = 4;
    l.dp = 64;
    const GroupPlacement g = place_group(l, ops::CommDim::dp, 8);
    REQUIRE(g.ranks_per_node == 2);
    REQUIRE(g.nodes == 32);
    // A node sends 2 x 63/64 of each group's buffer across: 1 GiB x 1.96875 over the 2 GPUs'
    // share of 8 x 25e9 B/s = 2^30 x 1.96875 / 50e9 = 42.278 ms, which NCCL's two NICs per
    // group already price (the bound does not bind).
    CHECK(node_nic_seconds(CollectiveKind::all_reduce, kGiB, g, eight) == approx(42.278e-3).epsilon(1e-4));
    const double nccl_eight = collective(CollectiveKind::all_reduce, kGiB, g, eight).seconds;
    CHECK(nccl_eight > 42.278e-3);
    // One NIC: NCCL's search gives each communicator that NIC whole; the four groups share it,
    // 2 x 25e9 / 8 = 6.25e9 B/s each: 2^30 x 1.96875 / 6.25e9 = 338.22 ms.
    c.inter.nics_per_node = 1;
    const CommParams one = make_comm_params(c, builtin_profile(c));
    CHECK(node_nic_seconds(CollectiveKind::all_reduce, kGiB, g, one) == approx(338.22e-3).epsilon(1e-4));
    CHECK(collective(CollectiveKind::all_reduce, kGiB, g, one).seconds == approx(338.22e-3).epsilon(1e-4));
    // All-gather of the gathered 1 GiB: 63/64 of it, 169.11 ms.
    CHECK(node_nic_seconds(CollectiveKind::all_gather, kGiB, g, one) == approx(169.11e-3).epsilon(1e-4));
    // A cluster fitted to half the inter-node rate (factors.hpp) takes twice as long.
    CommParams half = one;
    half.inter_node_factor = 0.5;
    CHECK(node_nic_seconds(CollectiveKind::all_reduce, kGiB, g, half) == approx(2 * 338.22e-3).epsilon(1e-4));
    // Inside a node, and all-to-alls (priced on one GPU's NIC share already): no bound.
    CHECK(node_nic_seconds(CollectiveKind::all_reduce, kGiB, GroupPlacement{8, 8, 1}, one) == 0.0);
    CHECK(node_nic_seconds(CollectiveKind::all_to_all, kGiB, g, one) == 0.0);
  }

  TEST_CASE("Pods of an oversubscribed fabric (Llama 3's cluster, arXiv 2407.21783 §3.3.1)") {
    // 3,072-GPU pods under full bisection, 1:7 above them; Llama 3's 16K grid TP 8, PP 16,
    // DP 128. One H100 NIC share: 400 Gb/s at 48.5 of 50 GB/s [SIMAI] = 48.5e9 B/s.
    CommParams p = params("dgx-h100");
    p.pods = Pods{3072, 7.0};
    parallel::Layout l;
    l.tp = 8;
    l.pp = 16;
    l.dp = 128;
    // Megatron's order: a stage's DP group is 128 consecutive nodes, inside one pod.
    GroupPlacement g = place_group(l, ops::CommDim::dp, 8, p.pods);
    CHECK(g.ranks_per_pod == 0);
    CHECK(cross_pod_seconds(CollectiveKind::all_gather, kGiB, g, p) == 0.0);
    // Llama 3's order [TP, CP, PP, DP]: DP outermost, ranks 128 apart, 24 of them per pod.
    l.rank_order = "tp-cp-pp-dp";
    g = place_group(l, ops::CommDim::dp, 8, p.pods);
    CHECK(g.ranks_per_pod == 24);
    CHECK(g.nodes == 128);
    // Each pod's 3072 / 24 = 128 rings leave it by one edge each, on 3072 / 7 NICs' worth of
    // uplinks: 1 GiB x 127/128 x 7 / (24 x 48.5e9) = 6.4068 ms, under the ring's own NIC time,
    // so the collective keeps the price it has without pods.
    CHECK(cross_pod_seconds(CollectiveKind::all_gather, kGiB, g, p) == approx(6.4068e-3).epsilon(1e-4));
    CommParams flat = params("dgx-h100");
    CHECK(collective(CollectiveKind::all_gather, kGiB, g, p).seconds ==
          approx(collective(CollectiveKind::all_gather, kGiB, g, flat).seconds));
    // Pods of 64 GPUs, 1:16, DP 512 at TP 8: 8 ranks per pod, the uplinks bind. All-reduce,
    // 1 GiB: 2 x 511/512 x 2^30 x 16 / (8 x 48.5e9) = 88.383 ms.
    p.pods = Pods{64, 16.0};
    l = parallel::Layout{};
    l.tp = 8;
    l.dp = 512;
    g = place_group(l, ops::CommDim::dp, 8, p.pods);
    CHECK(g.ranks_per_pod == 8);
    CHECK(cross_pod_seconds(CollectiveKind::all_reduce, kGiB, g, p) == approx(88.383e-3).epsilon(1e-4));
    CHECK(collective(CollectiveKind::all_reduce, kGiB, g, p).seconds == approx(88.383e-3).epsilon(1e-4));
    // A cluster fitted to half the inter-node rate (factors.hpp) is half as fast above the pods.
    p.inter_node_factor = 0.5;
    CHECK(cross_pod_seconds(CollectiveKind::all_reduce, kGiB, g, p) == approx(2 * 88.383e-3).epsilon(1e-4));
    p.inter_node_factor = 1.0;
    // All-to-all over EP 128 consecutive ranks (expert TP 1), 64 of them per pod, 1:7: half
    // of every buffer leaves the pod at 1/7 of the NIC: 2^30 x 0.5 x 7 / 48.5e9 = 77.487 ms.
    p.pods = Pods{64, 7.0};
    l.ep = 128;
    g = place_group(l, ops::CommDim::ep, 8, p.pods);
    CHECK(g.ranks_per_pod == 64);
    CHECK(cross_pod_seconds(CollectiveKind::all_to_all, kGiB, g, p) == approx(77.487e-3).epsilon(1e-4));
    // A pipeline boundary between pods with a whole 1,024-GPU stage sending at once: each
    // GPU gets 3072 / (7 x 1024) = 0.428571 of its NIC; 32 MiB take 1.6143 ms after latency.
    p.pods = Pods{3072, 7.0};
    const double bytes = 32.0 * 1024 * 1024;
    CHECK(cross_pod_p2p_seconds(bytes, 1024, p) - p.topo.p2p_inter_lat_s == approx(1.6143e-3).epsilon(1e-4));
    // Few senders: the uplinks carry them at the full NIC rate.
    CHECK(cross_pod_p2p_seconds(bytes, 100, p) - p.topo.p2p_inter_lat_s == approx(bytes / 48.5e9));
  }

  TEST_CASE("HSDP replicas are the outer factor of the DP dimension") {
    // torchtitan's mesh (dp_replicate, dp_shard, cp, tp): 16 DP ranks as 4 replicas of 4
    // shards put replicas 4 ranks apart: {0, 4} on node 0, {8, 12} on node 1.
    parallel::Layout l;
    l.dp = 16;
    l.dp_replicate = 4;
    GroupPlacement g = place_group(l, ops::CommDim::dp_replicate, 8);
    CHECK(g.ranks == 4);
    CHECK(g.ranks_per_node == 2);
    CHECK(g.nodes == 2);
    l.dp_replicate = 2;  // 8 apart: one per node
    g = place_group(l, ops::CommDim::dp_replicate, 8);
    CHECK(g.ranks == 2);
    CHECK(g.ranks_per_node == 1);
    CHECK(g.nodes == 2);
  }

  TEST_CASE("Rank strides follow rank_order, an invalid order falls back to Megatron's") {
    parallel::Layout l;
    l.tp = 8;
    l.cp = 2;
    l.dp = 4;
    l.pp = 2;
    // tp-cp-dp-pp: tp 1, cp 8, dp 8·2 = 16, pp 16·4 = 64; dp_cp starts at the inner one, cp.
    CHECK(rank_stride(l, ops::CommDim::tp) == 1);
    CHECK(rank_stride(l, ops::CommDim::cp) == 8);
    CHECK(rank_stride(l, ops::CommDim::dp) == 16);
    CHECK(rank_stride(l, ops::CommDim::pp) == 64);
    CHECK(rank_stride(l, ops::CommDim::dp_cp) == 8);
    l.rank_order = "tp-dp-cp-pp";  // dp 8, cp 8·4 = 32
    CHECK(rank_stride(l, ops::CommDim::dp) == 8);
    CHECK(rank_stride(l, ops::CommDim::cp) == 32);
    CHECK(rank_stride(l, ops::CommDim::dp_cp) == 8);
    l.rank_order = "tp-tp-dp-pp";  // names tp twice: the default order
    CHECK(rank_stride(l, ops::CommDim::pp) == 64);
  }

  TEST_CASE("Measured collective rows override the model") {
    CommParams h = params("dgx-h100");
    h.rows = {CollectiveRow{"all_reduce", 8, 8, 1e6, 20e-6, "", ""},
              CollectiveRow{"all_reduce", 8, 8, 1e8, 400e-6, "", ""}};
    const GroupPlacement node{8, 8, 1};
    // 1e7 B between 1e6 (20 us) and 1e8 (400 us): exp(mean of logs) = sqrt(20 * 400) = 89.44 us.
    const CollectiveEstimate e = collective(CollectiveKind::all_reduce, 1e7, node, h);
    CHECK(e.measured);
    CHECK(e.seconds == approx(89.443e-6).epsilon(1e-4));
    // Beyond the largest row: at its bandwidth.
    CHECK(collective(CollectiveKind::all_reduce, 1e9, node, h).seconds == approx(4e-3));
    // Other ops keep the model.
    CHECK_FALSE(collective(CollectiveKind::all_gather, 1e7, node, h).measured);
  }

  TEST_CASE("A100 NVSwitch node: collectives from the measured table (vTrain AR_GPU LUTs)") {
    // `VIA-Research/vTrain: trace/a100/AR_GPU8_1M_1024M_LUT` (f8dda84), in-place column:
    // 16 MiB 231.0 us, 32 MiB 355.7 us on 8 GPUs.
    const CommParams a = params("dgx-a100-80gb");
    const GroupPlacement node{8, 8, 1};
    const double mib = 1024.0 * 1024.0;
    const CollectiveEstimate row = collective(CollectiveKind::all_reduce, 32 * mib, node, a);
    CHECK(row.measured);
    CHECK(row.seconds == approx(355.7e-6));
    // 24 MiB, log-log between the two rows: 231.0 * (355.7 / 231.0)^log2(1.5) = 297.36 us.
    CHECK(collective(CollectiveKind::all_reduce, 24 * mib, node, a).seconds ==
          approx(297.36e-6).epsilon(1e-4));
    // Two GPUs, 32 MiB: 229.0 us (AR_GPU2); NCCL's model alone gives 155 us there.
    CHECK(collective(CollectiveKind::all_reduce, 32 * mib, GroupPlacement{2, 2, 1}, a).seconds ==
          approx(229.0e-6));
    // Below the table (1 MiB, 92.2 us on 8 GPUs): NCCL's model, capped at that row's time.
    // 8 B: Ring/LL, 15.0 us latency (see the hand computation above) + 8 B at 50.1 GB/s.
    const CollectiveEstimate tiny = collective(CollectiveKind::all_reduce, 8.0, node, a);
    CHECK_FALSE(tiny.measured);
    CHECK(tiny.seconds == approx(15.0e-6).epsilon(1e-3));
    CommParams slow = a;
    slow.topo.nvlink_GBps = 0.01;  // a model far slower than the smallest row: the cap holds
    const CollectiveEstimate capped = collective(CollectiveKind::all_reduce, 0.5 * mib, node, slow);
    CHECK(capped.measured);
    CHECK(capped.seconds == approx(92.2e-6));
    // All-gather / reduce-scatter at the all-reduce's busbw at the same size [assumed]: half.
    CHECK(collective(CollectiveKind::all_gather, 32 * mib, node, a).seconds == approx(177.85e-6));
    CHECK(collective(CollectiveKind::reduce_scatter, 32 * mib, node, a).seconds == approx(177.85e-6));
    // Across nodes, and on a node whose NVLink differs from the measured one: NCCL's model.
    CHECK_FALSE(collective(CollectiveKind::all_reduce, 32 * mib, GroupPlacement{16, 8, 2}, a).measured);
    hw::Cluster fast = cluster("dgx-a100-80gb");
    fast.intra.bandwidth_Bps *= 2;
    const CommParams f = make_comm_params(fast, builtin_profile(fast));
    CHECK_FALSE(collective(CollectiveKind::all_reduce, 32 * mib, node, f).measured);
    // H100 has no such table.
    CHECK_FALSE(collective(CollectiveKind::all_reduce, 32 * mib, node, params("dgx-h100")).measured);
  }

  TEST_CASE("P2P at the slower link of the pair") {
    const CommParams h = params("dgx-h100");
    // NVLink pair: 0.88 * 450 GB/s = 396 GB/s (nvbandwidth on H200) + 0.93625 us.
    CHECK(p2p_seconds(396e6, true, h) == approx(1e-3 + 0.93625e-6));
    // Across nodes: ConnectX-7 48.5 GB/s + 5 us.
    CHECK(p2p_seconds(48.5e6, false, h) == approx(1e-3 + 5e-6));
  }
}

TEST_SUITE("costmodel") {
  TEST_CASE("NVL72: one NCCL node of 72 GPUs on NVLink 5 (src/graph/topo.h, search.cc)") {
    hw::Cluster rack = cluster("gb200-nvl72");
    rack.nodes = 18;
    const CommParams p = make_comm_params(rack, builtin_profile(rack));
    // SM100_NVLINK_BW 40.1 GB/s x 18 NVLink 5 links of 50 GB/s (900 GB/s per direction).
    CHECK(p.topo.nvlink_GBps == approx(721.8));
    // The whole rack is the NCCL node, with the NICs of its 18 trays (one per GPU).
    CHECK(p.topo.gpus_per_node == 72);
    CHECK(p.topo.nics_per_node == 72);
    // sm100SpeedArrayIntra: 8 channels at 90 (720 of 721.8) beat 9 x 80, 12 x 60, 14 x 50;
    // duplicated (90 >= 50) -> 16 at 45; 50 fits only 14 channels, so pass 2 keeps 45.
    const GraphInfo ring = ring_graph(p.topo, 72, 1);
    CHECK(ring.channels == 16);
    CHECK(ring.bw_intra_GBps == approx(45.0));
    // NVLS: 16 heads (NCCL_NVLS_NCHANNELS), the fastest intra speed with 16 x s <= 721.8: 40.
    const GraphInfo nvls = nvls_graph(p.topo, 72, 1);
    CHECK(nvls.channels == 16);
    CHECK(nvls.bw_intra_GBps == approx(40.0));
  }

  TEST_CASE("NVL72: a 72-GPU TP x CP x DP layout prices its collectives on NVLink, by hand") {
    hw::Cluster rack = cluster("gb200-nvl72");
    rack.nodes = 18;
    const CommParams p = make_comm_params(rack, builtin_profile(rack));
    parallel::Layout l;
    l.tp = 4;
    l.cp = 2;
    l.dp = 9;
    l.pp = 1;
    // Every group stays in the 72-GPU domain although it spans several 4-GPU trays.
    for (const auto dim : {ops::CommDim::tp, ops::CommDim::cp, ops::CommDim::dp_cp}) {
      const GroupPlacement g = place_group(l, dim, rack.nvlink_domain());
      CHECK(g.nodes == 1);
      CHECK(g.ranks_per_node == g.ranks);
    }
    CHECK_FALSE(straddling_dim(l, rack.nvlink_domain()));
    // TP all-gather of 64 MiB over 4 ranks, ring / Simple: 16 channels x 45 GB/s = 720 GB/s
    // bus, x n/(n-1) = 4/3 -> 960 GB/s algorithm bandwidth; latency 8.4 us base + 3 steps x
    // 3.4 us NVLink = 18.6 us (tuning.cc v2.30.7). NVLS (4 heads at 90 GB/s, efficiency 0.74,
    // x 3/4 x 3/4) gives 150 GB/s and loses.
    const double bytes = 64.0 * 1024 * 1024;
    const GroupPlacement tp = place_group(l, ops::CommDim::tp, rack.nvlink_domain());
    const CollectiveEstimate ag = collective(CollectiveKind::all_gather, bytes, tp, p);
    CHECK(ag.algo == NcclAlgo::ring);
    CHECK(ag.proto == NcclProto::simple);
    CHECK(ag.seconds == approx(18.6e-6 + bytes / 960e9).epsilon(1e-9));
    // The DP x CP gradient all-reduce over 18 ranks on NVLink: NVLS, 16 heads at 40 GB/s x 0.74
    // x 15/16 x 2 = 55.5 per channel, 888 GB/s bus, x n/nsteps = 18/34 algorithm bandwidth;
    // latency 25 us (NVLS Simple on NVLink).
    const GroupPlacement dp = place_group(l, ops::CommDim::dp_cp, rack.nvlink_domain());
    const CollectiveEstimate ar = collective(CollectiveKind::all_reduce, kGiB, dp, p);
    CHECK(ar.algo == NcclAlgo::nvls);
    CHECK(ar.seconds == approx(25e-6 + kGiB / (888e9 * 18.0 / 34.0)).epsilon(1e-9));
    // Were the trays not one NVLink domain (4 GPUs each, MNNVL off), the same group would
    // cross 5 ConnectX-7 NICs and take several times longer.
    hw::Cluster trays = rack;
    trays.intra.domain_gpus = 4;
    const CommParams q = make_comm_params(trays, builtin_profile(trays));
    const GroupPlacement dp4 = place_group(l, ops::CommDim::dp_cp, trays.nvlink_domain());
    CHECK(dp4.nodes > 1);
    CHECK(collective(CollectiveKind::all_reduce, kGiB, dp4, q).seconds > 3 * ar.seconds);
  }

  TEST_CASE("NVL72 all-reduce of the whole rack near the published 835-847 GB/s busbw") {
    hw::Cluster rack = cluster("gb200-nvl72");
    rack.nodes = 18;
    const CommParams p = make_comm_params(rack, builtin_profile(rack));
    const double busbw = collective(CollectiveKind::all_reduce, 8 * kGiB, GroupPlacement{72, 72, 1}, p).busbw_Bps;
    // coreweave/nccl-tests PR #43, 72 GB200, 8 GiB: 834.6-846.8 GB/s; the model within 7 %.
    CHECK(busbw / 1e9 > 835 * 0.93);
    CHECK(busbw / 1e9 < 847 * 1.07);
  }

  TEST_CASE("TP / CP groups that straddle NVLink domains are named") {
    parallel::Layout l;
    l.tp = 16;
    l.cp = 1;
    l.dp = 9;
    l.pp = 1;
    // 72 = 4.5 x 16: the fifth TP group spans ranks 64..79 across two racks.
    CHECK(straddling_dim(l, 72) == ops::CommDim::tp);
    CHECK_FALSE(straddling_dim(l, 64));
    l.tp = 8;
    l.cp = 2;  // TP x CP block of 16 on a 72-GPU domain
    CHECK(straddling_dim(l, 72) == ops::CommDim::cp);
    const auto issue = domain_issue(l, 72);
    REQUIRE(issue);
    CHECK(issue->key == "cp");
    CHECK(issue->rule == "straddles-domain");
    // On 8-GPU nodes a CP group of stride 8 puts each member in its own node: alike.
    CHECK_FALSE(straddling_dim(l, 8));
  }
}
