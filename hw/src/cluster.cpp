#include "tetra/hw/cluster.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace tetra::hw {

const char* to_string(IntraKind kind) noexcept {
  switch (kind) {
    case IntraKind::nvswitch:
      return "nvswitch";
    case IntraKind::nvlink_mesh:
      return "nvlink-mesh";
    case IntraKind::pcie:
      return "pcie";
  }
  return "unknown";
}

std::optional<IntraKind> parse_intra_kind(std::string_view name) noexcept {
  if (name == "nvswitch") return IntraKind::nvswitch;
  if (name == "nvlink-mesh") return IntraKind::nvlink_mesh;
  if (name == "pcie") return IntraKind::pcie;
  return std::nullopt;
}

std::optional<std::string> domain_problem(const Cluster& c) {
  const int gpn = std::max(1, c.gpus_per_node);
  const int domain = c.nvlink_domain();
  if (domain % gpn != 0) {
    return "an NVLink domain of " + std::to_string(domain) + " GPUs is not made of whole nodes of " +
           std::to_string(gpn) + " GPUs";
  }
  const long long total = c.total_gpus();
  if (total > domain && total % domain != 0) {
    const int fit = job_domain(c, total);
    return std::to_string(total) + " GPUs are not a whole number of NVLink domains of " + std::to_string(domain) +
           " GPUs (set [cluster.intra_node].domain to the GPUs used per domain, e.g. " + std::to_string(fit) + ")";
  }
  return std::nullopt;
}

int job_domain(const Cluster& c, long long gpus) {
  const int gpn = std::max(1, c.gpus_per_node);
  const int domain = c.nvlink_domain();
  if (gpus <= domain) return static_cast<int>(std::max(1LL, gpus));
  int best = gpn;
  for (int d = gpn; d <= domain; d += gpn) {
    if (gpus % d == 0) best = d;
  }
  return best;
}

double sustained_clock_share(const Gpu& gpu) noexcept {
  if (gpu.rated_power_w <= 0 || gpu.power_limit_w <= 0 || gpu.power_limit_w >= gpu.rated_power_w) {
    return 1.0;
  }
  // MLPerf Inference v4.1, NVIDIA closed division, 8x H200 SXM (700 W rated): the MaxQ runs
  // capped at 350 / 450 / 500 W keep 13096.6 / 20086.1 = 0.652 (GPT-J offline), 13.202 /
  // 17.4186 = 0.758 (SDXL offline) and 25262.1 / 31302.7 = 0.807 (Llama-2-70B offline) of
  // the MaxP throughput (mlcommons/inference_results_v4.1 @2e26a06 closed/NVIDIA/results/
  // H200-SXM-141GBx8_TRT{,_MaxQ}/summary/README.md; power_limit in closed/NVIDIA/configs/
  // <benchmark>/Offline/__init__.py). (P / rated)^0.625 gives 0.648 / 0.759 / 0.810.
  constexpr double kThroughputPerPowerExponent = 0.625;
  return std::pow(gpu.power_limit_w / gpu.rated_power_w, kThroughputPerPowerExponent);
}

}  // namespace tetra::hw
