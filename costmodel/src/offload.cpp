#include "tetra/costmodel/offload.hpp"

#include <algorithm>

namespace tetra::costmodel {

double host_copy_Bps(const hw::Gpu& gpu) noexcept { return kHostCopyShare * gpu.host_link_Bps; }

std::vector<int> offload_windows(int layers, int groups) {
  std::vector<int> w;
  if (groups <= 0 || groups > layers) return w;
  const int base = layers / groups;
  const int rest = layers % groups;
  w.reserve(static_cast<std::size_t>(groups));
  for (int i = 0; i < groups; ++i) w.push_back(base * (i + 1) - 1 + std::min(i + 1, rest));
  return w;
}

OffloadExposure offload_exposure(int layers, int groups, double bytes_per_layer, double copy_Bps,
                                 double layer_forward_s, double layer_backward_s) {
  OffloadExposure e;
  if (copy_Bps <= 0 || bytes_per_layer <= 0) return e;
  const std::vector<int> window = offload_windows(layers, groups);
  const double copy_s = bytes_per_layer / copy_Bps;
  int previous = 0;
  for (const int w : window) {
    const double hidden_layers = static_cast<double>(w - previous);
    e.forward_s += std::max(0.0, copy_s - hidden_layers * layer_forward_s);
    e.backward_s += std::max(0.0, copy_s - hidden_layers * layer_backward_s);
    previous = w;
  }
  return e;
}

}  // namespace tetra::costmodel
