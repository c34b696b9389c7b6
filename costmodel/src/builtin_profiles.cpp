// Built-in profiles from published measurements. Citation keys:
//  [MAMF]  stas00/ml-engineering: compute/accelerator/README.md, "Maximum Achievable Matmul
//          FLOPS comparison table" (commit 29c6b708): A100 SXM BF16 271.2, H100 SXM BF16 794.5
//          TFLOP/s ("H200 is the same"); FP8 e4m3fn H100 SXM 1402.6, H200 SXM 1453.4 TFLOP/s.
//  [STREAM] RRZE-HPC/gpu-benches gpu-stream (commit 1038c5d0), 100 % occupancy row, triad:
//          A100 80GB 1794 GB/s, A100 40GB 1358 GB/s.
//  [HBM-H] H100 / H200 effective HBM ≈ 0.9 × spec [assumed]: no published H100 SXM or H200
//          streaming measurement; bracketed by the measured read ratios of RRZE-HPC/gpu-benches
//          gpu-stream (commit 1038c5d0) on A100-80GB (1776 of 2039 GB/s, 0.87) and H100 PCIe
//          (1942 of 2000 GB/s, 0.97).
//  [FA2]   Dao-AILab/flash-attention README figures assets/flash2_a100_fwd_bwd_benchmark.png,
//          assets/flash2_h100_fwd_bwd_benchmark.png (commit 7ef24848), fwd+bwd TFLOP/s.
//  [FA3]   same, assets/flash3_fp16_fwd.png, forward TFLOP/s.
//  [NVB]   stas00/ml-engineering: network/README.md, nvbandwidth device_to_device_memcpy_write_ce
//          on 8x H200: 396.40 GB/s unidirectional (88 % of 450).
//  [SIMAI] aliyun/SimAI: astra-sim-alibabacloud/astra-sim/system/calbusbw.cc: effective NIC
//          bandwidth ConnectX-6 23.5 GB/s, ConnectX-7 48.5 GB/s.
//  [GTC]   GTC24 S62129 / GTC25 S72583 nccl-tests slides as reproduced in stas00/ml-engineering
//          network/images/all-reduce-bw-2025.png, all-to-all-bw-2025.png (commit 29c6b708).
//  [MLE]   stas00/ml-engineering: network/README.md: A100 node all-reduce 235 GB/s busbw.
//  [N212]  NVIDIA/nccl-tests issue #212 (maintainer comment): H100 NVLink 370 GB/s effective;
//          NVLS all-reduce ~480 busbw (algbw ~275).
//  [TOPO]  NVIDIA/nccl: src/graph/topo.h SM80_NVLINK_BW 20.0, SM90_NVLINK_BW 20.6,
//          SM100_NVLINK_BW 40.1 GB/s per link; src/graph/topo.cc NIC bandwidth = speed_Mbps / 8000.
//  [SKILLS] NVIDIA/skills skills/nemo-mbridge-perf-expert-parallel-overlap/SKILL.md (commit
//          7149a88), "HybridEP Production-Shape Benchmark": 2026-07-25 Nsight comparison on
//          16 H100, Qwen3-30B-A3B pretraining, BF16, EP 16, HybridEP (Apache-2.0).
//  [MNNVL] NVIDIA/nccl: NCCL_MNNVL_ENABLE (docs env.rst, src/graph/topo.cc): the GPUs of one
//          multi-node NVLink clique form one NCCL "node"; rings and NVLS stay on NVLink inside it.
//  [VTR]   VIA-Research/vTrain (commit f8dda84): trace/a100/AR_GPU{2..8}_1M_1024M_LUT, nccl-tests
//          all_reduce_perf on one A100 NVSwitch node, 2..8 GPUs, 1 MiB..1 GiB; in-place time.
//  [MAMF-B] the same table (stas00/ml-engineering compute/accelerator/README.md, MAMF rows):
//          B200 SXM BF16 1745.0 / FP8 3432.5, B300 SXM 1769.0 / 3353.3, GB200 1822.0 / 3615.6
//          TFLOP/s (no GB300 row).
//  [AZ-GB] Azure/AI-benchmarking-guide Azure_Results/ND_GB200_v6_results.md: cuBLASLt GEMMs
//          at 16384^3 after 10,000 warm-up iterations, per GB200: FP8 2906.9, FP4 7627.6 TFLOP/s.
//  [AZ-H200] Azure/AI-benchmarking-guide Azure_Results/ND_H200_v5_results.md: cuBLASLt FP8
//          16384^3 after 10,000 warm-up iterations 1366.3 TFLOP/s per H200.
//  [AZ-H100] Azure/AI-benchmarking-guide Azure_Results/ND_H100_v5_results.md (commit
//          8fd0c6e): the same benchmark, 1377.3 TFLOP/s per H100 SXM 80GB.
//  [FB-PWR] facebookexperimental/triton PR #2023 (denoise.sh): a GB300 at its rated 1400 W runs
//          cuBLAS GEMMs at about 1600-2174 TFLOP/s with the SM clock locked at 2070 MHz, and at
//          about 617 when capped to 500 W; rated powers B200 750, GB200 1200, GB300 1400 W.
//  [B300M] public B300 SXM6 AC microbenchmark reference: HBM 7.30 TB/s measured of 8 (0.91),
//          in line with [HBM-H].
//  [NCCL-B] stas00/ml-engineering network/README.md: 8x B200 all-reduce 838.0 GB/s busbw (NVLS),
//          682.2 (ring); coreweave/nccl-tests PR #43: GB200 NVL72, 72 GPUs, all-reduce
//          834.6-846.8 GB/s busbw at 8 GiB.
//  [CLK]   G. Lockwood, "Peak FLOPS" (glennklockwood.com/garden/peak-FLOPS): NVIDIA's HPL Rpeak
//          for A100 uses the clock sustained at the power limit under dense tensor-core load,
//          1305 MHz, against the 1410 MHz boost clock of the datasheet peak.
#include "tetra/costmodel/builtin_profiles.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <tuple>

