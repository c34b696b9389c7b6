#pragma once
/// Fits of measured calibration tables (CPU, Eigen least squares). Every fit minimises the
/// squared *relative* error of the predicted time, so microsecond and second-long rows weigh
/// alike, and every fit is linear in its parameters (solved by a column-pivoting QR of the
/// row-weighted design matrix), so a fit is deterministic and needs no starting point.

#include <string>
#include <string_view>
#include <vector>

#include "tetra/costmodel/profile.hpp"

namespace tetra::calib {

/// Quality of one fit: how many rows it used and how well it reproduces them.
struct FitQuality {
  int rows = 0;            ///< rows used
  double rms_rel = 0;      ///< root mean square of (predicted - measured) / measured
  double max_rel = 0;      ///< largest |predicted - measured| / measured
};

/// Tile and device shape assumed by the GEMM fit (see GemmFit).
struct GemmFitOptions {
  int tile_m = 128;        ///< output tile rows of one thread block
  int tile_n = 128;        ///< output tile columns of one thread block
  int sms = 0;             ///< streaming multiprocessors; must be > 0
  /// Rows whose operand traffic at `hbm_Bps` would take more than this share of the measured
  /// time are memory-bound and left out (0 hbm_Bps keeps every row).
  double hbm_Bps = 0;
  double memory_bound_share = 0.5;
};

/// Wave-quantised GEMM model (NVIDIA "Matrix Multiplication Background User's Guide", wave
/// quantization):
///   waves = ceil(ceil(M/tile_m) * ceil(N/tile_n) / sms)
///   t     = launch_s + waves * (wave_s + tile_m * tile_n * 2K * sms / peak_flops)
/// `peak_flops` is the achievable tensor-core rate with full waves and long K (the MAMF of
/// `stas00/ml-engineering: compute/accelerator/README.md` when wave_s is 0); `wave_s` is the
/// per-wave prologue/epilogue cost that makes small-K GEMMs run below peak (arithmetic
/// intensity).
struct GemmFit {
  double peak_flops = 0;
  double launch_s = 0;
  double wave_s = 0;
  int tile_m = 128;
  int tile_n = 128;
  int sms = 0;
  FitQuality quality;
};

/// Waves of output tiles of an M x N GEMM (>= 1 for positive shapes).
[[nodiscard]] long long gemm_waves(long long m, long long n, int tile_m, int tile_n, int sms) noexcept;

/// Predicted seconds of one GEMM under `fit` (the model above).
[[nodiscard]] double gemm_seconds(const GemmFit& fit, long long m, long long n, long long k) noexcept;

/// Least-squares fit of the GEMM model on `rows`. The per-wave term is fitted from 12 usable
/// rows and the launch term from 6; with fewer they stay 0 and the peak absorbs them. Throws
/// tetra::UserError when no row is usable or `options.sms` is not positive.
[[nodiscard]] GemmFit fit_gemm(const std::vector<costmodel::GemmRow>& rows, const GemmFitOptions& options);

/// nccl-tests bus factor (NVIDIA/nccl-tests: doc/PERFORMANCE.md, src/*.cu `*GetBw`):
/// all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n;
/// send_recv 1. Unknown ops throw tetra::UserError.
[[nodiscard]] double bus_factor(std::string_view op, int ranks);

/// algbw = bytes / seconds; busbw = algbw * bus_factor (nccl-tests' definitions), bytes/s.
[[nodiscard]] double algbw_Bps(const costmodel::CollectiveRow& row) noexcept;
[[nodiscard]] double busbw_Bps(const costmodel::CollectiveRow& row);

/// One fitted collective line with its quality.
struct CollectiveLine {
  costmodel::CollectiveFit fit;
  FitQuality quality;
};

/// t(S) = latency_s + S * f / busbw_Bps (nccl-tests' busbw definition inverted) fitted per
/// (op, ranks, ranks_per_node, algorithm, protocol) group of rows; rows smaller than
/// `min_bytes` are left out (launch-dominated sizes that NCCL runs on fewer channels).
/// Groups come out sorted by that key. A group with fewer than 3 usable rows gets latency 0
/// (likewise the launch terms of the memory-bound and attention fits).
[[nodiscard]] std::vector<CollectiveLine> fit_collectives(const std::vector<costmodel::CollectiveRow>& rows,
                                                          double min_bytes = 0);

/// Predicted seconds of a collective of `bytes` (nccl-tests size) under `fit`.
[[nodiscard]] double collective_seconds(const costmodel::CollectiveFit& fit, double bytes);

/// t = launch_s + bytes / Bps (bytes over achieved bandwidth, plus a launch cost).
struct MemoryFit {
  costmodel::MemoryBoundFit fit;
  FitQuality quality;
};

/// One fit over all `rows` (kernel name "all") and one per kernel kind (sorted by name).
struct MemoryFits {
  MemoryFit all;
  std::vector<MemoryFit> per_kernel;
};

/// Fits memory-bound rows. Repeated calls whose data fits in the L2 cache run from it, not
/// from HBM: with `l2_bytes` known, a kernel with at least two rows above 2·L2 bytes moved
/// (an in-place kernel reads and writes each byte, so its data is half what it moves) is
/// fitted on those alone. Throws tetra::UserError when `rows` is empty.
[[nodiscard]] MemoryFits fit_memory_bound(const std::vector<costmodel::MemoryBoundRow>& rows, double l2_bytes = 0);

/// FlashAttention FLOP count of one call (Dao-AILab/flash-attention:
/// benchmarks/benchmark_flash_attention.py): forward 4*b*s^2*h*d, halved when causal;
/// backward 2.5 times the forward.
[[nodiscard]] double attention_flops(const costmodel::AttentionRow& row) noexcept;

/// Achieved attention rates: t = launch_s + flops / rate per pass, fitted on the rows of that
/// pass; 0 when a pass has no rows.
struct AttentionFit {
  double fwd_flops = 0;
  double bwd_flops = 0;
  FitQuality fwd_quality;
  FitQuality bwd_quality;
};
[[nodiscard]] AttentionFit fit_attention(const std::vector<costmodel::AttentionRow>& rows);

/// Options of the whole-profile fit.
struct ProfileFitOptions {
  int tile_m = 128;
  int tile_n = 128;
  int sms = 0;                       ///< 0: take profile.meta.sms, else guess from meta.gpu
  double collective_min_bytes = 0;
};

/// SM count of a device named like "NVIDIA A100-SXM4-80GB" / "H100" / "H200" (108 for A100,
/// 132 for H100 SXM and H200, 114 for H100 PCIe); 0 when unknown.
[[nodiscard]] int guess_sms(std::string_view gpu_name) noexcept;

/// Fits every table of `profile` that has rows and returns the ProfileFit (valid = true).
/// Tables without rows leave their fields at 0. Throws tetra::UserError when the GEMM table
/// has rows but the SM count is unknown.
[[nodiscard]] costmodel::ProfileFit fit_profile(const costmodel::Profile& profile,
                                                const ProfileFitOptions& options = {});

/// A short human-readable summary of a fit (one line per fitted quantity), for the CLI.
[[nodiscard]] std::string describe_fit(const costmodel::ProfileFit& fit);

}  // namespace tetra::calib
