#pragma once
/// Built-in GPUs and clusters (datasheet numbers, each cited in presets.cpp).

#include <optional>
#include <span>
#include <string_view>

#include "tetra/hw/cluster.hpp"

namespace tetra::hw {

/// a100-sxm-40gb, a100-sxm-80gb, h100-sxm-80gb, h100-sxm-94gb, h200-sxm-141gb, b200, b300,
/// gb200, gb300.
[[nodiscard]] std::span<const Gpu> gpu_presets();
/// dgx-a100-40gb, dgx-a100-80gb, dgx-h100, hgx-h200, dgx-b200, dgx-b300 (8-GPU nodes) and
/// gb200-nvl72, gb300-nvl72 (4-GPU trays in 72-GPU NVLink domains); one node each, `nodes` is
/// set by the user.
[[nodiscard]] std::span<const Cluster> cluster_presets();

[[nodiscard]] std::optional<Gpu> find_gpu_preset(std::string_view name);
[[nodiscard]] std::optional<Cluster> find_cluster_preset(std::string_view name);

}  // namespace tetra::hw
