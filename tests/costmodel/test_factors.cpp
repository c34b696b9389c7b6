// Cluster factors (costmodel/include/tetra/costmodel/factors.hpp, fit/README.md): each factor
// divides the time of its part of the cost model, t' = t / f, so f is the speed relative to
// the model. Checked by hand against the numbers the unfactored tests derive from their
// sources.
#include <doctest/doctest.h>
#include "support/approx.hpp"

#include "tetra/costmodel/builtin_profiles.hpp"
#include "tetra/costmodel/collective.hpp"
#include "tetra/costmodel/compute.hpp"
#include "tetra/costmodel/factors.hpp"
#include "tetra/hw/presets.hpp"

using tetra::test::approx;
using namespace tetra;
using namespace tetra::costmodel;
using ops::CollectiveKind;

namespace {

CostParams costs(const char* name) {
  auto c = hw::find_cluster_preset(name);
  REQUIRE(c);
  return cost_params(*c);
}

}  // namespace

TEST_SUITE("costmodel") {
  TEST_CASE("Factors: names, neutral values, get and set") {
    for (Factor f : kFactors) {
      const auto back = parse_factor(to_string(f));
      REQUIRE(back);
      CHECK(*back == f);
      Factors x;
      CHECK(x.get(f) == Factors::neutral(f));
      x.set(f, 0.5);
      CHECK(x.get(f) == 0.5);
    }
    CHECK_FALSE(parse_factor("tp"));
    CHECK(Factors::neutral(Factor::step_overhead) == 0.0);
    CHECK(Factors::neutral(Factor::inter_node) == 1.0);
  }

  TEST_CASE("Factors divide compute times by kind (t' = t / f)") {
    CostParams a = costs("dgx-a100-80gb");
    Factors f;
    f.memory_bound = 0.5;
    f.gemm = 0.8;
    f.attention = 1.25;
    apply_factors(f, a);
    // Memory-bound, A100 80GB: 1 GB at the gpu-stream triad 1794 GB/s = 557.41 us + 2 us
    // launch = 559.41 us (test_compute.cpp); at half the speed 1118.82 us.
    ops::Op adam;
    adam.kind = ops::OpKind::memory_bound;
    adam.mem = ops::MemoryKernel::adam;
    adam.bytes = 1e9;
    CHECK(op_seconds(adam, a.compute) == approx(1118.82e-6).epsilon(1e-4));
    // GEMM: the roofline over 0.8, at the pace of the slowest of the node's 8 GPUs
    // (slowest_gpu_factor, test_compute.cpp).
    const double slowest = a.compute.slowest_gpu_factor;
    CHECK(slowest == approx(1.0143420).epsilon(1e-6));
    ops::Op gemm;
    gemm.kind = ops::OpKind::gemm;
    gemm.m = 8192;
    gemm.n = 8192;
    gemm.k = 8192;
    CHECK(op_seconds(gemm, a.compute) ==
          approx(gemm_seconds(GemmShape{8192, 8192, 8192, 2, 1}, a.compute) / 0.8 * slowest));
    // Attention: FA2 on A100 over 1.25.
    ops::Op attn;
    attn.kind = ops::OpKind::attention;
    attn.attn = ops::AttentionShape{parallel::AttentionKernel::flash2, true, 1, 4096, 4096, 32, 8, 128};
    CHECK(op_seconds(attn, a.compute) == approx(attention_seconds(attn.attn, false, a.compute) / 1.25 * slowest));
    // Communication ops take no compute time, whatever the factors.
    ops::Op ar;
    ar.kind = ops::OpKind::collective;
    CHECK(op_seconds(ar, a.compute) == 0.0);
  }

  TEST_CASE("Factors divide transfer times by link class: intra_node inside a node, inter_node across") {
    CostParams a = costs("dgx-a100-80gb");
    const double mib = 1024.0 * 1024.0;
    const GroupPlacement node{8, 8, 1};
    const GroupPlacement two_nodes{16, 8, 2};
    const double across = collective(CollectiveKind::all_reduce, 32 * mib, two_nodes, a.comm).seconds;
    const double pair = p2p_seconds(100e6, false, a.comm);
    Factors f;
    f.intra_node = 0.5;
    f.inter_node = 0.25;
    apply_factors(f, a);
    // vTrain's measured 8-GPU all-reduce of 32 MiB, 355.7 us (test_collective.cpp), at half
    // the speed: 711.4 us; the busbw reported falls with it.
    const CollectiveEstimate e = collective(CollectiveKind::all_reduce, 32 * mib, node, a.comm);
    CHECK(e.seconds == approx(711.4e-6));
    CHECK(e.busbw_Bps == approx(32 * mib / 711.4e-6 * 2 * 7 / 8));
    // Across two nodes: NCCL's model over 0.25.
    CHECK(collective(CollectiveKind::all_reduce, 32 * mib, two_nodes, a.comm).seconds ==
          approx(4 * across));
    // A NIC transfer: ConnectX-6 at its effective 23.5 GB/s (SimAI), 100 MB, four times slower;
    // a send_recv collective across nodes is the same transfer, divided once.
    CHECK(p2p_seconds(100e6, false, a.comm) == approx(4 * pair));
    CHECK(collective(CollectiveKind::send_recv, 100e6, GroupPlacement{2, 1, 2}, a.comm).seconds ==
          approx(4 * pair));
    // An NVLink pair at half speed.
    CostParams plain = costs("dgx-a100-80gb");
    CHECK(p2p_seconds(100e6, true, a.comm) == approx(2 * p2p_seconds(100e6, true, plain.comm)));
  }

  TEST_CASE("The host factor reaches the compute parameters, leaving the kernels' prices alone") {
    // The host's speed divides the host's own costs (HostCost, the data loader), which the
    // simulator reads from host_factor (tests/sim/test_simulator.cpp); no kernel's price moves.
    const CostParams plain = costs("dgx-h100");
    CostParams a = plain;
    Factors f;
    f.host = 0.5;
    apply_factors(f, a);
    CHECK(a.compute.host_factor == 0.5);
    CHECK(a.compute.host_kernel_s == plain.compute.host_kernel_s);
    ops::Op norm;
    norm.kind = ops::OpKind::memory_bound;
    norm.mem = ops::MemoryKernel::rmsnorm;
    norm.bytes = 1e8;
    CHECK(op_seconds(norm, a.compute) == op_seconds(norm, plain.compute));
  }

  TEST_CASE("Neutral factors change no price") {
    const CostParams plain = costs("dgx-h100");
    CostParams a = plain;
    apply_factors(Factors{}, a);
    const GroupPlacement g{64, 8, 8};
    CHECK(collective(CollectiveKind::all_reduce, 1e9, g, a.comm).seconds ==
          collective(CollectiveKind::all_reduce, 1e9, g, plain.comm).seconds);
    ops::Op norm;
    norm.kind = ops::OpKind::memory_bound;
    norm.mem = ops::MemoryKernel::rmsnorm;
    norm.bytes = 1e8;
    CHECK(op_seconds(norm, a.compute) == op_seconds(norm, plain.compute));
  }
}
