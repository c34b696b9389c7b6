// Expert-parallel group placement (costmodel::place_group with CommDim::ep / expert_dp),
// following Megatron-Core parallel_state.py: the expert rank generator orders
// expert-tensor x expert x expert-data over the tp x cp x dp ranks of a pipeline stage, so
// with tp-cp-dp-pp ranks 0..7 and etp = 2, ep = 4 the EP group of rank 0 is {0, 2, 4, 6} and
// its expert-DP group {0, 8} (stride ep*etp = 8).
#include <doctest/doctest.h>
#include "support/approx.hpp"

#include "tetra/costmodel/collective.hpp"
#include "tetra/parallel/layout.hpp"

using tetra::test::approx;
using namespace tetra;

TEST_SUITE("costmodel") {
  TEST_CASE("expert placement: EP and expert-DP groups of a small example") {
    parallel::Layout l;
    l.tp = 2;
    l.dp = 8;
    l.ep = 4;
    l.etp = 2;
    REQUIRE(l.edp() == 2);  // tp*dp/(ep*etp) = 16/8
    CHECK(costmodel::rank_stride(l, ops::CommDim::ep) == 2);
    CHECK(costmodel::rank_stride(l, ops::CommDim::expert_dp) == 8);
    // 4-GPU nodes: {0, 2} on node 0, {4, 6} on node 1.
    const auto ep4 = costmodel::place_group(l, ops::CommDim::ep, 4);
    CHECK(ep4.ranks == 4);
    CHECK(ep4.ranks_per_node == 2);
    CHECK(ep4.nodes == 2);
    // 8-GPU nodes: the whole group {0, 2, 4, 6} on one node.
    const auto ep8 = costmodel::place_group(l, ops::CommDim::ep, 8);
    CHECK(ep8.ranks_per_node == 4);
    CHECK(ep8.nodes == 1);
    // Expert DP {0, 8}: two nodes of 8.
    const auto edp = costmodel::place_group(l, ops::CommDim::expert_dp, 8);
    CHECK(edp.ranks == 2);
    CHECK(edp.ranks_per_node == 1);
    CHECK(edp.nodes == 2);
    // etp = 1: EP ranks are neighbours {0, 1, 2, 3}.
    l.etp = 1;
    const auto ep_dense = costmodel::place_group(l, ops::CommDim::ep, 4);
    CHECK(ep_dense.ranks_per_node == 4);
    CHECK(ep_dense.nodes == 1);
  }

  TEST_CASE("expert placement: all-to-all across nodes is slower than inside one") {
    // NCCL all-to-all is n-1 grouped ncclSend/ncclRecv (nccl-tests alltoall.cu): a group
    // that leaves the NVLink domain pushes (n - ppn)/n of each buffer through the NICs.
    costmodel::CommParams p;
    p.topo.gpus_per_node = 8;
    p.topo.nvlink_GBps = 450;
    p.topo.nic_GBps = 50;
    p.topo.nics_per_node = 8;
    const double bytes = 64.0 * 1024 * 1024;
    const auto inside = costmodel::collective(ops::CollectiveKind::all_to_all, bytes, {8, 8, 1}, p);
    const auto across = costmodel::collective(ops::CollectiveKind::all_to_all, bytes, {16, 8, 2}, p);
    CHECK(across.seconds > inside.seconds);
    // Across: busbw = min(0.8 * 450, 50 * (16-1)/(16-8)) = 93.75 GB/s; time ~ S (15/16) / busbw.
    CHECK(across.seconds == approx(bytes * 15.0 / 16.0 / 93.75e9).epsilon(0.05));
  }
}
