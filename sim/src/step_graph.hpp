#pragma once
// Private to the sim library: the task graph of one step, shared by its replay (step.cpp) and
// its bounds (step_bounds.cpp).

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tetra/sim/step.hpp"

namespace tetra::sim::detail {

/// No task.
inline constexpr std::uint32_t kNone = 0xffffffffu;

/// End of piece k (of n) of a task of `total_ps` split by cumulative fraction `acc`, after the
/// previous piece's end `used`: the last piece takes the rest. Shared by the replay (add_pieces)
/// and its bound, whose DP buckets start at these ends.
[[nodiscard]] inline std::int64_t piece_end(std::int64_t total_ps, double acc, std::size_t k, std::size_t n,
                                            std::int64_t used) {
  const std::int64_t upto =
      k + 1 == n ? total_ps : static_cast<std::int64_t>(static_cast<double>(total_ps) * acc);
  return std::clamp<std::int64_t>(upto, used, total_ps);
}

/// Ids the metrics of a replay need, per stage.
struct BuiltStep {
  std::vector<std::uint32_t> opt;                         ///< optimizer task
  std::vector<std::vector<std::uint32_t>> dp_tasks;       ///< DP reductions
  std::vector<std::vector<std::uint32_t>> cp_tasks;       ///< CP ring transfers
  std::vector<std::vector<std::uint32_t>> late_gathers;   ///< parameter gathers after the optimizer
};

/// The task graph of one step (step.hpp) into `g` (cleared first), and the ids of `built`.
void build_step_graph(const StepSpec& spec, TaskGraph& g, BuiltStep& built);

}  // namespace tetra::sim::detail
