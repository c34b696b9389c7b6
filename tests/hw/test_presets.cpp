#include <doctest/doctest.h>
#include "support/approx.hpp"

#include <set>
#include <string>

#include "tetra/hw/presets.hpp"
#include "tetra/base/units.hpp"

using tetra::test::approx;
using namespace tetra::hw;
using tetra::units::kGiB;
using tetra::units::kMiB;

TEST_SUITE("hw") {
  TEST_CASE("GPU presets: datasheet numbers (NVIDIA A100 / H100 / H200 datasheets)") {
    REQUIRE(gpu_presets().size() == 9);
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
    // Device-reported totals (nvidia-smi MiB): 40536, 81920, 81559, 143771.
    CHECK(a40->memory_bytes == 40536 * kMiB);
    CHECK(a80->memory_bytes == 80 * kGiB);
    CHECK(h80->memory_bytes == 81559 * kMiB);
    CHECK(h94->memory_bytes == 94e9);
    CHECK(h200->memory_bytes == 143771 * kMiB);
    // A100 datasheet 312 TFLOP/s BF16 dense; H100/H200 989.
    CHECK(a40->bf16_peak_flops == 312e12);
    CHECK(a80->bf16_peak_flops == 312e12);
    CHECK(h80->bf16_peak_flops == 989e12);
    CHECK(h200->bf16_peak_flops == 989e12);
    CHECK(a40->hbm_bandwidth_Bps == approx(1.555e12));
    CHECK(a80->hbm_bandwidth_Bps == approx(2.039e12));
    CHECK(h80->hbm_bandwidth_Bps == approx(3.35e12));
    CHECK(h200->hbm_bandwidth_Bps == approx(4.8e12));
    CHECK(a80->sms == 108);
    CHECK(h80->sms == 132);
    CHECK(a80->compute_capability == 80);
    CHECK(h200->compute_capability == 90);
    CHECK_FALSE(find_gpu_preset("v100"));
    for (const auto& g : gpu_presets()) {
      CAPTURE(g.name);
      CHECK_FALSE(g.source.empty());
    }
  }

  TEST_CASE("Blackwell GPU presets: dense peaks are half the printed sparse rates") {
    const auto b200 = find_gpu_preset("b200");
    const auto b300 = find_gpu_preset("b300");
    const auto gb200 = find_gpu_preset("gb200");
    const auto gb300 = find_gpu_preset("gb300");
    REQUIRE(b200);
    REQUIRE(b300);
    REQUIRE(gb200);
    REQUIRE(gb300);
    // DGX B200 datasheet, per 8 GPUs: FP8 72 PF sparse -> 4.5 PF dense per GPU; FP4 72 PF dense
    // -> 9 PF; BF16 36 PF sparse (HGX B200) -> 2.25 PF; 64 TB/s -> 8 TB/s.
    CHECK(b200->bf16_peak_flops == 2250e12);
    CHECK(b200->fp8_peak_flops == 4500e12);
    CHECK(b200->fp4_peak_flops == 9000e12);
    CHECK(b200->hbm_bandwidth_Bps == 8e12);
    // GB200 NVL72, per 72 GPUs: BF16 360, FP8 720, FP4 1,440 PF sparse -> 2.5 / 5 / 10 PF dense.
    CHECK(gb200->bf16_peak_flops == 360e15 / 72 / 2);
    CHECK(gb200->fp8_peak_flops == 720e15 / 72 / 2);
    CHECK(gb200->fp4_peak_flops == 1440e15 / 72 / 2);
    // HGX B300: FP4 105 PF dense per 8 GPUs; Blackwell Ultra blog: 15 PF dense NVFP4 (GB300).
    CHECK(b300->fp4_peak_flops == approx(105e15 / 8));
    CHECK(gb300->fp4_peak_flops == 15000e12);
    // Device-reported memory (nvidia-smi MiB): 183359, 275040, 189471, 284208.
    CHECK(b200->memory_bytes == 183359 * kMiB);
    CHECK(b300->memory_bytes == 275040 * kMiB);
    CHECK(gb200->memory_bytes == 189471 * kMiB);
    CHECK(gb300->memory_bytes == 284208 * kMiB);
    // Compute capability 10.0 (B200, GB200) and 10.3 (B300, GB300).
    CHECK(b200->compute_capability == 100);
    CHECK(gb200->compute_capability == 100);
    CHECK(b300->compute_capability == 103);
    CHECK(gb300->compute_capability == 103);
    CHECK(b200->sms == 148);
  }

  TEST_CASE("NVL72 presets: 4-GPU trays in one 72-GPU NVLink domain") {
    for (const char* name : {"gb200-nvl72", "gb300-nvl72"}) {
      CAPTURE(name);
      const auto c = find_cluster_preset(name);
      REQUIRE(c);
      CHECK(c->gpus_per_node == 4);
      CHECK(c->nvlink_domain() == 72);
      // NVLink 5: 1.8 TB/s bidirectional = 900 GB/s per direction per GPU.
      CHECK(c->intra.bandwidth_Bps == 900e9);
      CHECK(c->inter.nics_per_node == 4);
      CHECK(c->nics_per_domain() == 72);
    }
    CHECK(find_cluster_preset("gb200-nvl72")->inter.nic_bandwidth_Bps == 400e9 / 8);
    CHECK(find_cluster_preset("gb300-nvl72")->inter.nic_bandwidth_Bps == 800e9 / 8);
    CHECK(find_cluster_preset("dgx-b300")->inter.nic_bandwidth_Bps == 800e9 / 8);
    CHECK(find_cluster_preset("dgx-b200")->nvlink_domain() == 8);
  }

  TEST_CASE("NVLink domains tile the cluster, a job fills racks evenly") {
    Cluster c = *find_cluster_preset("gb200-nvl72");
    c.nodes = 18;  // one full rack
    CHECK_FALSE(domain_problem(c));
    c.nodes = 16;  // 64 GPUs of one rack
    CHECK_FALSE(domain_problem(c));
    c.nodes = 128;  // 512 GPUs: 7.1 racks of 72
    const auto bad = domain_problem(c);
    REQUIRE(bad);
    CHECK(bad->find("e.g. 64") != std::string::npos);
    c.intra.domain_gpus = 64;
    CHECK_FALSE(domain_problem(c));
    c.intra.domain_gpus = 66;  // not whole trays of 4
    REQUIRE(domain_problem(c));
    CHECK(domain_problem(c)->find("whole nodes") != std::string::npos);
    // The largest multiple of 4 that divides the job and fits in 72.
    const Cluster rack = *find_cluster_preset("gb200-nvl72");
    CHECK(job_domain(rack, 256) == 64);
    CHECK(job_domain(rack, 144) == 72);
    CHECK(job_domain(rack, 8) == 8);
    CHECK(job_domain(rack, 96) == 48);
    CHECK(job_domain(*find_cluster_preset("dgx-h100"), 64) == 8);
  }

  TEST_CASE("cluster presets: NVSwitch, one NIC per GPU") {
    REQUIRE(cluster_presets().size() == 8);
    std::set<std::string> names;
    for (const auto& c : cluster_presets()) {
      CAPTURE(c.name);
      names.insert(c.name);
      CHECK_FALSE(c.source.empty());
      CHECK(c.nodes == 1);
      CHECK(c.intra.kind == IntraKind::nvswitch);
      CHECK(c.inter.nics_per_node == c.gpus_per_node);
      CHECK(c.intra.latency_s > 0);
      CHECK(c.inter.latency_s > 0);
      CHECK(c.total_gpus() == c.gpus_per_node);
    }
    CHECK(names.size() == 8);
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
    // NVLink3 300 GB/s, NVLink4 450 GB/s per direction (stas00/ml-engineering network/README.md;
    // NVIDIA/nccl-tests issue #212).
    CHECK(a->intra.bandwidth_Bps == 300e9);
    CHECK(h->intra.bandwidth_Bps == 450e9);
    CHECK_FALSE(a->intra.nvls);
    CHECK(h->intra.nvls);
    CHECK(h2->intra.nvls);
    // 200 Gb/s HDR = 25 GB/s, 400 Gb/s NDR = 50 GB/s per NIC (NCCL speed_Mbps / 8000).
    CHECK(a->inter.nic_bandwidth_Bps == 25e9);
    CHECK(h->inter.nic_bandwidth_Bps == 50e9);
    CHECK_FALSE(find_cluster_preset("dgx-v100"));
  }

  TEST_CASE("IntraKind spellings round-trip") {
    for (IntraKind k : {IntraKind::nvswitch, IntraKind::nvlink_mesh, IntraKind::pcie}) {
      CHECK(parse_intra_kind(to_string(k)) == k);
    }
    CHECK(std::string(to_string(IntraKind::nvlink_mesh)) == "nvlink-mesh");
    CHECK_FALSE(parse_intra_kind("infiniband"));
  }
}

