// Compute model (costmodel/include/tetra/costmodel/compute.hpp; MAMF of stas00/ml-engineering
// compute/accelerator/README.md, Dao-AILab/flash-attention README figures, RRZE-HPC/gpu-benches
// gpu-stream).
#include <doctest/doctest.h>
#include "support/approx.hpp"

#include <cmath>

#include "tetra/costmodel/builtin_profiles.hpp"
#include "tetra/costmodel/compute.hpp"
#include "tetra/hw/presets.hpp"

using tetra::test::approx;
using namespace tetra;
using namespace tetra::costmodel;

namespace {

hw::Cluster cluster(const char* name) {
  auto c = hw::find_cluster_preset(name);
  REQUIRE(c);
  return *c;
}

ComputeParams builtin_params(const char* name) {
  const hw::Cluster c = cluster(name);
  return make_compute_params(c, builtin_profile(c));
}

double rate(const GemmShape& s, double seconds) {
  return 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k) / seconds;
}

}  // namespace

TEST_SUITE("costmodel") {
  TEST_CASE("Wave quantisation by hand: one tile shape, 132 SMs (NVIDIA Matmul Background Guide)") {
    ComputeParams p;
    p.sms = 132;
    p.gemm_peak_flops = 794.5e12;
    p.hbm_Bps = 1e18;  // no memory term
    p.tiles = {GemmTile{128, 128, 1.0}};
    // M = 1536 = 12 tiles, N = 1408 = 11 tiles: 132 tiles = 1 wave.
    // One wave: 2*128*128*4096 FLOP / (794.5e12/132) = 134,217,728 / 6.01894e12 = 22.299 us.
    const GemmEstimate one = gemm_roofline(GemmShape{1536, 1408, 4096, 2, 1}, p);
    CHECK(one.tiles == 132);
    CHECK(one.waves == 1);
    CHECK(one.seconds == approx(22.299e-6).epsilon(1e-3));
    // One more tile row: 13 x 11 = 143 tiles = 2 waves, twice the time for 8 % more work.
    const GemmEstimate two = gemm_roofline(GemmShape{1537, 1408, 4096, 2, 1}, p);
    CHECK(two.waves == 2);
    CHECK(two.seconds == approx(2 * 22.299e-6).epsilon(1e-3));
  }

  TEST_CASE("FP8 GEMM by hand: the same waves at the FP8 MAMF (ml-engineering: H100 1402.6)") {
    ComputeParams p;
    p.sms = 132;
    p.gemm_peak_flops = 794.5e12;
    p.fp8_gemm_peak_flops = 1402.6e12;
    p.tiles = {GemmTile{128, 128, 1.0}};
    p.hbm_Bps = 1e18;  // no memory bound
    // 8192^3: 64 x 64 = 4096 tiles -> ceil(4096/132) = 32 waves; one tile 2*128*128*8192 =
    // 268,435,456 FLOP at 1402.6e12/132 FLOP/s per SM = 25.2628 us -> 808.41 us.
    GemmShape fp8{8192, 8192, 8192, 1.0, 1, parallel::GemmFormat::fp8};
    CHECK(gemm_roofline(fp8, p).seconds == approx(32 * 268435456.0 / (1402.6e12 / 132)));
    CHECK(gemm_roofline(fp8, p).seconds == approx(808.41e-6).epsilon(1e-4));
    GemmShape bf16{8192, 8192, 8192, 2.0, 1, parallel::GemmFormat::training};
    CHECK(gemm_roofline(bf16, p).seconds / gemm_roofline(fp8, p).seconds ==
          approx(1402.6 / 794.5));
    // FP4 on a GPU without FP4 rates falls back to FP8, FP8 without FP8 to the bf16 rate.
    CHECK(gemm_peak(parallel::GemmFormat::fp4, p) == 1402.6e12);
    p.fp8_gemm_peak_flops = 0;
    CHECK(gemm_peak(parallel::GemmFormat::fp8, p) == 794.5e12);
  }

  TEST_CASE("Built-in FP8 rates: sustained on Hopper, scaled with a calibrated bf16 rate (MAMF)") {
    const auto h100 = hw::find_gpu_preset("h100-sxm-80gb");
    const auto a100 = hw::find_gpu_preset("a100-sxm-80gb");
    REQUIRE(h100);
    REQUIRE(a100);
    // The built-in bf16 rate, MAMF 794.5 x 1377.3 / 1402.6 = 780.17, gives the sustained FP8
    // rate of Azure's ND H100 v5 run, 1377.3; the MAMF bf16 rate gives the FP8 MAMF.
    CHECK(low_precision_gemm_rates(*h100, 794.5e12 * 1377.3 / 1402.6).fp8_flops == approx(1377.3e12));
    CHECK(low_precision_gemm_rates(*h100, 794.5e12).fp8_flops == approx(1402.6e12));
    // A calibrated bf16 rate of 700 moves FP8 with it: 1402.6 * 700 / 794.5 = 1235.78.
    CHECK(low_precision_gemm_rates(*h100, 700e12).fp8_flops == approx(1235.78e12).epsilon(1e-5));
    CHECK(low_precision_gemm_rates(*h100, 794.5e12).fp4_flops == 0.0);
    CHECK(low_precision_gemm_rates(*a100, 251e12).fp8_flops == 0.0);
  }

  TEST_CASE("Wave quantisation is visible for small shapes with the built-in tile set") {
    const ComputeParams p = builtin_params("dgx-h100");
    const GemmShape full{3072, 1408, 4096, 2, 1};   // 12 x 11 tiles of 256x128 = 132: one wave
    const GemmShape tail{3200, 1408, 4096, 2, 1};   // 4 % more rows, a nearly empty extra wave
    const double r_full = rate(full, gemm_seconds(full, p));
    const double r_tail = rate(tail, gemm_seconds(tail, p));
    CHECK(r_tail < 0.75 * r_full);
  }

  TEST_CASE("Large square bf16 GEMM runs at the sustained MAMF (ml-engineering)") {
    // stas00/ml-engineering MAMF table: H100 SXM 794.5, A100 SXM 271.2 TFLOP/s, short runs.
    // The built-ins hold them at what the tensor cores sustain for minutes at the rated power:
    // the A100 at 1305 of 1410 MHz (glennklockwood.com/garden/peak-FLOPS, NVIDIA's HPL Rpeak
    // clock), 271.2 * 1305 / 1410 = 251.0; the H100 at cuBLASLt's 16384^3 rate after 10,000
    // warm-up iterations over the MAMF (Azure ND H100 v5, FP8 1377.3 / 1402.6),
    // 794.5 * 0.981962 = 780.17 TFLOP/s.
    const GemmShape s{16384, 16384, 16384, 2, 1};
    const double h100 = rate(s, gemm_seconds(s, builtin_params("dgx-h100")));
    const double a100 = rate(s, gemm_seconds(s, builtin_params("dgx-a100-80gb")));
    CHECK(h100 == approx(780.17e12).epsilon(0.05));
    CHECK(a100 == approx(251.0e12).epsilon(0.05));
    CHECK(a100 <= 251.0e12);
    CHECK(h100 <= 780.17e12);
  }

  TEST_CASE("Measured GEMM rows override the roofline (log-space interpolation)") {
    ComputeParams p = builtin_params("dgx-h100");
    p.gemm_rows = {GemmRow{1024, 4096, 4096, "bf16", 10e-6}, GemmRow{4096, 4096, 4096, "bf16", 40e-6}};
    CHECK(gemm_seconds(GemmShape{1024, 4096, 4096, 2, 1}, p) == approx(10e-6));
    // m = 2048 halfway in log m between 1024 and 4096: exp(mid of ln 10us, ln 40us) = 20 us.
    CHECK(gemm_seconds(GemmShape{2048, 4096, 4096, 2, 1}, p) == approx(20e-6));
    // Outside the rows: roofline scaled by the nearest row's measured/model ratio.
    const GemmShape big{8192, 4096, 4096, 2, 1};
    const double model_big = gemm_roofline(big, p).seconds;
    const double model_row = gemm_roofline(GemmShape{4096, 4096, 4096, 2, 1}, p).seconds;
    CHECK(gemm_seconds(big, p) == approx(model_big * 40e-6 / model_row));
  }

  TEST_CASE("FlashAttention-2 time from the published fwd+bwd rate (flash-attention README)") {
    const ComputeParams p = builtin_params("dgx-h100");
    // H100, head dim 128, causal, 8k: 308 TFLOP/s in the short benchmark, held at the share
    // an H100 sustains at 700 W, 1377.3 / 1402.6 = 0.981962 (Azure ND H100 v5 FP8 16384^3 after
    // 10,000 warm-up iterations over the FP8 MAMF): 302.444 TFLOP/s.
    // At the benchmark's own grid (16k tokens: 2 sequences of 8192, 16 heads of 128) the call
    // runs at the table's rate. f = 4*2*8192^2*16*128/2 = 5.49756e11 FLOP.
    ops::AttentionShape a{parallel::AttentionKernel::flash2, true, 2, 8192, 8192, 16, 4, 128};
    CHECK(attention_kernel_flops(a, false) == approx(5.49756e11).epsilon(1e-5));
    // forward: 5.49756e11 / 302.444e12 = 1.81771 ms (+ 2 us launch); backward 2.5x the FLOPs.
    CHECK(attention_seconds(a, false, p) == approx(1.81771e-3 + 2e-6).epsilon(1e-4));
    CHECK(attention_seconds(a, true, p) == approx(2.5 * 1.81771e-3 + 2e-6).epsilon(1e-4));
    // s = 3000 between 2k (265) and 4k (294): 265 + 29 * ln(3000/2048)/ln 2 = 280.97 TFLOP/s,
    // x 0.981962 = 275.90.
    // (16384 / 3000 = 5 sequences in the benchmark grid.)
    a.seq_q = a.seq_kv = 3000;
    a.batch = 5;
    CHECK(attention_rate_flops(a, false, p) == approx(280.97e12 * 0.981962).epsilon(1e-4));
    // A100 has no FlashAttention-3: flash3 runs at the FA2 rate (hd 128 causal 8k: 182).
    const ComputeParams pa = builtin_params("dgx-a100-80gb");
    a.kernel = parallel::AttentionKernel::flash3;
    a.seq_q = a.seq_kv = 8192;
    a.batch = 2;
    CHECK(attention_rate_flops(a, false, pa) == approx(182e12));
    // H100 FA3 forward, hd 128 causal 8k: 602 TFLOP/s x 0.981962 = 591.14.
    CHECK(attention_rate_flops(a, false, p) == approx(602e12 * 1377.3 / 1402.6));
    // cuDNN's fused attention (Transformer Engine's choice on Hopper) at the FA3 rates: forward
    // 591.14; backward 1.5 x the FA2 fwd+bwd rate 302.444 = 453.67 TFLOP/s, under the forward.
    // On the A100 (no FA3 table) at FA2's 182.
    a.kernel = parallel::AttentionKernel::cudnn;
    CHECK(attention_rate_flops(a, false, p) == approx(602e12 * 1377.3 / 1402.6));
    CHECK(attention_rate_flops(a, true, p) == approx(1.5 * 308e12 * 1377.3 / 1402.6));
    CHECK(attention_rate_flops(a, false, pa) == approx(182e12));
  }

  TEST_CASE("FlashAttention (v1) and the Triton FlashAttention at their published fwd+bwd bars") {
    // Dao-AILab/flash-attention assets/flash2_a100_fwd_bwd_benchmark.png, panel (d) causal
    // head dim 128: at 4k "FlashAttention" 76, "FlashAttention Triton" 74, FlashAttention-2 173.
    const ComputeParams pa = builtin_params("dgx-a100-80gb");
    ops::AttentionShape a{parallel::AttentionKernel::triton, true, 1, 4096, 4096, 32, 8, 128};
    CHECK(attention_rate_flops(a, false, pa) == approx(74e12));
    a.kernel = parallel::AttentionKernel::flash1;
    CHECK(attention_rate_flops(a, false, pa) == approx(76e12));
    // Panel (a), non-causal head dim 64 at 16k: Triton 100 (FlashAttention-2 176).
    a.kernel = parallel::AttentionKernel::triton;
    a.causal = false;
    a.head_dim = 64;
    a.seq_q = a.seq_kv = 16384;
    CHECK(attention_rate_flops(a, false, pa) == approx(100e12));
    // H100 (flash2_h100_fwd_bwd_benchmark.png) has FlashAttention bars but no Triton ones: the
    // Triton kernel runs at FlashAttention's, panel (d) causal hd 128 at 4k: 126, at the
    // sustained share 0.981962.
    const ComputeParams p = builtin_params("dgx-h100");
    a.causal = true;
    a.head_dim = 128;
    a.seq_q = a.seq_kv = 4096;
    CHECK(attention_rate_flops(a, false, p) == approx(126e12 * 1377.3 / 1402.6));
    a.kernel = parallel::AttentionKernel::flash1;
    CHECK(attention_rate_flops(a, false, p) == approx(126e12 * 1377.3 / 1402.6));
  }

  TEST_CASE("Unfused attention is priced as GEMMs over the full s^2") {
    const ComputeParams p = builtin_params("dgx-h100");
    ops::AttentionShape a{parallel::AttentionKernel::torch, true, 1, 4096, 4096, 32, 8, 128};
    const double t = attention_seconds(a, false, p);
    const double qk = gemm_roofline(GemmShape{4096, 4096, 128, 2, 32}, p).seconds;
    const double pv = gemm_roofline(GemmShape{4096, 128, 4096, 2, 32}, p).seconds;
    CHECK(t == approx(qk + pv));
    CHECK(attention_seconds(a, true, p) == approx(2 * t));
  }

  TEST_CASE("Memory-bound kernels: bytes / achieved HBM + launch") {
    const ComputeParams h = builtin_params("dgx-h100");
    // 1 GB at 0.9 x 3.35 TB/s = 3.015 TB/s -> 331.67 us, + 2 us launch.
    CHECK(memory_bound_seconds(ops::MemoryKernel::rmsnorm, 1e9, h) == approx(333.67e-6).epsilon(1e-4));
    // A100 80GB: gpu-stream triad 1794 GB/s -> 557.41 us + 2 us.
    const ComputeParams a = builtin_params("dgx-a100-80gb");
    CHECK(memory_bound_seconds(ops::MemoryKernel::adam, 1e9, a) == approx(559.41e-6).epsilon(1e-4));
    // Measured rows of the kernel win: 1 MB 10 us, 100 MB 100 us -> 10 MB at 31.623 us (log-log).
    ComputeParams m = h;
    m.memory_rows = {MemoryBoundRow{"swiglu", 1e6, 10e-6}, MemoryBoundRow{"swiglu", 1e8, 100e-6}};
    CHECK(memory_bound_seconds(ops::MemoryKernel::swiglu, 1e7, m) == approx(31.623e-6).epsilon(1e-4));
    CHECK(memory_bound_seconds(ops::MemoryKernel::rope, 1e9, m) == approx(333.67e-6).epsilon(1e-4));
  }
}

