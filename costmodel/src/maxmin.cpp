// Progressive filling for max-min fairness (Bertsekas & Gallager, Data Networks §6.5.2).

#include "tetra/costmodel/maxmin.hpp"

#include <algorithm>
#include <limits>

namespace tetra::costmodel {

void max_min_rates(std::span<const double> capacity, std::span<const MaxMinFlow> flows,
                   std::vector<double>& rates, MaxMinWorkspace& work) {
  const std::size_t n_res = capacity.size();
  const std::size_t n_flows = flows.size();
  rates.assign(n_flows, 0.0);
  work.remaining.assign(capacity.begin(), capacity.end());
  work.active_count.assign(n_res, 0);
  work.frozen.assign(n_flows, 0);

  std::size_t unfrozen = 0;
  for (std::size_t f = 0; f < n_flows; ++f) {
    if (flows[f].resources.empty() && flows[f].bound < 0) {
      work.frozen[f] = 1;  // unconstrained: not a modelled transfer
      continue;
    }
    ++unfrozen;
    for (auto r : flows[f].resources) ++work.active_count[r];
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  while (unfrozen > 0) {
    // The largest equal increment every unfrozen flow can take.
    double inc = kInf;
    for (std::size_t r = 0; r < n_res; ++r) {
      if (work.active_count[r] > 0) {
        inc = std::min(inc, work.remaining[r] / static_cast<double>(work.active_count[r]));
      }
    }
    for (std::size_t f = 0; f < n_flows; ++f) {
      if (!work.frozen[f] && flows[f].bound >= 0) inc = std::min(inc, flows[f].bound - rates[f]);
    }
    inc = std::max(inc, 0.0);
    if (inc == kInf) {  // only unbounded resources left: those flows are not limited
      for (std::size_t f = 0; f < n_flows; ++f) {
        if (!work.frozen[f]) rates[f] = kInf;
      }
      break;
    }
    for (std::size_t f = 0; f < n_flows; ++f) {
      if (work.frozen[f]) continue;
      rates[f] += inc;
      for (auto r : flows[f].resources) work.remaining[r] -= inc;
    }
    // Freeze flows on saturated resources or at their bound.
    constexpr double kTol = 1e-12;
    std::size_t frozen_now = 0;
    for (std::size_t f = 0; f < n_flows; ++f) {
      if (work.frozen[f]) continue;
      bool freeze = flows[f].bound >= 0 && rates[f] >= flows[f].bound * (1 - kTol);
      for (auto r : flows[f].resources) {
        if (work.remaining[r] <= kTol * std::max(1.0, capacity[r])) freeze = true;
      }
      if (freeze) {
        work.frozen[f] = 1;
        ++frozen_now;
        for (auto r : flows[f].resources) --work.active_count[r];
      }
    }
    if (frozen_now == 0) break;  // cannot happen with finite capacities; guards inf bounds
    unfrozen -= frozen_now;
  }
}

std::vector<double> max_min_rates(std::span<const double> capacity,
                                  std::span<const MaxMinFlow> flows) {
  std::vector<double> rates;
  MaxMinWorkspace work;
  max_min_rates(capacity, flows, rates, work);
  return rates;
}

}  // namespace tetra::costmodel
