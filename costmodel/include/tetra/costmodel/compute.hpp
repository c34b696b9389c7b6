#pragma once
/// Compute cost model (sources per item below; docs/architecture.md places it): the time of one
/// GEMM, attention call or memory-bound kernel on one GPU.
///
/// - GEMM: a wave-quantised roofline over thread-block tile shapes (NVIDIA *Matrix
///   Multiplication Background User's Guide*, "Tile/Wave Quantization"):
///     tiles = ceil(M/tm)·ceil(N/tn), waves = ceil(tiles / SMs)
///     t_math = waves·(wave_s + tm·tn·2K / (eff_tile · peak / SMs))
///     t_mem  = (MK + KN + MN)·dtype / hbm
///     t      = max(t_math, t_mem) + launch, minimised over the tile shapes
///   with `peak` the measured best-shape rate (MAMF: `stas00/ml-engineering:
///   compute/accelerator/README.md`, commit 29c6b708), not the datasheet.
/// - Attention: FlashAttention kernels priced from published (or measured) achieved TFLOP/s in
///   FlashAttention's FLOP convention (forward f = 4·b·s_q·s_kv·heads·d, halved when causal;
///   backward 2.5·f; `Dao-AILab/flash-attention: benchmarks/benchmark_flash_attention.py`),
///   interpolated in log(sequence) and log(head_dim); fused/torch (unfused) attention as the
///   batched GEMMs QKᵀ and AV over the full s² (no causal saving; softmax is a separate
///   memory-bound op in the op list).
/// - Memory-bound kernels: bytes / achieved HBM bandwidth + launch (achieved bandwidth as
///   streaming benchmarks measure it, e.g. `RRZE-HPC/gpu-benches` gpu-stream).
/// - The job's pace: every kernel time above is one median GPU's; a synchronous job runs its
///   tensor-core kernels at its slowest GPU's pace (`slowest_gpu_factor`).
/// - Measured rows of a calibration profile override the analytical value (see
///   `make_compute_params` and each function for the interpolation rule).
///
/// All functions are pure; `ComputeParams` is built once per (cluster, profile) and shared
/// read-only.

#include <vector>

#include "tetra/costmodel/profile.hpp"
#include "tetra/hw/cluster.hpp"
#include "tetra/ops/ops.hpp"

