#pragma once
/// Built-in calibration profiles from published measurements (datasheets, MAMF, gpu-stream,
/// FlashAttention and nccl-tests figures), and the derivation of the compute / communication
/// model parameters from a cluster and a profile (built-in or calibrated). Every number is
/// cited in builtin_profiles.cpp.

#include <vector>

#include "tetra/costmodel/collective.hpp"
#include "tetra/costmodel/compute.hpp"
#include "tetra/costmodel/factors.hpp"
#include "tetra/costmodel/profile.hpp"
#include "tetra/hw/cluster.hpp"

namespace tetra::costmodel {

/// GPU family the published tables belong to.
enum class GpuFamily { a100, h100, h200, b200, b300, gb200, gb300, other };

/// Family of a GPU, from its preset name ("a100-…", "h100-…", "h200-…", "b200", "b300",
/// "gb200", "gb300") or, for custom GPUs, its compute capability (80 -> a100, 90 -> h100,
/// 100 -> b200, 103 -> b300).
[[nodiscard]] GpuFamily gpu_family(const hw::Gpu& gpu) noexcept;

/// The built-in profile of a cluster's GPU and node: meta (NCCL 2.30.7, source "built-in"),
/// fit values (MAMF GEMM ceiling, HBM effective bandwidth, FlashAttention rates, launch costs)
/// with no measured rows. GPUs outside the published set get datasheet-scaled defaults
/// (0.8 x peak, 0.9 x HBM) [assumed].
[[nodiscard]] Profile builtin_profile(const hw::Cluster& cluster);

/// Published FlashAttention TFLOP/s tables for the GPU (`Dao-AILab/flash-attention` README
/// figures, commit 7ef24848): FA2 fwd+bwd
/// (A100, H100) and FA3 forward (H100; H200 and H100-94GB use the H100 tables [assumed]).
[[nodiscard]] std::vector<AttentionRate> published_attention_rates(const hw::Gpu& gpu);

/// Achievable FP8 and FP4 GEMM rates of `gpu` when its training-precision GEMMs reach
/// `bf16_rate` (the built-in or calibrated MAMF): published FP8 MAMF where one exists, scaled by
/// the calibrated/built-in BF16 ratio; otherwise the datasheet ratio at Hopper's FP8/BF16
/// efficiency ratio. 0 where the GPU has no such tensor cores.
struct LowPrecisionRates {
  double fp8_flops = 0;
  double fp4_flops = 0;
};
[[nodiscard]] LowPrecisionRates low_precision_gemm_rates(const hw::Gpu& gpu, double bf16_rate);

/// Compute-model parameters for (cluster, profile): the profile's fit values where set, the
/// built-in ones otherwise, its measured rows sorted for lookup, the published attention
/// tables, and the candidate GEMM tiles (the fit's tile alone when the profile fitted one).
[[nodiscard]] ComputeParams make_compute_params(const hw::Cluster& cluster, const Profile& profile);

/// The NCCL view of the cluster's links (collective.hpp NcclTopology): per-GPU NVLink
/// bandwidth in NCCL's units (SM80 20.0 GB/s x links, SM90 20.6 x links, links =
/// NVLink bandwidth / 25 GB/s; SM100 40.1 x links of 50 GB/s), NIC = line rate in Gb/s / 8,
/// NVLS, pair-copy and NIC effective bandwidths, measured intra-node all-to-all busbw. Its
/// "node" is the NVLink domain, with the NICs of all the domain's nodes.
[[nodiscard]] NcclTopology derive_topology(const hw::Cluster& cluster);

/// Communication-model parameters for (cluster, profile): NCCL version from `profile.meta.nccl`
/// (default newest), topology from `derive_topology`, and the profile's measured collective
/// rows and fits (which override the model where they match).
[[nodiscard]] CommParams make_comm_params(const hw::Cluster& cluster, const Profile& profile);

/// Both parameter sets of a cluster: from `profile`, or from the cluster's built-in profile
/// when `profile` is null (a scenario without `[cluster].profile`).
struct CostParams {
  ComputeParams compute;
  CommParams comm;
  double step_overhead_s = 0;   ///< the cluster's fixed time per step (apply_factors)
};
[[nodiscard]] CostParams cost_params(const hw::Cluster& cluster, const Profile* profile = nullptr);

/// A published nccl-tests bus bandwidth for a group shape (GTC24 S62129 / GTC25 S72583 slides,
/// NVIDIA/nccl-tests issue #212; keys [GTC], [N212] in builtin_profiles.cpp).
struct PublishedBusbw {
  ops::CollectiveKind op = ops::CollectiveKind::all_reduce;
  int ranks = 8;
  int ranks_per_node = 8;
  const char* algorithm = "";   ///< "ring", "nvls" or "" (NCCL's choice)
  double busbw_lo_Bps = 0;      ///< published value (or the low end of a published range)
  double busbw_hi_Bps = 0;      ///< high end of the range (== lo for one value)
  const char* source = "";
};

/// The published large-message busbw figures for the cluster's node kind (DGX A100 or DGX
/// H100 / HGX H200), used by tests and `tetrasim presets --costs` for comparison.
[[nodiscard]] std::vector<PublishedBusbw> published_busbw(const hw::Cluster& cluster);

}  // namespace tetra::costmodel
