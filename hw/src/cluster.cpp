#include "tetra/hw/cluster.hpp"

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

}  // namespace tetra::hw