namespace tetra::costmodel {

/// One GEMM C[M,N] = A[M,K]·B[K,N].
struct GemmShape {
  long long m = 0, n = 0, k = 0;
  double dtype_bytes = 2;  ///< bytes per input element: 2 bf16, 1 FP8, 0.5 FP4
  int batch = 1;           ///< independent GEMMs of the same shape in one batched call
  parallel::GemmFormat format = parallel::GemmFormat::training;  ///< which peak the math runs at
};

/// A thread-block output tile the GEMM kernel may use, with its per-SM efficiency relative to
/// the best tile (smaller tiles reuse each loaded operand less).
struct GemmTile {
  int m = 128;
  int n = 128;
  double efficiency = 1.0;
};

/// Published or measured achieved attention rate at one point (FlashAttention FLOP count).
enum class AttentionRatePass { fwd, bwd, fwd_bwd };
struct AttentionRate {
  parallel::AttentionKernel kernel = parallel::AttentionKernel::flash2;
  AttentionRatePass pass = AttentionRatePass::fwd_bwd;
  int head_dim = 128;
  bool causal = true;
  long long seq = 0;     ///< sequence length of the benchmark point
  double flops = 0;      ///< achieved FLOP/s
};

/// Everything the compute model needs for one GPU kind.
struct ComputeParams {
  int sms = 132;                       ///< streaming multiprocessors
  double dense_peak_flops = 989e12;    ///< datasheet dense bf16 (reporting only)
  double gemm_peak_flops = 794.5e12;   ///< achievable GEMM rate (MAMF)
  double fp8_gemm_peak_flops = 0;      ///< achievable FP8 GEMM rate; 0 = no FP8 tensor cores
  double fp4_gemm_peak_flops = 0;      ///< achievable FP4 GEMM rate; 0 = no FP4 tensor cores
  double gemm_launch_s = 0;            ///< fixed cost per GEMM call
  double gemm_wave_s = 0;              ///< fixed cost per wave of tiles
  double hbm_Bps = 0;                  ///< achieved streaming bandwidth
  double kernel_launch_s = 0;          ///< fixed cost per memory-bound kernel
  /// Host (CPU) time the framework spends issuing one kernel from eager PyTorch, forward and
  /// autograd backward together, and one device-to-host round trip the host waits for
  /// (sim::HostCost). Measured on an H100 node's host (Xeon, PyTorch 2.11):
  /// tests/data/calib/h100_sxm_grouped_gemm.json `host` (a linear + SiLU step, 357 µs for 11
  /// kernels; `d2h_item_s` 25.8 µs) and h100_sxm_host_overhead.json (a per-expert loop of
  /// gated MLPs, 32.3 µs per added kernel over 1 to 32 experts; a second H100 node's host,
  /// h100_sxm_host_overhead_2.json, 39.0 µs).
  double host_kernel_s = 32.5e-6;
  double host_sync_s = 25.8e-6;
  /// Host time between the end of a dropless MoE dispatcher's wait for its token counts
  /// (ops::HostWait::token_counts) and its next launch, the dispatcher's Python once the counts
  /// arrive; the GPU is idle throughout. From an Nsight profile of Megatron-Bridge's
  /// Qwen3-30B-A3B pretraining on 16 H100 (NVIDIA-NeMo/Megatron-Bridge
  /// skills/nemo-mbridge-perf-expert-parallel-overlap/SKILL.md, "HybridEP Production-Shape
  /// Benchmark", overlap off): a step of 24.714 s of which the GPU is active 22.821 s, 1.893 s
  /// idle with 3,072 waits a step (48 layers x 64 micro-batches); with host_kernel_s and
  /// host_sync_s alone the replay of that run leaves 0.338 s idle, the rest is 0.51 ms a wait.
  double host_resume_s = 0.51e-3;
  std::vector<GemmTile> tiles;         ///< candidate tiles; empty = {128x128, 1.0}
  std::vector<AttentionRate> attention_rates;  ///< published tables (sorted by build)
  // Measured tables (override the analytical value where present).
  std::vector<GemmRow> gemm_rows;              ///< sorted by (n, k, m)
  std::vector<AttentionRow> attention_rows;
  std::vector<MemoryBoundRow> memory_rows;     ///< sorted by (kernel, bytes)
  std::vector<MemoryBoundFit> memory_fits;
  // Cluster factors (factors.hpp): op_seconds divides each kind's time by its factor.
  double gemm_factor = 1.0;
  double attention_factor = 1.0;
  double memory_bound_factor = 1.0;
  /// The host's speed over the recorded hosts': host_kernel_s, host_sync_s, host_resume_s and
  /// the data loader's time (costmodel/data_loader.hpp) are divided by it.
  double host_factor = 1.0;
  /// The slowest GPU's time over the median GPU's (slowest_gpu_factor); multiplies the GEMM and
  /// attention times (memory-bound kernels follow HBM, not the SM clock).
  double slowest_gpu_factor = 1.0;
};

/// Analytical GEMM estimate with the tile that won.
struct GemmEstimate {
  double seconds = 0;
  int tile_m = 0, tile_n = 0;
  long long tiles = 0;
  long long waves = 0;
  bool memory_bound = false;
};

/// The achievable rate of a GEMM in `format` (falls back to the training-precision rate where
/// the GPU has no faster tensor cores).
[[nodiscard]] double gemm_peak(parallel::GemmFormat format, const ComputeParams& p) noexcept;

/// Wave-quantised roofline only (no measured rows).
[[nodiscard]] GemmEstimate gemm_roofline(const GemmShape& shape, const ComputeParams& p) noexcept;

/// GEMM time. Measured rows (training precision) apply to training-precision GEMMs only. With
/// measured rows: an exact (m, n, k) row is used as is; otherwise rows with the
/// same (n, k) (the same weight, other token counts) are interpolated linearly in
/// (log m, log t) between the two nearest bracketing m, and a shape outside their range (or with
/// no same-(n, k) rows) takes the analytical time scaled by the measured/analytical ratio of
/// the row nearest in log FLOPs. Without rows: `gemm_roofline`.
[[nodiscard]] double gemm_seconds(const GemmShape& shape, const ComputeParams& p) noexcept;

/// Achieved FLOP/s the attention model uses for one call (FlashAttention FLOP count).
[[nodiscard]] double attention_rate_flops(const ops::AttentionShape& a, bool backward,
                                          const ComputeParams& p) noexcept;

/// FlashAttention's FLOP count of one call: forward 4·b·s_q·s_kv·heads·d (/2 causal),
/// backward 2.5 × forward.
[[nodiscard]] double attention_kernel_flops(const ops::AttentionShape& a, bool backward) noexcept;

/// What an attention call's grid keeps busy of the GPU, over what the grid `bench` keeps busy
/// (the rates tables were measured at `bench`). The kernel runs one CTA per 128 query rows
/// (forward) or 128 key rows (backward) of each (sequence, head), launched in grid order (row
/// tile fastest, then head, then sequence) onto the SMs' CTA slots (FlashAttention-2: two per SM
/// forward, one backward, flash_fwd/bwd_launch_template.h; FlashAttention-3 and cuDNN: one);
/// each CTA computes the 128 x 128 blocks of its rows, all of them without a mask, those up to
/// the diagonal under the causal mask, and a new CTA starts on the slot that frees first. The
/// busy share is the blocks computed over slots x the time to the last CTA's end: a last wave
/// that does not fill the SMs, and under the causal mask the heaviest CTAs of the last heads
/// running alone, leave SMs idle. Measured on an H200 with cuDNN 9.19 (causal forward, 8192
/// tokens: 8 heads 467 TFLOP/s, 32 heads 592; tests/data/calib/h200_sxm_attention_chunks.json).
[[nodiscard]] double attention_grid_share(const ops::AttentionShape& a, bool backward, int sms,
                                          const ops::AttentionShape& bench) noexcept;

/// The grid of the FlashAttention benchmarks the published rates come from (FA2 arXiv
/// 2307.08691 §4.1, FA3 arXiv 2407.08608 §4.1): 16k tokens in sequences of the call's length
/// (the geometric mean of its query and key lengths), hidden 2048 (2048 / head_dim heads).
[[nodiscard]] ops::AttentionShape benchmark_grid(const ops::AttentionShape& a) noexcept;

/// Time of one attention call (forward, or backward when `backward`), one repetition.
[[nodiscard]] double attention_seconds(const ops::AttentionShape& a, bool backward,
                                       const ComputeParams& p) noexcept;

/// Time of one memory-bound kernel moving `bytes` (read + write). Measured rows of the same
/// kernel are interpolated in (log bytes, log t); a per-kernel fit is used next; else
/// bytes / hbm_Bps + kernel_launch_s.
[[nodiscard]] double memory_bound_seconds(ops::MemoryKernel kernel, double bytes,
                                          const ComputeParams& p) noexcept;

/// Expected largest of `n` independent standard normal draws, by Blom's approximation (G. Blom,
/// *Statistical Estimates and Transformed Beta-Variables*, 1958): the normal quantile at
/// (n - 0.375) / (n + 0.25). Within 5 % of the exact values (H. L. Harter, Biometrika 48, 1961:
/// 0.5642 for 2 draws, 1.5388 for 10, 2.5076 for 100, 3.2414 for 1000); 0 for one draw.
[[nodiscard]] double expected_max_standard_normal(long long n);

/// The pace of a synchronous job over that of its median GPU: each step waits at its
/// collectives for the slowest of the job's `gpus` GPUs, whose compute takes
/// 1 + spread · E[max of `gpus` standard normals] of the median's (`spread`:
/// hw::Cluster::gpu_speed_spread). 1 for one GPU or no spread.
[[nodiscard]] double slowest_gpu_factor(long long gpus, double spread);

/// Time of one repetition of a compute op (gemm, attention or memory_bound) over its kind's
/// cluster factor (`gemm_factor`, ...), at the job's slowest GPU's pace; 0 for others.
[[nodiscard]] double op_seconds(const ops::Op& op, const ComputeParams& p) noexcept;

}  // namespace tetra::costmodel
