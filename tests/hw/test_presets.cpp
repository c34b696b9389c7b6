#include <doctest/doctest.h>

#include <set>
#include <string>

#include "tetra/hw/presets.hpp"
#include "tetra/hw/units.hpp"

using namespace tetra::hw;

TEST_SUITE("hw") {
  TEST_CASE("GPU presets: datasheet numbers (reference/hardware.md section 1)") {
    REQUIRE(gpu_presets().size() == 5);
    const auto a40 = find_gpu_preset("a100-sxm-40gb");
    const auto a80 = find_gpu_preset("a100-sxm-80gb");
    const auto h80 = find_gpu_preset("h100-sxm-80gb");
    const auto h94 = find_gpu_preset("h100-sxm-94gb");
    const auto h200 = find_gpu_preset("h200-sxm-141gb");
    REQUIRE(a40);
    REQUIRE(a80);
    REQUIRE(h80);
    REQUIRE(h94);
    REQUIRE(h200);
    // Device-reported totals (nvidia-smi MiB): 40960, 81920, 81559, 143771.
    CHECK(a40->memory_bytes == 40 * kGiB);
    CHECK(a80->memory_bytes == 80 * kGiB);
    CHECK(h80->memory_bytes == 81559 * kMiB);
    CHECK(h94->memory_bytes == 94e9);
    CHECK(h200->memory_bytes == 143771 * kMiB);
    // A100 datasheet 312 TFLOP/s BF16 dense; H100/H200 989.
    CHECK(a40->bf16_peak_flops == 312e12);
    CHECK(a80->bf16_peak_flops == 312e12);
    CHECK(h80->bf16_peak_flops == 989e12);
    CHECK(h200->bf16_peak_flops == 989e12);
    CHECK(a40->hbm_bandwidth_Bps == doctest::Approx(1.555e12));
    CHECK(a80->hbm_bandwidth_Bps == doctest::Approx(2.039e12));
    CHECK(h80->hbm_bandwidth_Bps == doctest::Approx(3.35e12));
    CHECK(h200->hbm_bandwidth_Bps == doctest::Approx(4.8e12));
    CHECK(a80->sms == 108);
    CHECK(h80->sms == 132);
    CHECK(a80->compute_capability == 80);
    CHECK(h200->compute_capability == 90);
    CHECK_FALSE(find_gpu_preset("v100"));
  }

  TEST_CASE("cluster presets: 8 GPUs, NVSwitch, rails") {
    REQUIRE(cluster_presets().size() == 4);
    std::set<std::string> names;
    for (const auto& c : cluster_presets()) {
      CAPTURE(c.name);
      names.insert(c.name);
      CHECK(c.gpus_per_node == 8);
      CHECK(c.nodes == 1);
      CHECK(c.intra.kind == IntraKind::nvswitch);
      CHECK(c.inter.nics_per_node == 8);
      CHECK(c.intra.latency_s > 0);
      CHECK(c.inter.latency_s > 0);
      CHECK(c.total_gpus() == 8);
    }
    CHECK(names.size() == 4);
    const auto a = find_cluster_preset("dgx-a100-80gb");
    const auto h = find_cluster_preset("dgx-h100");
    const auto h2 = find_cluster_preset("hgx-h200");
    const auto a4 = find_cluster_preset("dgx-a100-40gb");
    REQUIRE(a);
    REQUIRE(h);
    REQUIRE(h2);
    REQUIRE(a4);
    CHECK(a->gpu.name == "a100-sxm-80gb");
    CHECK(a4->gpu.name == "a100-sxm-40gb");
    CHECK(h->gpu.name == "h100-sxm-80gb");
    CHECK(h2->gpu.name == "h200-sxm-141gb");
    // NVLink3 300 GB/s, NVLink4 450 GB/s per direction (hardware.md section 1).
    CHECK(a->intra.bandwidth_Bps == 300e9);
    CHECK(h->intra.bandwidth_Bps == 450e9);
    CHECK_FALSE(a->intra.nvls);
    CHECK(h->intra.nvls);
    CHECK(h2->intra.nvls);
    // 200 Gb/s HDR = 25 GB/s, 400 Gb/s NDR = 50 GB/s per NIC (NCCL speed_Mbps / 8000).
    CHECK(a->inter.nic_bandwidth_Bps == 25e9);
    CHECK(h->inter.nic_bandwidth_Bps == 50e9);
    CHECK_FALSE(find_cluster_preset("dgx-b200"));
  }

  TEST_CASE("IntraKind spellings round-trip") {
    for (IntraKind k : {IntraKind::nvswitch, IntraKind::nvlink_mesh, IntraKind::pcie}) {
      CHECK(parse_intra_kind(to_string(k)) == k);
    }
    CHECK(std::string(to_string(IntraKind::nvlink_mesh)) == "nvlink-mesh");
    CHECK_FALSE(parse_intra_kind("infiniband"));
  }
}
