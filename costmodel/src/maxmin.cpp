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
  work.remaining.resize(n_res);
  work.active_count.assign(n_res, 0);
  work.frozen.assign(n_flows, 0);
  work.used.clear();
  work.unfrozen.clear();

  for (std::size_t f = 0; f < n_flows; ++f) {
    if (flows[f].resources.empty() && flows[f].bound < 0) {
      work.frozen[f] = 1;  // unconstrained: not a modelled transfer
      continue;
    }
    work.unfrozen.push_back(static_cast<std::uint32_t>(f));
    for (auto r : flows[f].resources) {
      if (work.active_count[r]++ == 0) {
        work.used.push_back(r);
        work.remaining[r] = capacity[r];
      }
    }
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  while (!work.unfrozen.empty()) {
    // The largest equal increment every unfrozen flow can take (a minimum: the visiting
    // order does not change it).
    double inc = kInf;
    for (const auto r : work.used) {
      if (work.active_count[r] > 0) {
        inc = std::min(inc, work.remaining[r] / static_cast<double>(work.active_count[r]));
      }
    }
    for (const auto f : work.unfrozen) {
      if (flows[f].bound >= 0) inc = std::min(inc, flows[f].bound - rates[f]);
    }
    inc = std::max(inc, 0.0);
    if (inc == kInf) {  // only unbounded resources left: those flows are not limited
      for (const auto f : work.unfrozen) rates[f] = kInf;
      break;
    }
    for (const auto f : work.unfrozen) {
      rates[f] += inc;
      for (auto r : flows[f].resources) work.remaining[r] -= inc;
    }
    // Freeze flows on saturated resources or at their bound.
    constexpr double kTol = 1e-12;
    std::size_t keep = 0;
    for (std::size_t i = 0; i < work.unfrozen.size(); ++i) {
      const auto f = work.unfrozen[i];
      bool freeze = flows[f].bound >= 0 && rates[f] >= flows[f].bound * (1 - kTol);
      for (auto r : flows[f].resources) {
        if (work.remaining[r] <= kTol * std::max(1.0, capacity[r])) freeze = true;
      }
      if (freeze) {
        work.frozen[f] = 1;
        for (auto r : flows[f].resources) --work.active_count[r];
      } else {
        work.unfrozen[keep++] = f;
      }
    }
    if (keep == work.unfrozen.size()) break;  // cannot happen with finite capacities; guards inf bounds
    work.unfrozen.resize(keep);
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