TEST_SUITE("costmodel") {
  TEST_CASE("Blackwell GEMM ceilings: MAMF held under load (builtin_profiles.cpp [MAMF-B], [AZ-GB])") {
    // Share a GB200 holds under long load: Azure/AI-benchmarking-guide ND_GB200_v6_results.md,
    // cuBLASLt FP8 16384^3 after 10,000 warm-ups 2906.9 TFLOP/s, against ml-engineering's MAMF
    // 3615.6: 0.80398.
    const double share = 2906.9 / 3615.6;
    const ComputeParams gb200 = builtin_params("gb200-nvl72");
    // BF16: MAMF 1822.0 x 0.80398 = 1464.85 TFLOP/s; FP8: 3615.6 x 0.80398 = 2906.9.
    CHECK(gb200.gemm_peak_flops == approx(1822.0e12 * share));
    CHECK(gb200.gemm_peak_flops / 1e12 == approx(1464.85).epsilon(1e-4));
    CHECK(gb200.fp8_gemm_peak_flops / 1e12 == approx(2906.9).epsilon(1e-6));
    // FP4: Azure's 7627.6 of 10,000 TFLOP/s.
    CHECK(gb200.fp4_gemm_peak_flops / 1e12 == approx(7627.6).epsilon(1e-6));
    // B200 (MAMF 1745.0 / 3432.5) at GB200's share; FP4 0.76276 x 9000 = 6864.84.
    const ComputeParams b200 = builtin_params("dgx-b200");
    CHECK(b200.gemm_peak_flops == approx(1745.0e12 * share));
    CHECK(b200.fp8_gemm_peak_flops == approx(3432.5e12 * share));
    CHECK(b200.fp4_gemm_peak_flops / 1e12 == approx(6864.84).epsilon(1e-6));
    // GB300 at 1400 W is unthrottled: GB200's MAMF as measured; FP4 0.76276 x 15000 = 11441.4.
    const ComputeParams gb300 = builtin_params("gb300-nvl72");
    CHECK(gb300.gemm_peak_flops == approx(1822.0e12));
    CHECK(gb300.fp8_gemm_peak_flops == approx(3615.6e12));
    CHECK(gb300.fp4_gemm_peak_flops / 1e12 == approx(11441.4).epsilon(1e-6));
  }
}

