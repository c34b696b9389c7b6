#pragma once
/// Value types of the hardware a step runs on: one GPU kind, the NVLink domain of a node,
/// the NICs between nodes, and the whole cluster. Units are in the member names
/// (`_bytes`, `_Bps` = bytes per second, `_flops` = FLOP per second, `_s` = seconds).

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

namespace tetra::hw {

/// One GPU model (datasheet numbers; see presets.cpp for the citations).
struct Gpu {
  std::string name;                 ///< preset name, e.g. "h100-sxm-80gb"
  double memory_bytes = 0;          ///< device memory capacity
  double bf16_peak_flops = 0;       ///< dense BF16 tensor-core peak (MFU denominator)
  double fp8_peak_flops = 0;        ///< dense FP8 tensor-core peak; 0 = no FP8 tensor cores
  double fp4_peak_flops = 0;        ///< dense FP4 (NVFP4/MXFP4) peak; 0 = no FP4 tensor cores
  double hbm_bandwidth_Bps = 0;     ///< HBM peak bandwidth
  int sms = 0;                      ///< streaming multiprocessors
  int compute_capability = 0;       ///< 80 A100, 90 H100/H200, 100 B200/GB200, 103 B300/GB300
  std::string source;               ///< where a preset's numbers come from (presets.cpp)
  double rated_power_w = 0;         ///< board power the datasheet rates and prices (0 = unknown)
  double power_limit_w = 0;         ///< power limit it runs at (0 = rated); see sustained_clock_share
  /// The link to host memory, per direction, line rate: PCIe x16, or NVLink-C2C on a Grace
  /// superchip (0 = none known). Activation offloading copies over it (costmodel/offload.hpp).
  double host_link_Bps = 0;
};

/// Tensor-core throughput a GPU sustains at its power limit over the one at its rated power.
/// A dense GEMM draws the board to its limit, and the limit sets the clock: NVIDIA's MLPerf
/// Inference v4.1 MaxQ runs of 8x H200 SXM at 350, 450 and 500 W keep (limit / rated)^0.625 of
/// the 700 W throughput (0.652, 0.758, 0.807 measured), and the v4.0 H100 SXM run at 450 W
/// keeps 0.805 (offline) / 0.753 (server) against 0.759 from the same law. Fitted over 1/2 to
/// 5/7 of the rating, taken for every GPU [assumed beyond Hopper]; a limit at or above the
/// rating gives 1. Memory-bound kernels are bound by HBM, not the SM clock, and are not scaled.
[[nodiscard]] double sustained_clock_share(const Gpu& gpu) noexcept;

/// How GPUs of one node talk to each other.
enum class IntraKind { nvswitch, nvlink_mesh, pcie };

/// The NVLink (or PCIe) fabric: one node's GPUs, or several nodes' behind NVLink switch
/// trays (GB200 / GB300 NVL72: 18 nodes of 4 GPUs in one 72-GPU domain).
struct IntraNode {
  IntraKind kind = IntraKind::nvswitch;
  double bandwidth_Bps = 0;  ///< per GPU, per direction
  double latency_s = 0;
  bool nvls = false;         ///< NVLink SHARP available (third-generation NVSwitch)
  int domain_gpus = 0;       ///< GPUs on one fabric; 0 = the GPUs of one node
};

/// The network between nodes (rail-aligned NICs).
struct InterNode {
  int nics_per_node = 0;
  double nic_bandwidth_Bps = 0;  ///< per NIC, per direction
  double latency_s = 0;
  /// An oversubscribed fabric: pods of `pod_gpus` GPUs (whole nodes, consecutive ranks) with
  /// full bisection bandwidth inside, joined by a layer `oversubscription` times thinner than
  /// the NICs below it (Llama 3's 24K-GPU cluster: pods of 3,072 GPUs, 1:7 above them,
  /// Dubey et al. 2024, arXiv 2407.21783 §3.3.1). pod_gpus = 0: one pod, full bisection.
  int pod_gpus = 0;
  double oversubscription = 1.0;
};

/// The host memory one thread of a node's CPU moves, as a data-loader worker uses it
/// (costmodel/data_loader.hpp). The defaults are the medians of five runs of `tetrasim
/// calibrate --host` on a 2-vCPU AMD EPYC (Zen 5) KVM guest
/// (tests/data/calib/host_rates_epyc_kvm.toml); a scenario gives its own host's in [cluster.host].
struct Host {
  double first_touch_Bps = 2.73e9;  ///< writing freshly mapped anonymous pages (faults, zeroing, the write)
  double copy_Bps = 18.85e9;        ///< copying between resident buffers, bytes copied
};

/// A homogeneous cluster of identical nodes.
struct Cluster {
  std::string name;          ///< preset name or "custom"
  std::string source;        ///< where a preset's numbers come from (presets.cpp)
  Gpu gpu;
  int gpus_per_node = 8;
  int nodes = 1;
  IntraNode intra;
  InterNode inter;
  Host host;
  std::string profile_path;  ///< calibration profile (docs/calibration.md), empty for built-in
  bool profile_any_gpu = false;  ///< apply the profile even if it was measured on another GPU
  /// How much identical GPUs differ in pace: the standard deviation of one GPU's compute time
  /// over the median GPU's. Sinha et al. ("Not All GPUs Are Created Equal", SC22, arXiv
  /// 2208.11035) ran the same kernels on over 90 % of the GPUs of clusters of one SKU and report
  /// 8 % average performance variation between them (22 % at most; outliers up to 1.5x slower
  /// than the median aside). Read as the range of a normal sample the size of Summit's 27,648
  /// GPUs (about 8 standard deviations), that is 1 %. A synchronous step waits for its slowest
  /// GPU (costmodel::slowest_gpu_factor).
  double gpu_speed_spread = 0.01;

  [[nodiscard]] long long total_gpus() const noexcept {
    return static_cast<long long>(gpus_per_node) * nodes;
  }
  /// GPUs that reach each other over NVLink: the unit every placement and collective model
  /// calls a "node" (NCCL fuses a multi-node NVLink domain into one node the same way).
  [[nodiscard]] int nvlink_domain() const noexcept {
    return intra.domain_gpus > 0 ? intra.domain_gpus : std::max(1, gpus_per_node);
  }
  /// NICs of one NVLink domain (every node of it brings its own).
  [[nodiscard]] int nics_per_domain() const noexcept {
    return inter.nics_per_node * (nvlink_domain() / std::max(1, gpus_per_node));
  }
};

/// Why the NVLink domain does not tile the cluster, or nothing: a domain is made of whole
/// nodes, and a cluster larger than one domain is made of whole domains.
[[nodiscard]] std::optional<std::string> domain_problem(const Cluster& cluster);

/// The domain a job of `gpus` GPUs fills on racks of `cluster`'s domain: the largest multiple
/// of gpus_per_node that divides `gpus` and fits in one domain (a 256-GPU job on NVL72 racks
/// uses 64 GPUs of each of 4 racks); the whole job when it fits in one domain.
[[nodiscard]] int job_domain(const Cluster& cluster, long long gpus);

/// Scenario spelling of the intra-node kind: "nvswitch", "nvlink-mesh", "pcie".
[[nodiscard]] const char* to_string(IntraKind kind) noexcept;
/// Inverse of to_string; nothing for an unknown name.
[[nodiscard]] std::optional<IntraKind> parse_intra_kind(std::string_view name) noexcept;

}  // namespace tetra::hw
