// The energy of a training run (energy.hpp).

#include "tetra/plan/energy.hpp"

namespace tetra::plan {

double training_power_w(const hw::Gpu& gpu) noexcept {
  return gpu.power_limit_w > 0 ? gpu.power_limit_w : gpu.rated_power_w;
}

double energy_mwh(double gpus, double gpu_power_w, double hours, double pue) noexcept {
  constexpr double kWattHoursPerMwh = 1e6;
  return gpus * gpu_power_w * hours * pue / kWattHoursPerMwh;
}

}  // namespace tetra::plan
