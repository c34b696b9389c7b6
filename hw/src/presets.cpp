// Built-in GPUs and nodes. Sources:
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
//  [DGXB200]  NVIDIA DGX B200 datasheet and user guide ("Introduction to NVIDIA DGX B200"):
//             8 B200, 1,440 GB HBM3e, 64 TB/s, FP8 72 PFLOPS (sparse), FP4 144 / 72 PFLOPS
//             (sparse / dense) per system, two NVLink 5 switches, 8x ConnectX-7 400 Gb/s.
//  [HGXB300]  NVIDIA HGX B300 specifications (GTC 2025): per 8 GPUs FP4 144 PF sparse / 105 PF
//             dense, FP8 72 PF and BF16 36 PF sparse, up to 2.3 TB HBM3e, 1.6 TB/s networking
//             (8x ConnectX-8 800 Gb/s on DGX B300, ml-engineering network/README.md).
//  [NVL72]    NVIDIA GB200 NVL72 page: 72 GPUs, FP4 1,440 PF, FP8 720 PF, BF16 360 PF (sparse),
//             up to 13.4 TB HBM3e at 576 TB/s, NVLink 130 TB/s; DGX GB200 user guide
//             ("Hardware", "Networking"): 18 compute trays of 4 GPUs, 1.8 TB/s bidirectional
//             NVLink 5 per GPU, 4x ConnectX-7 400G per tray; the 72 GPUs form one NVLink domain.
//  [GB300]    NVIDIA Technical Blog "Inside NVIDIA Blackwell Ultra": 15 PFLOPS dense NVFP4,
//             288 GB HBM3e, 8 TB/s, NVLink 5 1.8 TB/s; NVIDIA NVL72 AI Factory enterprise
//             reference architecture: 4 Blackwell Ultra GPUs per tray, 4 ConnectX-8 per tray
//             (800 Gb/s SuperNIC per GPU); GB300 NVL72 page: FP8 720 PF / BF16 360 PF sparse.
//  [CUDA-CC]  NVIDIA "CUDA GPU Compute Capability": 10.0 B200 / GB200, 10.3 B300 / GB300.
//  [HOSTLINK] The link to host memory, per direction: A100 SXM PCIe Gen4 64 GB/s and H100 SXM
//             PCIe Gen5 128 GB/s, both directions together [A100-DS], [H100-DS] (H200 the
//             same [H200-DS]); DGX B200 and DGX B300 hold their GPUs behind Intel Xeon hosts of
//             PCIe Gen5 [DGXB200], so Gen5's 64 GB/s [assumed for B300]; a GB200 / GB300
//             superchip joins one Grace CPU to its two GPUs by NVLink-C2C at 900 GB/s both
//             directions together [NVL72], 225 GB/s per GPU and direction [derived].
//  [SMI]      nvidia-smi memory.total as reported on the parts: B200 183359 MiB, GB200
//             189471 MiB, B300 SXM6 AC 275040 MiB, GB300 284208 MiB; SMs from the CUDA device
//             query: B200 148 (pytorch/ao PR #4002), B300 SXM6 AC 148, GB200 / GB300 152
//             (public kernel notes; NVIDIA documents 160 for the full Blackwell Ultra die only).
// Dense rates: NVIDIA prints the Blackwell system rates with 2:4 sparsity; the dense rate is
// half of it, except for FP4 where a dense figure is printed.
//
// Memory capacity. Vendor labels ("40GB", "80GB", "141GB") are nominal and do not pin the
// unit. tetrasim uses the total the device reports (nvidia-smi "Total" memory, MiB), which is
// what the framework's allocator can see:
//   A100-SXM4-40GB  40536 MiB  (= 39.59 GiB, as public nvidia-smi listings of the part print
//                   it; CUDA's deviceQuery reports 42,298,834,944 B = 40339 MiB on it,
//                   bottlerocket-os/bottlerocket PR #3873: the label's 40 GiB is not all there)
//   A100-SXM4-80GB  81920 MiB  (= 80 GiB exactly)
//   H100 80GB HBM3  81559 MiB  (= 79.65 GiB)
//   H200            143771 MiB (= 140.40 GiB)
// For the H100 94GB (TSUBAME 4.0 nodes) no device-reported total is confirmed; the label is
// taken literally as 94 GB = 94e9 bytes (87.54 GiB) [assumed]. The H100 NVL (a different
// board with the same 94 GB label) reports 95830 MiB; a user who knows the real figure sets
// `memory` in [cluster.gpu].

#include "tetra/hw/presets.hpp"

#include <array>

#include "tetra/base/units.hpp"

