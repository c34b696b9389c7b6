#include "step_model.hpp"

#include <algorithm>
#include <cmath>

#include "tetra/search/parallel.hpp"

namespace tetra::fit::detail {

StepModel::StepModel(const std::vector<StepCase>& cases, int threads)
    : cases_(cases),
      threads_(static_cast<int>(std::clamp<std::size_t>(static_cast<std::size_t>(search::resolve_threads(threads)), 1,
                                                        std::max<std::size_t>(cases.size(), 1)))) {
  costs_.reserve(cases.size());
  for (const StepCase& c : cases) costs_.push_back(costmodel::cost_params(*c.cluster));
  sims_.resize(static_cast<std::size_t>(threads_));
}

double StepModel::run(std::size_t i, int worker, const costmodel::Factors& f) {
  costmodel::Factors rates = f;
  rates.step_overhead_s = 0;
  costmodel::CostParams& costs = costs_[i];
  costmodel::apply_factors(rates, costs);
  const StepCase& c = cases_[i];
  const sim::SimInput in = sim::sim_input(*c.model, *c.cluster, *c.training, c.layout, costs);
  return sims_[static_cast<std::size_t>(worker)].run(in).step_time_s;
}

void StepModel::times(const costmodel::Factors& f, std::vector<double>& seconds) {
  seconds.assign(cases_.size(), 0.0);
  search::parallel_for(cases_.size(), threads_, [&](int worker, std::size_t i) {
    seconds[i] = run(i, worker, f);
  });
}

void StepModel::sensitivities(const costmodel::Factors& f, const std::vector<costmodel::Factor>& rates,
                              const std::vector<double>& step, std::vector<double>& seconds, bool have_times,
                              Eigen::MatrixXd& slopes) {
  if (!have_times || seconds.size() != cases_.size()) {
    seconds.assign(cases_.size(), 0.0);
    have_times = false;
  }
  slopes.setZero(static_cast<Eigen::Index>(cases_.size()), static_cast<Eigen::Index>(rates.size()));
  search::parallel_for(cases_.size(), threads_, [&](int worker, std::size_t i) {
    if (!have_times) seconds[i] = run(i, worker, f);
    const double t0 = seconds[i];
    for (std::size_t j = 0; j < rates.size(); ++j) {
      costmodel::Factors moved = f;
      moved.set(rates[j], f.get(rates[j]) * std::exp(step[j]));
      const double t1 = run(i, worker, moved);
      slopes(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) =
          t0 > 0 && t1 > 0 ? std::log(t1 / t0) / step[j] : 0.0;
    }
  });
}

}  // namespace tetra::fit::detail
