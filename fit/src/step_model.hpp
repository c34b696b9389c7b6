#pragma once
// Private to the fit library: the simulated step times of a set of cases as a function of the
// cluster factors, and their sensitivities by forward differences.

#include <vector>

#include <Eigen/Dense>

#include "tetra/costmodel/builtin_profiles.hpp"
#include "tetra/fit/fit.hpp"
#include "tetra/sim/simulator.hpp"

namespace tetra::fit::detail {

class StepModel {
 public:
  /// Builds each case's cost parameters once (the cluster's built-in profile).
  StepModel(const std::vector<StepCase>& cases, int threads);

  [[nodiscard]] std::size_t size() const noexcept { return cases_.size(); }
  /// Workers: the threads asked for, at most one per case.
  [[nodiscard]] int threads() const noexcept { return threads_; }

  /// The step time of case `i` under the rate factors of `f` (no overhead), on `worker`'s
  /// simulator. Throws what the simulator throws.
  double run(std::size_t i, int worker, const costmodel::Factors& f);

  /// Simulated step times under the rate factors of `f`, without its step overhead (which
  /// adds to every step). Throws what the simulator throws.
  void times(const costmodel::Factors& f, std::vector<double>& seconds);

  /// For each factor of `rates`, d ln t / d ln factor at `f` by a forward difference of
  /// `step[j]` in ln factor (negative steps go downwards), one column per factor. `seconds`
  /// receives the times at `f` (as `times`), or holds them already when `have_times` (the
  /// simulator is deterministic, so a time known at `f` need not be simulated again).
  void sensitivities(const costmodel::Factors& f, const std::vector<costmodel::Factor>& rates,
                     const std::vector<double>& step, std::vector<double>& seconds, bool have_times,
                     Eigen::MatrixXd& slopes);

 private:
  const std::vector<StepCase>& cases_;
  std::vector<costmodel::CostParams> costs_;   // per case; only its worker touches it
  std::vector<sim::Simulator> sims_;           // per worker
  int threads_ = 1;
};

}  // namespace tetra::fit::detail