TEST_SUITE("costmodel") {
  TEST_CASE("Expected slowest of n GPUs: Blom's normal quantile against Harter's exact table") {
    // Harter (Biometrika 48, 1961), expected largest of n standard normals.
    CHECK(expected_max_standard_normal(1) == 0.0);
    CHECK(expected_max_standard_normal(2) == approx(0.5642).epsilon(0.05));
    CHECK(expected_max_standard_normal(10) == approx(1.5388).epsilon(0.01));
    CHECK(expected_max_standard_normal(100) == approx(2.5076).epsilon(0.01));
    CHECK(expected_max_standard_normal(1000) == approx(3.2414).epsilon(0.01));
    // By hand: 16,384 GPUs, quantile at (16384 - 0.375) / 16384.25 = 0.999961851 -> 3.95576.
    CHECK(expected_max_standard_normal(16384) == approx(3.95576).epsilon(1e-4));
  }

  TEST_CASE("A synchronous job runs at its slowest GPU's pace (Sinha et al., SC22: 1 % spread)") {
    // 1 + 0.01 x 3.95576 for Llama 3's 16,384 GPUs; 1 + 0.01 x 1.43420 for one 8-GPU node.
    CHECK(slowest_gpu_factor(16384, 0.01) == approx(1.0395576).epsilon(1e-6));
    CHECK(slowest_gpu_factor(8, 0.01) == approx(1.0143420).epsilon(1e-6));
    CHECK(slowest_gpu_factor(1, 0.01) == 1.0);
    CHECK(slowest_gpu_factor(4096, 0.0) == 1.0);
    // cost_params sets it from the cluster; it scales tensor-core ops (GEMM, attention), whose
    // pace follows the SM clock that power management sets, and leaves HBM-bound kernels alone.
    hw::Cluster c = cluster("dgx-h100");
    c.nodes = 2048;
    const CostParams costs = cost_params(c);
    CHECK(costs.compute.slowest_gpu_factor == approx(1.0395576).epsilon(1e-6));
    ComputeParams median = costs.compute;
    median.slowest_gpu_factor = 1.0;
    ops::Op gemm;
    gemm.kind = ops::OpKind::gemm;
    gemm.m = 8192;
    gemm.n = 8192;
    gemm.k = 8192;
    CHECK(op_seconds(gemm, costs.compute) == approx(op_seconds(gemm, median) * 1.0395576).epsilon(1e-6));
    ops::Op norm;
    norm.kind = ops::OpKind::memory_bound;
    norm.mem = ops::MemoryKernel::rmsnorm;
    norm.bytes = 1e9;
    CHECK(op_seconds(norm, costs.compute) == approx(op_seconds(norm, median)).epsilon(1e-12));
    c.gpu_speed_spread = 0.0;
    CHECK(cost_params(c).compute.slowest_gpu_factor == 1.0);
  }
}

