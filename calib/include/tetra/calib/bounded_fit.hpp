#pragma once
/// Fits that physics bounds: what a profile imported from a trace may claim about its GPU.
///
/// A trace of a real run holds whatever kernels the run launched: copies that ran from L2,
/// launch-bound one-row shapes, fp32 GEMMs next to bf16 ones. `fit_bounded` fits such rows only
/// where the datasheet of the GPU they were recorded on allows:
///   - no row and no fit faster than the datasheet: a GEMM or attention row above the dense
///     peak of its dtype, a memory-bound row above the HBM bandwidth, a collective row above the
///     link bandwidth is dropped (a timing, shape or linking error, or data that stayed in L2);
///   - memory-bound rows that move no more than twice the last-level cache stay out of the HBM
///     fit (repeated calls on data that fits run from the cache);
///   - GEMM rows that would be memory-bound at the datasheet HBM bandwidth stay out of the GEMM
///     fit, which only takes bf16 / fp16 rows (the rate the cost model scales);
///   - a table with fewer usable rows than its minimum is not fitted: its fit fields stay 0, which
///     the cost model reads as "take the built-in value" (costmodel::make_compute_params);
///   - each table is fitted on its own: one that fails never stops another.
/// Every decision is written into a per-table report for the CLI summary.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tetra/costmodel/profile.hpp"

namespace tetra::calib {

/// Datasheet numbers of one GPU (dense rates, no sparsity). 0 = not supported / unknown.
struct DeviceSpec {
  std::string key;            ///< short name: "a100-sxm-80gb", "h100-sxm", "mi300x", ...
  std::string name;           ///< marketing name
  double fp32_flops = 0;      ///< SIMT / vector FP32 (AMD: FP32 matrix, what rocBLAS uses)
  double tf32_flops = 0;      ///< TF32 tensor cores (AMD MI300X: TF32 matrix)
  double bf16_flops = 0;      ///< BF16 / FP16 tensor cores
  double fp8_flops = 0;       ///< FP8 tensor cores
  double hbm_Bps = 0;         ///< HBM bandwidth
  double l2_bytes = 0;        ///< last-level cache (L2; AMD CDNA 3: the 256 MB Infinity Cache)
  double link_Bps = 0;        ///< GPU-to-GPU link per direction (NVLink / Infinity Fabric)
  int sms = 0;                ///< SMs (AMD: compute units)
  double memory_bytes = 0;    ///< device memory
  std::string source;         ///< datasheet the numbers come from
};

/// The spec of a device named as a driver reports it ("NVIDIA A100-SXM4-80GB", "Tesla
/// V100-SXM2-32GB", "NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA B200", "AMD Instinct
/// MI300X") or by its key ("a100-sxm-80gb", "h100-sxm", "mi250"); `memory_bytes` (Kineto's
/// totalGlobalMem, 0 unknown) tells the 40 GB and 80 GB A100 apart. nullopt when unknown.
[[nodiscard]] std::optional<DeviceSpec> find_device(std::string_view name, double memory_bytes = 0);

/// Keys of every known device, for error messages.
[[nodiscard]] std::string known_devices();

/// Dense peak for a GEMM of `dtype` ("fp32", "tf32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2");
/// 0 when the device has none or the dtype is unknown. "fp32" is bounded by the TF32 rate
/// where the GPU has one (PyTorch may run an fp32 matmul on TF32 tensor cores, and the kernel
/// name does not always say so).
[[nodiscard]] double peak_flops(const DeviceSpec& dev, std::string_view dtype) noexcept;

/// Whether two device names are the same GPU model (same key after find_device, or the same
/// text when neither is known).
[[nodiscard]] bool same_device(std::string_view a, std::string_view b) noexcept;

/// Minimum rows per fitted table (below: the built-in value is kept).
struct BoundedFitOptions {
  int min_gemm_rows = 6;         ///< bf16 / fp16 rows (the launch term needs 6)
  int min_attention_rows = 3;    ///< per pass
  int min_memory_rows = 3;       ///< rows above 2 x L2, all kernels together
  int min_collective_rows = 3;   ///< per (op, ranks) group
  int tile_m = 128;
  int tile_n = 128;
  /// Ranks whose traces timed the collective rows (rank_merge.hpp); 0 or 1: one rank's own
  /// kernel times, which hold the wait for the other ranks (the report says which).
  int merged_ranks = 0;
};

/// What happened to one table.
struct TableReport {
  std::string table;                  ///< gemm | attention | memory_bound | collective
  int rows = 0;                       ///< rows found
  int kept = 0;                       ///< rows written to the profile
  int fitted_rows = 0;                ///< rows the fit used
  bool fitted = false;                ///< a fit was written (else the built-in is kept)
  std::map<std::string, int> dropped; ///< reason -> rows dropped from the profile
  std::map<std::string, int> unfitted;///< reason -> rows kept but left out of the fit
  std::vector<std::string> notes;     ///< the fit, or why the built-in is kept
};

struct BoundedFit {
  costmodel::Profile profile;         ///< rows within bounds, with `fit` filled
  std::vector<TableReport> tables;    ///< gemm, attention, memory_bound, collective
};

/// Drops out-of-bound rows of `profile`, fits what is left within `dev`'s datasheet and returns
/// the profile to write. Never throws for a table that cannot be fitted (its report says why).
[[nodiscard]] BoundedFit fit_bounded(const costmodel::Profile& profile, const DeviceSpec& dev,
                                     const BoundedFitOptions& options = {});

/// Multi-line text of the reports (one block per table: kept, dropped and why, fitted or not).
[[nodiscard]] std::string describe_reports(const std::vector<TableReport>& tables);

}  // namespace tetra::calib
