#pragma once
/// Value types of the hardware a step runs on: one GPU kind, the NVLink domain of a node,
/// the NICs between nodes, and the whole cluster. Units are in the member names
/// (`_bytes`, `_Bps` = bytes per second, `_flops` = FLOP per second, `_s` = seconds).

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
  int compute_capability = 0;       ///< 80 for A100, 90 for H100/H200, 100 for B200/GB200
};

/// How GPUs of one node talk to each other.
enum class IntraKind { nvswitch, nvlink_mesh, pcie };

/// The NVLink (or PCIe) domain of one node.
struct IntraNode {
  IntraKind kind = IntraKind::nvswitch;
  double bandwidth_Bps = 0;  ///< per GPU, per direction
  double latency_s = 0;
  bool nvls = false;         ///< NVLink SHARP available (third-generation NVSwitch)
};

/// The network between nodes (rail-aligned NICs).
struct InterNode {
  int nics_per_node = 0;
  double nic_bandwidth_Bps = 0;  ///< per NIC, per direction
  double latency_s = 0;
};

/// A homogeneous cluster of identical nodes.
struct Cluster {
  std::string name;          ///< preset name or "custom"
  Gpu gpu;
  int gpus_per_node = 8;
  int nodes = 1;
  IntraNode intra;
  InterNode inter;
  std::string profile_path;  ///< calibration profile (SPEC section 3), empty for built-in

  [[nodiscard]] long long total_gpus() const noexcept {
    return static_cast<long long>(gpus_per_node) * nodes;
  }
};

/// SPEC spelling of the intra-node kind: "nvswitch", "nvlink-mesh", "pcie".
[[nodiscard]] const char* to_string(IntraKind kind) noexcept;
/// Inverse of to_string; nothing for an unknown name.
[[nodiscard]] std::optional<IntraKind> parse_intra_kind(std::string_view name) noexcept;

}  // namespace tetra::hw
