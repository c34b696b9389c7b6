// Goodput under failures and checkpoints (goodput.hpp has the model and its sources).

#include "tetra/plan/goodput.hpp"

#include <cmath>
#include <limits>

namespace tetra::plan {

Goodput goodput(std::int64_t gpus, double checkpoint_bytes, const GoodputParams& params) noexcept {
  Goodput g;
  g.checkpoint_bytes = checkpoint_bytes;
  g.checkpoint_write_s = checkpoint_bytes / params.checkpoint_bandwidth_Bps;
  const double failures_per_s =
      params.failures_per_gpu_hour * static_cast<double>(gpus) / 3600.0;
  if (!(failures_per_s > 0)) {
    g.mtbf_s = g.interval_s = std::numeric_limits<double>::infinity();
    return g;  // nothing fails: no checkpoint is needed, nothing is lost
  }
  const double delta = g.checkpoint_write_s;
  g.mtbf_s = 1.0 / failures_per_s;
  // Young 1974: tau = sqrt(2 delta M).
  g.interval_s = std::sqrt(2.0 * delta * g.mtbf_s);
  g.checkpoint_fraction = g.interval_s > 0 ? delta / g.interval_s : 0.0;
  g.failure_fraction = (params.restart_s + 0.5 * (g.interval_s + delta)) / g.mtbf_s;
  g.goodput = g.failure_fraction < 1.0 ? (1.0 - g.failure_fraction) / (1.0 + g.checkpoint_fraction) : 0.0;
  return g;
}

}  // namespace tetra::plan
