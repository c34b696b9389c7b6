// Built-in GPUs and nodes. Sources (reference/hardware.md section 1):
//  [A100-DS]  NVIDIA A100 Tensor Core GPU datasheet: BF16 312 TFLOP/s dense, 40 GB HBM2
//             1,555 GB/s, 80 GB HBM2e 2,039 GB/s, NVLink 600 GB/s bidirectional.
//  [H100-DS]  NVIDIA H100 Tensor Core GPU datasheet (SXM): BF16 989 TFLOP/s dense (1,979 with
//             sparsity), FP8 1,979 TFLOP/s dense (3,958 with sparsity), 80 GB HBM3 3.35 TB/s, NVLink 900 GB/s bidirectional.
//  [H200-DS]  NVIDIA H200 datasheet / SC23 announcement: 141 GB HBM3e, 4.8 TB/s.
//  [SMS]      A100 108 SMs (NVIDIA Matrix Multiplication Background User's Guide);
//             H100 SXM5 132 SMs (NVIDIA H100 Tensor Core GPU architecture whitepaper).
//  [NCCL-212] NVIDIA/nccl-tests issue #212, maintainer comment: NVLink4 450 GB/s per direction.
//  [MLE-NET]  stas00/ml-engineering: network/README.md: A100 NVLink "300 GBps unidirectional".
//  [DGX]      GTC24 S62129 / GTC25 S72583 slides as reproduced in stas00/ml-engineering:
//             DGX A100 8x 200 Gb/s HDR, DGX H100 8x 400 Gb/s NDR, NVLink SHARP on H100 NVSwitch.
//  [ASTRA]    astra-sim/astra-sim: examples/network/analytical/HGX-H100-validated.yml:
//             one NVSwitch dimension at 936.25 ns link latency.
//
// Memory capacity. Vendor labels ("40GB", "80GB", "141GB") are nominal and do not pin the
// unit (hardware.md "Capacities"). tetrasim uses the total the device reports (nvidia-smi
// "Total" memory, MiB), which is what the framework's allocator can see:
//   A100-SXM4-40GB  40960 MiB  (= 40 GiB exactly)
//   A100-SXM4-80GB  81920 MiB  (= 80 GiB exactly)
//   H100 80GB HBM3  81559 MiB  (= 79.65 GiB)
//   H200            143771 MiB (= 140.40 GiB)
// For the H100 94GB (TSUBAME 4.0 nodes) no device-reported total is confirmed; the label is
// taken literally as 94 GB = 94e9 bytes (87.54 GiB) [assumed]. The H100 NVL (a different
// board with the same 94 GB label) reports 95830 MiB; a user who knows the real figure sets
// `memory` in [cluster.gpu].

#include "tetra/hw/presets.hpp"

#include <array>

#include "tetra/hw/units.hpp"

namespace tetra::hw {

namespace {

constexpr double kTflops = 1e12;
constexpr double kTBps = 1e12;
constexpr double kGBps = 1e9;
constexpr double kGbps = 1e9 / 8.0;  // bits per second -> bytes per second
constexpr double kUs = 1e-6;

const std::array<Gpu, 5>& gpu_table() {
  static const std::array<Gpu, 5> table = {{
      // A100 SXM4 40GB: 312 TFLOP/s [A100-DS], 1.555 TB/s [A100-DS], 108 SMs [SMS], sm_80.
      {"a100-sxm-40gb", 40960 * kMiB, 312 * kTflops, 0, 0, 1.555 * kTBps, 108, 80},
      // A100 SXM4 80GB: 312 TFLOP/s [A100-DS], 2.039 TB/s [A100-DS], 108 SMs [SMS], sm_80.
      {"a100-sxm-80gb", 81920 * kMiB, 312 * kTflops, 0, 0, 2.039 * kTBps, 108, 80},
      // H100 SXM5 80GB: 989 TFLOP/s BF16, 1979 FP8 [H100-DS], 3.35 TB/s [H100-DS], 132 SMs
      // [SMS], sm_90.
      {"h100-sxm-80gb", 81559 * kMiB, 989 * kTflops, 1979 * kTflops, 0, 3.35 * kTBps, 132, 90},
      // H100 SXM 94GB: compute assumed equal to H100 SXM5 (hardware.md section 1 marks
      // 989 TFLOP/s and 132 SMs [assumed]); HBM bandwidth unconfirmed, 3.35 TB/s [assumed].
      {"h100-sxm-94gb", 94 * kGB, 989 * kTflops, 1979 * kTflops, 0, 3.35 * kTBps, 132, 90},
      // H200 SXM 141GB: 989 TFLOP/s BF16, 1979 FP8 (same GH100 compute as H100 SXM)
      // [H200-DS], 4.8 TB/s [H200-DS], 132 SMs, sm_90.
      {"h200-sxm-141gb", 143771 * kMiB, 989 * kTflops, 1979 * kTflops, 0, 4.8 * kTBps, 132, 90},
  }};
  return table;
}

Cluster make_node(const char* name, const char* gpu, double nvlink_Bps, double intra_lat_s,
                  bool nvls, double nic_Bps) {
  Cluster c;
  c.name = name;
  c.gpu = *find_gpu_preset(gpu);
  c.gpus_per_node = 8;
  c.nodes = 1;
  c.intra = IntraNode{IntraKind::nvswitch, nvlink_Bps, intra_lat_s, nvls};
  // Inter-node latency: 5 us end to end per message [assumed]; NCCL's own NET hardware
  // latencies (reference/costmodels.md section 1.1) are added by the collective model.
  c.inter = InterNode{8, nic_Bps, 5 * kUs};
  return c;
}

const std::array<Cluster, 4>& cluster_table() {
  static const std::array<Cluster, 4> table = {{
      // DGX A100: 8 GPUs on NVSwitch, 300 GB/s per GPU per direction [MLE-NET] (12 NVLink3
      // links x 25 GB/s), no NVLS (second-generation NVSwitch), 8x 200 Gb/s HDR [DGX].
      // Intra latency 1 us [assumed] (no A100 link-latency measurement in reference/).
      make_node("dgx-a100-40gb", "a100-sxm-40gb", 300 * kGBps, 1.0 * kUs, false, 200 * kGbps),
      make_node("dgx-a100-80gb", "a100-sxm-80gb", 300 * kGBps, 1.0 * kUs, false, 200 * kGbps),
      // DGX H100: 450 GB/s per direction [NCCL-212] (18 NVLink4 links), NVLS [DGX],
      // 936.25 ns [ASTRA], 8x 400 Gb/s NDR [DGX].
      make_node("dgx-h100", "h100-sxm-80gb", 450 * kGBps, 0.93625 * kUs, true, 400 * kGbps),
      // HGX H200: same NVLink4 / NVSwitch baseboard and NDR rails as DGX H100 [H200-DS].
      make_node("hgx-h200", "h200-sxm-141gb", 450 * kGBps, 0.93625 * kUs, true, 400 * kGbps),
  }};
  return table;
}

}  // namespace

std::span<const Gpu> gpu_presets() { return gpu_table(); }

std::span<const Cluster> cluster_presets() { return cluster_table(); }

std::optional<Gpu> find_gpu_preset(std::string_view name) {
  for (const auto& g : gpu_table()) {
    if (g.name == name) return g;
  }
  return std::nullopt;
}

std::optional<Cluster> find_cluster_preset(std::string_view name) {
  for (const auto& c : cluster_table()) {
    if (c.name == name) return c;
  }
  return std::nullopt;
}

}  // namespace tetra::hw