TEST_SUITE("costmodel") {
  TEST_CASE("attention grid: a last wave and the causal tail leave SMs idle (FA2 launch templates, FA3 tile_size.h)") {
    // A100, 108 SMs; Llama 3.1 8B at TP 2 (16 heads of 128) and CP 4 on 8192 tokens: a ring step
    // of 2048 queries against 1024 keys, no mask.
    ops::AttentionShape a{parallel::AttentionKernel::flash2, false, 1, 2048, 1024, 16, 4, 128};
    // FA2 forward: 16 query tiles x 16 heads = 256 CTAs of 8 key blocks on 2 x 108 slots: 216
    // run to t = 8, the other 40 to t = 16: 2048 / (216 x 16) = 0.59259 busy. The benchmark grid
    // at sqrt(2048 x 1024) = 1448 tokens: 16384 / 1448 = 11 sequences x 16 heads x 12 tiles =
    // 2112 CTAs of 12 blocks, 10 waves: 25344 / (216 x 120) = 0.97778. 0.59259 / 0.97778.
    const ops::AttentionShape bench = benchmark_grid(a);
    CHECK(bench.seq_q == 1448);
    CHECK(bench.batch == 11);
    CHECK(bench.heads == 16);
    CHECK(attention_grid_share(a, false, 108, bench) == approx(0.59259 / 0.97778).epsilon(1e-4));
    // The same call with 128 heads: 2048 CTAs, 10 waves of 216: 16384 / (216 x 80) = 0.94815,
    // and the built-in A100 rate (the published FA2 table) follows the share: 0.59259 / 0.94815.
    const ComputeParams p = builtin_params("dgx-a100-80gb");
    ops::AttentionShape wide = a;
    wide.heads = 128;
    CHECK(attention_grid_share(wide, false, 108, bench) == approx(0.94815 / 0.97778).epsilon(1e-4));
    CHECK(attention_rate_flops(a, false, p) == approx(0.625 * attention_rate_flops(wide, false, p)).epsilon(1e-4));

    // The causal tail on a 4-SM GPU (cuDNN: one CTA per SM), 2 heads of 512 tokens: forward CTAs
    // compute 1, 2, 3, 4 blocks per head in launch order. The first head fills the slots (free at
    // 1, 2, 3, 4); the second head's 1 ends at 2, its 2 at 4, its 3 at 5, its 4 at 7:
    // 20 blocks / (4 x 7) = 0.71429 against a grid that fills all four slots exactly (four
    // 128 x 128 unmasked calls).
    ops::AttentionShape causal{parallel::AttentionKernel::cudnn, true, 1, 512, 512, 2, 2, 128};
    const ops::AttentionShape full{parallel::AttentionKernel::cudnn, false, 1, 512, 128, 1, 1, 128};
    CHECK(attention_grid_share(causal, false, 4, full) == approx(20.0 / 28.0).epsilon(1e-9));
    // The backward launches each head's key tiles heaviest first (4, 3, 2, 1 query blocks): the
    // second head's 4, 3, 2, 1 take the slots freeing at 1, 2, 3, 4 and all end at 5: 20 / 20
    // (against four unmasked key tiles of one block each).
    const ops::AttentionShape full_keys{parallel::AttentionKernel::cudnn, false, 1, 128, 512, 1, 1, 128};
    CHECK(attention_grid_share(causal, true, 4, full_keys) == approx(1.0).epsilon(1e-9));
    // A grid past the simulated size (64 sequences x 128 heads x 1024 query tiles = 8,388,608
    // CTAs of 1024 blocks, no mask, 132 slots) takes the closed form: total / (total + slots x
    // largest / 2) = 8388608 / (8388608 + 66), against a grid of 132 one-block CTAs that fills
    // the slots exactly.
    const ops::AttentionShape huge{parallel::AttentionKernel::cudnn, false, 64, 131072, 131072, 128, 8, 128};
    const ops::AttentionShape one_wave{parallel::AttentionKernel::cudnn, false, 1, 128, 128, 132, 132, 128};
    CHECK(attention_grid_share(huge, false, 132, one_wave) == approx(8388608.0 / 8388674.0).epsilon(1e-12));

    // Measured on an H200 (132 SMs), cuDNN 9.19, causal forward over 8192 tokens
    // (tests/data/calib/h200_sxm_attention_chunks.json): 8 heads 467 TFLOP/s, 32 heads 592, 0.789
    // of it. The grid model: 512 CTAs keep 0.7594 busy, 2048 keep 0.9269 (the same list schedule
    // computed independently of this code), 0.819 of it.
    ops::AttentionShape tp4{parallel::AttentionKernel::cudnn, true, 1, 8192, 8192, 8, 2, 128};
    ops::AttentionShape tp1 = tp4;
    tp1.heads = 32;
    tp1.kv_heads = 8;
    CHECK(attention_grid_share(tp4, false, 132, tp1) == approx(0.7594 / 0.9269).epsilon(1e-3));
  }
}