namespace tetra::costmodel {

/// Sustained tensor-core clock of an A100 at its power limit over the boost clock [CLK].
inline constexpr double kA100SustainedClock = 1305.0 / 1410.0;
namespace {

using parallel::AttentionKernel;
using ops::CollectiveKind;

constexpr double kT = 1e12;
constexpr double kG = 1e9;
constexpr double kUs = 1e-6;

// Launch / per-wave costs (no published per-kernel overhead was found): 2 us per kernel
// and 1 us per GEMM wave [assumed]; a calibration profile replaces them.
constexpr double kKernelLaunchS = 2.0 * kUs;
constexpr double kGemmLaunchS = 2.0 * kUs;
constexpr double kGemmWaveS = 1.0 * kUs;

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

/// FA2 fwd+bwd [FA2]; "ill." labels are left out. seq: 512, 1k, 2k, 4k, 8k, 16k.
struct Row {
  int head_dim;
  bool causal;
  double tflops[6];  // 0 = unreadable
};
constexpr long long kSeqs[6] = {512, 1024, 2048, 4096, 8192, 16384};
constexpr Row kFa2A100[] = {
    {64, false, {132, 0, 162, 171, 175, 176}},
    {128, false, {0, 0, 187, 196, 201, 203}},
    {64, true, {88, 119, 140, 156, 165, 171}},
    {128, true, {99, 133, 155, 173, 182, 189}},
};
constexpr Row kFa2H100[] = {
    {64, false, {215, 254, 274, 288, 294, 296}},
    {128, false, {248, 294, 320, 326, 335, 338}},
    {64, true, {141, 192, 232, 257, 273, 284}},
    {128, true, {163, 221, 265, 294, 308, 328}},
};
/// FlashAttention (v1) and the Triton FlashAttention, fwd+bwd, from the same two figures [FA2]
/// (bars "FlashAttention" and "FlashAttention Triton"; the H100 figure has no Triton bars).
constexpr Row kFa1A100[] = {
    {64, false, {91, 92, 104, 108, 110, 110}},
    {128, false, {76, 72, 76, 80, 82, 83}},
    {64, true, {58, 70, 77, 87, 92, 97}},
    {128, true, {55, 62, 69, 76, 80, 83}},
};
constexpr Row kTritonA100[] = {
    {64, false, {90, 102, 98, 98, 100, 100}},
    {128, false, {78, 85, 90, 93, 95, 95}},
    {64, true, {59, 75, 79, 76, 79, 80}},
    {128, true, {50, 61, 68, 74, 78, 80}},
};
constexpr Row kFa1H100[] = {
    {64, false, {157, 159, 161, 161, 166, 168}},
    {128, false, {127, 127, 128, 131, 137, 139}},
    {64, true, {104, 123, 136, 138, 149, 156}},
    {128, true, {98, 109, 108, 126, 135, 137}},
};
/// FA3 forward, H100-SXM5-80GB [FA3].
constexpr Row kFa3H100[] = {
    {64, false, {333, 392, 460, 476, 496, 497}},
    {64, true, {197, 265, 371, 420, 460, 473}},
    {128, false, {467, 0, 625, 638, 646, 648}},
    {128, true, {292, 423, 521, 579, 602, 616}},
    {256, false, {482, 0, 707, 736, 746, 756}},
    {256, true, {286, 427, 537, 612, 628, 642}},
};

/// One NVSwitch A100 node, all-reduce in µs at 1, 2, 4, ..., 1024 MiB for 2..8 GPUs [VTR].
struct AllReduceRow {
  int ranks;
  double us[11];
};
constexpr AllReduceRow kAllReduceA100[] = {
    {2, {45.1, 51.1, 60.3, 87.4, 129.4, 229.0, 404.0, 765.7, 1454.4, 2833.4, 5453.4}},
    {3, {63.5, 70.6, 78.2, 102.5, 151.2, 263.9, 499.0, 929.1, 1786.4, 3466.2, 6761.3}},
    {4, {52.7, 55.9, 75.8, 113.6, 177.8, 281.7, 540.6, 1000.7, 1927.7, 3720.5, 7275.5}},
    {5, {62.1, 63.0, 77.2, 120.2, 196.2, 322.9, 566.3, 1063.6, 2036.1, 3932.3, 7647.0}},
    {6, {73.7, 73.9, 80.1, 123.6, 198.9, 303.1, 560.3, 1120.8, 2116.8, 4020.1, 7887.5}},
    {7, {77.7, 78.5, 83.3, 129.8, 227.9, 333.7, 597.5, 1145.3, 2189.8, 4113.7, 8120.3}},
    {8, {92.2, 93.0, 94.0, 129.8, 231.0, 355.7, 579.6, 1166.0, 2158.0, 4187.6, 8196.4}},
};

/// The measured all-reduce table of an A100 NVSwitch node as profile rows. All-gather and
/// reduce-scatter run at the all-reduce's bus bandwidth at the same nccl-tests size
/// (no A100 AG/RS table is published [assumed]), i.e. in half its time.
void append_a100_collectives(std::vector<CollectiveRow>& out, int gpus_per_node) {
  for (const AllReduceRow& r : kAllReduceA100) {
    if (r.ranks > gpus_per_node) continue;
    for (int i = 0; i < 11; ++i) {
      const double bytes = static_cast<double>(1LL << (20 + i));
      const double s = r.us[i] * kUs;
      out.push_back({"all_reduce", r.ranks, r.ranks, bytes, s, "", ""});
      out.push_back({"all_gather", r.ranks, r.ranks, bytes, 0.5 * s, "", ""});
      out.push_back({"reduce_scatter", r.ranks, r.ranks, bytes, 0.5 * s, "", ""});
    }
  }
}

template <std::size_t N>
void append(std::vector<AttentionRate>& out, const Row (&rows)[N], AttentionKernel kernel,
            AttentionRatePass pass) {
  for (const Row& r : rows) {
    for (int i = 0; i < 6; ++i) {
      if (r.tflops[i] <= 0) continue;
      out.push_back(AttentionRate{kernel, pass, r.head_dim, r.causal, kSeqs[i], r.tflops[i] * kT});
    }
  }
}

}  // namespace

GpuFamily gpu_family(const hw::Gpu& gpu) noexcept {
  if (starts_with(gpu.name, "a100")) return GpuFamily::a100;
  if (starts_with(gpu.name, "h100")) return GpuFamily::h100;
  if (starts_with(gpu.name, "h200")) return GpuFamily::h200;
  if (starts_with(gpu.name, "b200")) return GpuFamily::b200;
  if (starts_with(gpu.name, "b300")) return GpuFamily::b300;
  if (starts_with(gpu.name, "gb200")) return GpuFamily::gb200;
  if (starts_with(gpu.name, "gb300")) return GpuFamily::gb300;
  if (gpu.compute_capability == 80) return GpuFamily::a100;
  if (gpu.compute_capability == 90) return GpuFamily::h100;
  if (gpu.compute_capability == 100) return GpuFamily::b200;
  if (gpu.compute_capability == 103) return GpuFamily::b300;
  return GpuFamily::other;
}

namespace {

/// Published achievable GEMM rates of the Blackwell parts, TFLOP/s: MAMF BF16 / FP8 [MAMF-B];
/// GB300 has no published row and takes GB200's [assumed].
///
/// `sustained`: the share of the short-run MAMF rate that a training step holds, when the
/// tensor cores run for hours at the board power limit (the A100 story of [CLK]). Measured on
/// GB200: cuBLASLt FP8 16384^3 after 10,000 warm-up iterations runs at 2906.9 TFLOP/s [AZ-GB]
/// against MAMF's 3615.6 [MAMF-B], 0.804; the same benchmark on H200 (1366.3 against 1453.4
/// [AZ-H200]) shows Hopper at 700 W loses only 6 %, which the H100 tables already absorb.
/// B200 (1000 W) and B300 (1100 W) run the same silicon at or below GB200's 1200 W and are
/// taken at GB200's share [assumed]; GB300's 1400 W limit is 17 % above GB200's, taken to lift
/// the throttle entirely: a GB300 at 1400 W holds up to 2174 TFLOP/s in cuBLAS [FB-PWR], above
/// the 1822 it is given here, and the same part capped to 500 W drops to 617, so the power
/// limit, not the silicon, sets the rate. Checked on Megatron-Bridge rows: the same Llama 3 8B layout
/// runs 1.19x (FP8) / 1.21x (MXFP8) faster on GB300 than on GB200 (megatron_bridge.csv 25.11).
/// FP4 is priced at its own sustained measurement: 7627.6 of 10,000 TFLOP/s on GB200 [AZ-GB],
/// the same efficiency on every part's FP4 peak [derived].
struct BlackwellRates {
  double bf16_mamf, fp8_mamf, sustained;
  /// What a training step holds, FLOP/s.
  [[nodiscard]] double bf16_flops() const { return bf16_mamf * sustained * kT; }
  [[nodiscard]] double fp8_flops() const { return fp8_mamf * sustained * kT; }
};
constexpr double kFp4SustainedEfficiency = 7627.6 / 10000.0;
constexpr double kGb200Sustained = 2906.9 / 3615.6;
BlackwellRates blackwell_rates(GpuFamily fam) {
  switch (fam) {
    case GpuFamily::b200: return {1745.0, 3432.5, kGb200Sustained};
    case GpuFamily::b300: return {1769.0, 3353.3, kGb200Sustained};
    case GpuFamily::gb200: return {1822.0, 3615.6, kGb200Sustained};
    case GpuFamily::gb300: return {1822.0, 3615.6, 1.0};
    default: return {0, 0, 1.0};
  }
}

/// Share of the short-run MAMF rate a Hopper part holds when its tensor cores run for minutes
/// at the rated 700 W: cuBLASLt FP8 16384^3 after 10,000 warm-up iterations over the FP8 MAMF,
/// H100 1377.3 / 1402.6 [AZ-H100], H200 1366.3 / 1453.4 [AZ-H200]. The H200 loses more: its
/// HBM3e draws more of the same 700 W, and it runs 11 % faster still at 1000 W (MLPerf
/// Inference v4.1, H200-SXM-141GB-CTS). BF16 GEMMs and attention take the FP8 share [assumed:
/// the same clock].
double hopper_sustained_share(GpuFamily fam) {
  if (fam == GpuFamily::h100) return 1377.3 / 1402.6;
  if (fam == GpuFamily::h200) return 1366.3 / 1453.4;
  return 1.0;
}

bool is_blackwell(GpuFamily fam) {
  return fam == GpuFamily::b200 || fam == GpuFamily::b300 || fam == GpuFamily::gb200 || fam == GpuFamily::gb300;
}

}  // namespace

std::vector<AttentionRate> published_attention_rates(const hw::Gpu& gpu) {
  std::vector<AttentionRate> out;
  switch (gpu_family(gpu)) {
    case GpuFamily::a100:
      append(out, kFa2A100, AttentionKernel::flash2, AttentionRatePass::fwd_bwd);
      append(out, kFa1A100, AttentionKernel::flash1, AttentionRatePass::fwd_bwd);
      append(out, kTritonA100, AttentionKernel::triton, AttentionRatePass::fwd_bwd);
      break;
    case GpuFamily::h100:
    case GpuFamily::h200:  // same GH100 compute; H100 tables [assumed]
      append(out, kFa2H100, AttentionKernel::flash2, AttentionRatePass::fwd_bwd);
      append(out, kFa1H100, AttentionKernel::flash1, AttentionRatePass::fwd_bwd);
      append(out, kFa3H100, AttentionKernel::flash3, AttentionRatePass::fwd);
      for (auto& r : out) r.flops *= hopper_sustained_share(gpu_family(gpu));
      break;
    case GpuFamily::b200:
    case GpuFamily::b300:
    case GpuFamily::gb200:
    case GpuFamily::gb300:
    case GpuFamily::other: {
      // Scale the H100 FA2 table by the dense peak ratio [assumed].
      double scale = gpu.bf16_peak_flops > 0 ? gpu.bf16_peak_flops / (989 * kT) : 1.0;
      if (is_blackwell(gpu_family(gpu))) scale *= blackwell_rates(gpu_family(gpu)).sustained;
      append(out, kFa2H100, AttentionKernel::flash2, AttentionRatePass::fwd_bwd);
      for (auto& r : out) r.flops *= scale;
      break;
    }
  }
  // The published rates ran at the rated power; a lower limit lowers the clock.
  for (auto& r : out) r.flops *= hw::sustained_clock_share(gpu);
  return out;
}

LowPrecisionRates low_precision_gemm_rates(const hw::Gpu& gpu, double bf16_rate) {
  LowPrecisionRates r;
  if (gpu.bf16_peak_flops <= 0 || bf16_rate <= 0) return r;
  hw::Cluster alone;
  alone.gpu = gpu;
  const double builtin_bf16 = builtin_profile(alone).fit.gemm_peak_flops;
  // builtin_bf16 already runs at the GPU's power limit; the published FP8 rates below ran at
  // the rated power, so they take the same clock share.
  const double calibrated = (builtin_bf16 > 0 ? bf16_rate / builtin_bf16 : 1.0) * hw::sustained_clock_share(gpu);
  // Hopper's achievable FP8 rate over its achievable BF16 rate [MAMF]: 1402.6 / 794.5, i.e.
  // the FP8 efficiency (70.9 % of 1979) over the BF16 one (80.3 % of 989).
  const double fp8_over_bf16_efficiency = (1402.6 / 1979.0) / (794.5 / 989.0);
  // Achievable rate per datasheet FLOP/s of a low-precision peak.
  const double datasheet = bf16_rate * fp8_over_bf16_efficiency / gpu.bf16_peak_flops;
  if (gpu.fp8_peak_flops > 0) {
    switch (gpu_family(gpu)) {
      case GpuFamily::h100:
        r.fp8_flops = 1377.3 * kT * calibrated;  // [AZ-H100] sustained FP8
        break;
      case GpuFamily::h200:
        r.fp8_flops = 1366.3 * kT * calibrated;  // [AZ-H200] sustained FP8
        break;
      case GpuFamily::b200:
      case GpuFamily::b300:
      case GpuFamily::gb200:
      case GpuFamily::gb300:
        r.fp8_flops = blackwell_rates(gpu_family(gpu)).fp8_flops() * calibrated;  // [MAMF-B], [AZ-GB]
        break;
      default:
        r.fp8_flops = datasheet * gpu.fp8_peak_flops;  // [derived] Hopper's efficiency ratio
        break;
    }
  }
  if (gpu.fp4_peak_flops > 0) {
    const GpuFamily fam = gpu_family(gpu);
    r.fp4_flops = is_blackwell(fam) ? kFp4SustainedEfficiency * gpu.fp4_peak_flops * calibrated  // [AZ-GB]
                                    : datasheet * gpu.fp4_peak_flops;  // [derived] Hopper's ratio
  }
  return r;
}

Profile builtin_profile(const hw::Cluster& cluster) {
  Profile p;
  const hw::Gpu& g = cluster.gpu;
  p.meta.gpu = g.name;
  p.meta.nccl = "2.30.7";
  p.meta.source = "built-in (published measurements)";
  p.meta.hosts = cluster.nodes;
  p.meta.gpus_per_node = cluster.gpus_per_node;
  p.meta.device_memory_bytes = g.memory_bytes;
  p.meta.sms = g.sms;
  ProfileFit& f = p.fit;
  f.valid = true;
  f.gemm_launch_s = kGemmLaunchS;
  f.gemm_wave_s = kGemmWaveS;
  f.kernel_launch_s = kKernelLaunchS;
  f.gemm_tile_m = 0;  // 0: the compute model searches its tile set
  f.gemm_tile_n = 0;
  switch (gpu_family(g)) {
    case GpuFamily::a100:
      // MAMF and the FlashAttention figures are short benchmarks that run at the boost clock; a
      // training step holds the tensor cores busy for hours at the 400 W power limit, where the
      // clock settles at 1305 of 1410 MHz [CLK]. Tensor-core rates scale with the clock
      // [derived]; memory-bound kernels are bound by HBM, not the clock, and keep [STREAM].
      f.gemm_peak_flops = 271.2 * kT * kA100SustainedClock;     // [MAMF] A100 SXM BF16, [CLK]
      f.hbm_Bps = g.memory_bytes > 60e9 ? 1794 * kG : 1358 * kG;  // [STREAM] triad 80GB / 40GB
      f.attention_fwd_flops = 182 * kT * kA100SustainedClock;   // [FA2] A100 hd128 causal 8k, [CLK]
      f.attention_bwd_flops = 182 * kT * kA100SustainedClock;
      // Collectives inside a stock NVSwitch node (12 NVLink3 links, 300 GB/s per direction):
      // measured [VTR]; across nodes, or on other links, NCCL's model.
      if (cluster.intra.kind == hw::IntraKind::nvswitch &&
          std::abs(cluster.intra.bandwidth_Bps - 300 * kG) < 1e-6 * 300 * kG) {
        append_a100_collectives(p.collective, cluster.gpus_per_node);
      }
      break;
    case GpuFamily::h100:
    case GpuFamily::h200: {
      const double sustained = hopper_sustained_share(gpu_family(g));
      f.gemm_peak_flops = 794.5 * kT * sustained;               // [MAMF] BF16 ("H200 is the same")
      f.hbm_Bps = 0.9 * g.hbm_bandwidth_Bps;                    // [HBM-H] H100 3.0 of 3.35, H200 4.3 of 4.8
      f.attention_fwd_flops = 308 * kT * sustained;             // [FA2] H100 hd128 causal 8k
      f.attention_bwd_flops = f.attention_fwd_flops;
      break;
    }
    case GpuFamily::b200:
    case GpuFamily::b300:
    case GpuFamily::gb200:
    case GpuFamily::gb300: {
      const BlackwellRates b = blackwell_rates(gpu_family(g));
      f.gemm_peak_flops = b.bf16_flops();                       // [MAMF-B], [AZ-GB]
      f.hbm_Bps = 0.9 * g.hbm_bandwidth_Bps;                    // [HBM-H], [B300M] 0.91
      f.attention_fwd_flops = 0.31 * g.bf16_peak_flops * b.sustained;  // [assumed] FA2 H100 308/989
      f.attention_bwd_flops = f.attention_fwd_flops;
      break;
    }
    case GpuFamily::other:
      f.gemm_peak_flops = 0.8 * g.bf16_peak_flops;              // [assumed] ~MAMF/peak of H100
      f.hbm_Bps = 0.9 * g.hbm_bandwidth_Bps;                    // [assumed]
      f.attention_fwd_flops = 0.31 * g.bf16_peak_flops;         // [assumed] FA2 H100 308/989
      f.attention_bwd_flops = f.attention_fwd_flops;
      break;
  }
  // Tensor-core rates at the GPU's power limit (hw::sustained_clock_share); HBM keeps its rate.
  const double clock = hw::sustained_clock_share(g);
  f.gemm_peak_flops *= clock;
  f.attention_fwd_flops *= clock;
  f.attention_bwd_flops *= clock;
  return p;
}

ComputeParams make_compute_params(const hw::Cluster& cluster, const Profile& profile) {
  const Profile builtin = builtin_profile(cluster);
  const ProfileFit& b = builtin.fit;
  const ProfileFit& f = profile.fit;
  auto pick = [&](double v, double fallback) { return f.valid && v > 0 ? v : fallback; };
  ComputeParams p;
  p.sms = profile.meta.sms > 0 ? profile.meta.sms : std::max(1, cluster.gpu.sms);
  p.dense_peak_flops = cluster.gpu.bf16_peak_flops;
  p.gemm_peak_flops = pick(f.gemm_peak_flops, b.gemm_peak_flops);
  p.gemm_launch_s = pick(f.gemm_launch_s, b.gemm_launch_s);
  p.gemm_wave_s = f.valid && f.gemm_peak_flops > 0 ? f.gemm_wave_s : b.gemm_wave_s;
  p.hbm_Bps = pick(f.hbm_Bps, b.hbm_Bps);
  p.kernel_launch_s = pick(f.kernel_launch_s, b.kernel_launch_s);
  if (f.valid && f.gemm_peak_flops > 0 && f.gemm_tile_m > 0 && f.gemm_tile_n > 0) {
    p.tiles = {GemmTile{f.gemm_tile_m, f.gemm_tile_n, 1.0}};
  } else {
    // Candidate CUTLASS/cuBLAS tiles (NVIDIA Matrix Multiplication Background User's Guide,
    // "Tile Quantization"); per-SM efficiency relative to the large tiles falls with operand
    // reuse [assumed].
    p.tiles = {{256, 128, 1.0}, {128, 256, 1.0}, {128, 128, 0.9},
               {128, 64, 0.75}, {64, 128, 0.75}, {64, 64, 0.55}};
  }
  const LowPrecisionRates low = low_precision_gemm_rates(cluster.gpu, p.gemm_peak_flops);
  p.fp8_gemm_peak_flops = low.fp8_flops;
  p.fp4_gemm_peak_flops = low.fp4_flops;
  p.attention_rates = published_attention_rates(cluster.gpu);
  p.gemm_rows = profile.gemm;
  std::sort(p.gemm_rows.begin(), p.gemm_rows.end(), [](const GemmRow& a, const GemmRow& c) {
    return std::tie(a.n, a.k, a.m) < std::tie(c.n, c.k, c.m);
  });
  p.attention_rows = profile.attention;
  p.memory_rows = profile.memory_bound;
  std::sort(p.memory_rows.begin(), p.memory_rows.end(), [](const MemoryBoundRow& a, const MemoryBoundRow& c) {
    return std::tie(a.kernel, a.bytes) < std::tie(c.kernel, c.bytes);
  });
  p.memory_fits = f.valid ? f.memory_bound : std::vector<MemoryBoundFit>{};
  return p;
}

NcclTopology derive_topology(const hw::Cluster& cluster) {
  NcclTopology t;
  const hw::Gpu& g = cluster.gpu;
  t.compute_capability = g.compute_capability > 0 ? g.compute_capability : 90;
  t.nvlink = cluster.intra.kind != hw::IntraKind::pcie;
  t.nvls = cluster.intra.nvls && t.nvlink && t.compute_capability >= 90;
  // NVLink links per direction: 25 GB/s each up to NVLink 4 (A100: 12 x 25 = 300; H100:
  // 18 x 25 = 450), 50 GB/s on NVLink 5 (B200 / GB200: 18 x 50 = 900), counted by NCCL at
  // SM80_NVLINK_BW 20.0 / SM90_NVLINK_BW 20.6 / SM100_NVLINK_BW 40.1 GB/s per link [TOPO].
  const bool nvlink5 = t.compute_capability >= 100;
  const double link_Bps = nvlink5 ? 50e9 : 25e9;
  const double links = std::max(1.0, std::round(cluster.intra.bandwidth_Bps / link_Bps));
  const double per_link = nvlink5 ? 40.1 : t.compute_capability >= 90 ? 20.6 : 20.0;
  t.nvlink_GBps = t.nvlink ? links * per_link : 12.0;
  // NVIDIA HGX H100 4-GPU and similar boards: the GPUs are linked pairwise, no NVSwitch.
  const bool mesh = cluster.intra.kind == hw::IntraKind::nvlink_mesh && cluster.gpus_per_node > 2;
  if (mesh) {
    t.mesh_gpus = cluster.gpus_per_node;
    t.nvls = false;
  }
  t.nic_GBps = cluster.inter.nic_bandwidth_Bps / 1e9;  // speed_Mbps / 8000 [TOPO]
  // A multi-node NVLink domain is one NCCL node with the NICs of all its trays [MNNVL].
  t.gpus_per_node = cluster.nvlink_domain();
  t.nics_per_node = std::max(1, cluster.nics_per_domain());
  const GpuFamily fam = gpu_family(g);
  // Pair copy: 88 % of the NVLink line rate (measured on H200 [NVB]; A100 assumed the same).
  t.p2p_intra_Bps = t.nvlink ? 0.88 * cluster.intra.bandwidth_Bps : cluster.intra.bandwidth_Bps;
  if (mesh) t.p2p_intra_Bps /= cluster.gpus_per_node - 1;  // the links between the pair only
  // NIC effective: ConnectX-7 48.5 of 50 GB/s, ConnectX-6 23.5 of 25 GB/s [SIMAI] (97 / 94 %).
  t.p2p_inter_Bps = cluster.inter.nic_bandwidth_Bps * (t.nic_GBps >= 50 ? 48.5 / 50.0 : 23.5 / 25.0);
  t.p2p_intra_lat_s = cluster.intra.latency_s;
  t.p2p_inter_lat_s = cluster.inter.latency_s;
  // Intra-node all-to-all busbw: A100 210, H100 320 GB/s [GTC].
  if (fam == GpuFamily::a100) t.alltoall_intra_busbw_Bps = 210 * kG;
  if (fam == GpuFamily::h100 || fam == GpuFamily::h200) t.alltoall_intra_busbw_Bps = 320 * kG;
  // Inter-node all-to-all on 32 GPUs of 8-GPU nodes with one NIC each: 24 GB/s busbw over
  // HDR, 48 over NDR [GTC], where each rank's remote 24/32 of the buffer crossing its NIC at
  // the effective rate would give 31/24 of it: 23.5 x 31/24 = 30.35 and 48.5 x 31/24 = 62.65.
  // The ratio (0.791 HDR, 0.766 NDR) is NCCL's all-to-all on those NICs, whatever the GPU.
  if (t.gpus_per_node == 8 && t.nics_per_node == 8) {
    if (t.nic_GBps == 25.0) t.alltoall_nic_efficiency = 24.0 / (23.5 * 31.0 / 24.0);
    if (t.nic_GBps == 50.0) t.alltoall_nic_efficiency = 48.0 / (48.5 * 31.0 / 24.0);
  }
  // HybridEP across nodes: 25.5 GB/s per GPU of node-deduplicated tokens where the NIC share
  // moves 48.5 [SKILLS]. A matched Nsight profile of Qwen3-30B-A3B on 2 DGX H100 (EP 16,
  // BF16, 4096 tokens, GBS 1024, HybridEP, no overlap) has 9.079 ms of communication under
  // compute, 0.11 % of it: 8.254 s a step. That is 64 micro-batches x 48 layers x 4 exchanges
  // of 4096 tokens x 2048 x 2 bytes, 0.9969 of which cross to the other node: 205.5 GB, 671.7 us
  // an exchange of which 15.9 us is launch (alltoall_latency_s). The same share of any NIC.
  t.hybridep_nic_efficiency = 25.5 / 48.5;
  return t;
}

CommParams make_comm_params(const hw::Cluster& cluster, const Profile& profile) {
  CommParams p;
  p.version = parse_nccl_version(profile.meta.nccl);
  p.topo = derive_topology(cluster);
  p.pods = Pods{cluster.inter.pod_gpus, cluster.inter.oversubscription};
  p.rows = profile.collective;
  std::sort(p.rows.begin(), p.rows.end(), [](const CollectiveRow& a, const CollectiveRow& c) {
    return std::tie(a.op, a.ranks, a.ranks_per_node, a.bytes) < std::tie(c.op, c.ranks, c.ranks_per_node, c.bytes);
  });
  if (profile.fit.valid) p.fits = profile.fit.collectives;
  return p;
}

std::vector<PublishedBusbw> published_busbw(const hw::Cluster& cluster) {
  std::vector<PublishedBusbw> out;
  const GpuFamily fam = gpu_family(cluster.gpu);
  const CollectiveKind ar = CollectiveKind::all_reduce;
  if (fam == GpuFamily::a100) {
    out.push_back({ar, 8, 8, "", 232 * kG, 235 * kG, "GTC24 S62129 / GTC25 S72583 (232); ml-engineering network/README.md (235)"});
    out.push_back({ar, 32, 8, "", 192 * kG, 192 * kG, "GTC24 / GTC25: DGX A100, 8x 200Gb RDMA, 32 GPUs"});
    out.push_back({CollectiveKind::all_to_all, 8, 8, "", 210 * kG, 210 * kG, "GTC25 S72583"});
  } else if (fam == GpuFamily::h100 || fam == GpuFamily::h200) {
    out.push_back({ar, 8, 8, "ring", 370 * kG, 370 * kG, "GTC24 / GTC25; nccl-tests #212"});
    out.push_back({ar, 8, 8, "nvls", 480 * kG, 480 * kG, "GTC24 / GTC25 (NVLS); nccl-tests #212"});
    out.push_back({CollectiveKind::all_gather, 8, 8, "", 370 * kG, 370 * kG, "nccl-tests #212"});
    out.push_back({CollectiveKind::reduce_scatter, 8, 8, "", 370 * kG, 370 * kG, "nccl-tests #212"});
    out.push_back({ar, 32, 8, "", 370 * kG, 380 * kG, "GTC25 (370); GTC24 (380): DGX H100, 8x 400Gb RDMA"});
    out.push_back({CollectiveKind::all_to_all, 8, 8, "", 320 * kG, 320 * kG, "GTC25 S72583"});
  } else if (is_blackwell(fam) && cluster.nvlink_domain() == 8) {
    out.push_back({ar, 8, 8, "ring", 682 * kG, 682 * kG, "ml-engineering network/README.md: 8x B200, NVLS off"});
    out.push_back({ar, 8, 8, "nvls", 838 * kG, 838 * kG, "ml-engineering network/README.md: 8x B200"});
  } else if (is_blackwell(fam) && cluster.nvlink_domain() == 72) {
    out.push_back({ar, 72, 72, "", 835 * kG, 847 * kG, "coreweave/nccl-tests PR #43: GB200 NVL72 rack, 8 GiB"});
  }
  return out;
}

CostParams cost_params(const hw::Cluster& cluster, const Profile* profile) {
  const Profile built_in = profile != nullptr ? Profile{} : builtin_profile(cluster);
  const Profile& p = profile != nullptr ? *profile : built_in;
  CostParams costs{make_compute_params(cluster, p), make_comm_params(cluster, p), 0.0};
  costs.compute.slowest_gpu_factor =
      slowest_gpu_factor(cluster.total_gpus(), cluster.gpu_speed_spread);
  return costs;
}

}  // namespace tetra::costmodel
