#include "stats.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

namespace tetra::cli {

double ape(double measured, double predicted) noexcept {
  return std::abs(predicted - measured) / std::abs(measured);
}

ErrorSummary summarize(std::vector<double> errors) {
  ErrorSummary s;
  s.n = errors.size();
  if (errors.empty()) return s;
  std::sort(errors.begin(), errors.end());
  s.mean = std::accumulate(errors.begin(), errors.end(), 0.0) / static_cast<double>(errors.size());
  const std::size_t mid = errors.size() / 2;
  s.median = errors.size() % 2 == 1 ? errors[mid] : 0.5 * (errors[mid - 1] + errors[mid]);
  s.max = errors.back();
  return s;
}

std::vector<double> average_ranks(const std::vector<double>& values) {
  std::vector<std::size_t> order(values.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size(), 0.0);
  std::size_t i = 0;
  while (i < order.size()) {
    std::size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) ++j;
    // Positions i..j (0-based) share ranks i+1..j+1: their average.
    const double avg = 0.5 * static_cast<double>(i + j) + 1.0;
    for (std::size_t k = i; k <= j; ++k) ranks[order[k]] = avg;
    i = j + 1;
  }
  return ranks;
}

std::optional<double> spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.size() < 2) return std::nullopt;
  const std::vector<double> ra = average_ranks(a);
  const std::vector<double> rb = average_ranks(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n;
  const double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double cov = 0, va = 0, vb = 0;
  for (std::size_t i = 0; i < ra.size(); ++i) {
    cov += (ra[i] - ma) * (rb[i] - mb);
    va += (ra[i] - ma) * (ra[i] - ma);
    vb += (rb[i] - mb) * (rb[i] - mb);
  }
  if (va <= 0 || vb <= 0) return std::nullopt;
  return cov / std::sqrt(va * vb);
}

std::optional<double> grouped_spearman(const std::vector<std::string>& group,
                                       const std::vector<double>& measured,
                                       const std::vector<double>& predicted,
                                       std::size_t min_group) {
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> groups;
  for (std::size_t i = 0; i < group.size() && i < measured.size() && i < predicted.size(); ++i) {
    auto& g = groups[group[i]];
    g.first.push_back(measured[i]);
    g.second.push_back(predicted[i]);
  }
  double sum = 0;
  int count = 0;
  for (const auto& [name, g] : groups) {
    if (g.first.size() < min_group) continue;
    if (auto r = spearman(g.first, g.second)) {
      sum += *r;
      ++count;
    }
  }
  if (count == 0) return std::nullopt;
  return sum / count;
}

}  // namespace tetra::cli