TEST_SUITE("hw") {
  TEST_CASE("tensor-core throughput under a power limit, from NVIDIA's MLPerf MaxQ runs") {
    // mlcommons/inference_results_v4.1 closed/NVIDIA, 8x H200 SXM (700 W): MaxQ at 350 / 450 /
    // 500 W keeps 13096.6 / 20086.1 (GPT-J), 13.202 / 17.4186 (SDXL), 25262.1 / 31302.7
    // (Llama-2-70B) of the MaxP throughput: (P / 700)^0.625.
    tetra::hw::Gpu g = *tetra::hw::find_gpu_preset("h100-sxm-94gb");
    CHECK(g.rated_power_w == 700.0);
    CHECK(tetra::hw::sustained_clock_share(g) == 1.0);  // no limit set: the rating
    g.power_limit_w = 500.0;
    // (500/700)^0.625 = exp(0.625 ln 0.714286) = exp(0.625 x -0.336472) = exp(-0.210295) = 0.810345
    CHECK(tetra::hw::sustained_clock_share(g) == approx(0.810345).epsilon(1e-5));
    CHECK(tetra::hw::sustained_clock_share(g) == approx(25262.1 / 31302.7).epsilon(0.01));
    g.power_limit_w = 350.0;  // 0.5^0.625 = 0.648420; GPT-J measured 0.6520
    CHECK(tetra::hw::sustained_clock_share(g) == approx(0.648420).epsilon(1e-5));
    CHECK(tetra::hw::sustained_clock_share(g) == approx(13096.6 / 20086.1).epsilon(0.01));
    g.power_limit_w = 450.0;  // (9/14)^0.625 = 0.758767; SDXL measured 0.7579
    CHECK(tetra::hw::sustained_clock_share(g) == approx(13.202 / 17.4186).epsilon(0.01));
    // The same law on the H100: MLPerf Inference v4.0 DGX-H100 Llama-2-70B-99.9 offline at
    // 450 W kept 17561.6 / 21805.8 = 0.805 (server 0.753), 0.759 predicted.
    g.power_limit_w = 900.0;  // above the rating: no faster than rated
    CHECK(tetra::hw::sustained_clock_share(g) == 1.0);
  }
}