namespace tetra::hw {

using units::kGB;
using units::kMiB;

namespace {

constexpr double kTflops = 1e12;
constexpr double kTBps = 1e12;
constexpr double kGBps = 1e9;
constexpr double kGbps = 1e9 / 8.0;  // bits per second -> bytes per second
constexpr double kUs = 1e-6;

constexpr const char* kA100Src = "A100 datasheet";
constexpr const char* kH100Src = "H100 datasheet";

// Rated board power (W) last: A100 SXM 400 [A100-DS], H100 / H200 SXM 700 [H100-DS],
// [H200-DS], B200 1000 [DGXB200], B300 1100 [HGXB300], GB200 1200 and GB300 1400 [FB-PWR in
// costmodel/src/builtin_profiles.cpp].
const std::array<Gpu, 9>& gpu_table() {
  static const std::array<Gpu, 9> table = {{
      // A100 SXM4 40GB: 312 TFLOP/s [A100-DS], 1.555 TB/s [A100-DS], 108 SMs [SMS], sm_80. Host
      // links of every row: [HOSTLINK].
      {"a100-sxm-40gb", 40536 * kMiB, 312 * kTflops, 0, 0, 1.555 * kTBps, 108, 80, kA100Src, 400, 0, 32 * kGBps},
      // A100 SXM4 80GB: 312 TFLOP/s [A100-DS], 2.039 TB/s [A100-DS], 108 SMs [SMS], sm_80.
      {"a100-sxm-80gb", 81920 * kMiB, 312 * kTflops, 0, 0, 2.039 * kTBps, 108, 80, kA100Src, 400, 0, 32 * kGBps},
      // H100 SXM5 80GB: 989 TFLOP/s BF16, 1979 FP8 [H100-DS], 3.35 TB/s [H100-DS], 132 SMs
      // [SMS], sm_90.
      {"h100-sxm-80gb", 81559 * kMiB, 989 * kTflops, 1979 * kTflops, 0, 3.35 * kTBps, 132, 90, kH100Src, 700, 0,
       64 * kGBps},
      // H100 SXM 94GB: compute assumed equal to H100 SXM5 (no datasheet of the 94 GB part
      // was found: 989 TFLOP/s and 132 SMs [assumed]); HBM bandwidth unconfirmed, 3.35 TB/s
      // [assumed].
      {"h100-sxm-94gb", 94 * kGB, 989 * kTflops, 1979 * kTflops, 0, 3.35 * kTBps, 132, 90,
       "H100 datasheet (94 GB label; compute and HBM assumed)", 700, 0, 64 * kGBps},
      // H200 SXM 141GB: 989 TFLOP/s BF16, 1979 FP8 (same GH100 compute as H100 SXM)
      // [H200-DS], 4.8 TB/s [H200-DS], 132 SMs, sm_90.
      {"h200-sxm-141gb", 143771 * kMiB, 989 * kTflops, 1979 * kTflops, 0, 4.8 * kTBps, 132, 90, "H200 datasheet",
       700, 0, 64 * kGBps},
      // B200 SXM (1000 W): 36 / 72 PF sparse BF16 / FP8 and 72 PF dense FP4 per 8 GPUs
      // [DGXB200] -> 2250 / 4500 / 9000; 64 TB/s / 8 = 8 TB/s [DGXB200]; 148 SMs [SMI]; sm_100.
      {"b200", 183359 * kMiB, 2250 * kTflops, 4500 * kTflops, 9000 * kTflops, 8 * kTBps, 148, 100,
       "DGX B200 datasheet", 1000, 0, 64 * kGBps},
      // B300 SXM6 AC (Blackwell Ultra, HGX / DGX B300): BF16 / FP8 as B200, FP4 105 PF dense
      // per 8 GPUs -> 13125 [HGXB300]; 8 TB/s; 148 SMs [SMI]; sm_103 [CUDA-CC].
      {"b300", 275040 * kMiB, 2250 * kTflops, 4500 * kTflops, 13125 * kTflops, 8 * kTBps, 148, 103,
       "HGX B300 specifications", 1100, 0, 64 * kGBps},
      // GB200 (1200 W, in NVL72): 360 / 720 / 1,440 PF sparse per 72 GPUs [NVL72] -> 2500 /
      // 5000 / 10000 dense; 576 TB/s / 72 = 8 TB/s; 152 SMs [SMI]; sm_100 [CUDA-CC].
      {"gb200", 189471 * kMiB, 2500 * kTflops, 5000 * kTflops, 10000 * kTflops, 8 * kTBps, 152, 100,
       "GB200 NVL72 specifications", 1200, 0, 225 * kGBps},
      // GB300 (1400 W, in NVL72): BF16 / FP8 360 / 720 PF sparse per 72 -> 2500 / 5000, 15 PF
      // dense NVFP4 [GB300]; 8 TB/s [GB300]; 152 SMs [SMI]; sm_103 [CUDA-CC].
      {"gb300", 284208 * kMiB, 2500 * kTflops, 5000 * kTflops, 15000 * kTflops, 8 * kTBps, 152, 103,
       "GB300 NVL72 specifications; Blackwell Ultra blog", 1400, 0, 225 * kGBps},
  }};
  return table;
}

Cluster make_node(const char* name, const char* gpu, int gpus_per_node, int domain, double nvlink_Bps,
                  double intra_lat_s, bool nvls, double nic_Bps, const char* source) {
  Cluster c;
  c.name = name;
  c.source = source;
  c.gpu = *find_gpu_preset(gpu);
  c.gpus_per_node = gpus_per_node;
  c.nodes = 1;
  c.intra = IntraNode{IntraKind::nvswitch, nvlink_Bps, intra_lat_s, nvls, domain};
  // One NIC per GPU on every preset. Inter-node latency: 5 us end to end per message
  // [assumed]; NCCL's own NET hardware latencies (`NVIDIA/nccl: src/graph/tuning.cc`
  // hwLatencies) are added by the collective model.
  c.inter = InterNode{gpus_per_node, nic_Bps, 5 * kUs};
  return c;
}

const std::array<Cluster, 8>& cluster_table() {
  static const std::array<Cluster, 8> table = {{
      // DGX A100: 8 GPUs on NVSwitch, 300 GB/s per GPU per direction [MLE-NET] (12 NVLink3
      // links x 25 GB/s), no NVLS (second-generation NVSwitch), 8x 200 Gb/s HDR [DGX].
      // Intra latency 1 us [assumed] (no published A100 link-latency measurement was found).
      make_node("dgx-a100-40gb", "a100-sxm-40gb", 8, 8, 300 * kGBps, 1.0 * kUs, false, 200 * kGbps,
                "DGX A100 datasheet"),
      make_node("dgx-a100-80gb", "a100-sxm-80gb", 8, 8, 300 * kGBps, 1.0 * kUs, false, 200 * kGbps,
                "DGX A100 datasheet"),
      // DGX H100: 450 GB/s per direction [NCCL-212] (18 NVLink4 links), NVLS [DGX],
      // 936.25 ns [ASTRA], 8x 400 Gb/s NDR [DGX].
      make_node("dgx-h100", "h100-sxm-80gb", 8, 8, 450 * kGBps, 0.93625 * kUs, true, 400 * kGbps,
                "DGX H100 datasheet"),
      // HGX H200: same NVLink4 / NVSwitch baseboard and NDR rails as DGX H100 [H200-DS].
      make_node("hgx-h200", "h200-sxm-141gb", 8, 8, 450 * kGBps, 0.93625 * kUs, true, 400 * kGbps,
                "H200 datasheet"),
      // DGX B200: 18 NVLink 5 links x 50 GB/s = 900 GB/s per direction through two NVLink
      // switches with SHARP [DGXB200]; 8x ConnectX-7 400 Gb/s [DGXB200]. Switch latency as
      // H100's [assumed].
      make_node("dgx-b200", "b200", 8, 8, 900 * kGBps, 0.93625 * kUs, true, 400 * kGbps,
                "DGX B200 datasheet"),
      // DGX B300: NVLink 5 as B200; 8x ConnectX-8 800 Gb/s [HGXB300].
      make_node("dgx-b300", "b300", 8, 8, 900 * kGBps, 0.93625 * kUs, true, 800 * kGbps,
                "DGX B300 datasheet"),
      // GB200 NVL72: a node is a compute tray of 4 GPUs, 18 of them on one 72-GPU NVLink 5
      // domain (nine switch trays, SHARP); one ConnectX-7 400G per GPU [NVL72].
      make_node("gb200-nvl72", "gb200", 4, 72, 900 * kGBps, 0.93625 * kUs, true, 400 * kGbps,
                "DGX GB200 user guide; GB200 NVL72 specifications"),
      // GB300 NVL72: as GB200 NVL72 with ConnectX-8 800 Gb/s per GPU [GB300].
      make_node("gb300-nvl72", "gb300", 4, 72, 900 * kGBps, 0.93625 * kUs, true, 800 * kGbps,
                "NVL72 enterprise reference architecture; GB300 NVL72 specifications"),
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
