#pragma once
// Error statistics of predictions against measurements (tetrasim validate, docs/cli.md):
// absolute percentage errors and Spearman rank correlation inside groups.

#include <optional>
#include <string>
#include <vector>

namespace tetra::cli {

/// |predicted - measured| / |measured|; precondition measured != 0.
[[nodiscard]] double ape(double measured, double predicted) noexcept;

/// Mean, median and maximum of a list of errors (all 0 for an empty list).
struct ErrorSummary {
  std::size_t n = 0;
  double mean = 0;
  double median = 0;  ///< middle value, or the mean of the two middle values
  double max = 0;
};
[[nodiscard]] ErrorSummary summarize(std::vector<double> errors);

/// Ranks 1..n of the values, ties sharing the average of their ranks (fractional ranking).
[[nodiscard]] std::vector<double> average_ranks(const std::vector<double>& values);

/// Spearman's rank correlation: the Pearson correlation of the average ranks. Nothing when
/// fewer than 2 values, the sizes differ, or either side is constant (no ranking to compare).
[[nodiscard]] std::optional<double> spearman(const std::vector<double>& a,
                                             const std::vector<double>& b);

/// The mean over groups of Spearman's correlation between measured and predicted, groups
/// given by `group[i]`. Groups with fewer than `min_group` rows or without a defined
/// correlation are left out; nothing when no group is left. Groups are taken in name order
/// so the result does not depend on row order.
[[nodiscard]] std::optional<double> grouped_spearman(const std::vector<std::string>& group,
                                                     const std::vector<double>& measured,
                                                     const std::vector<double>& predicted,
                                                     std::size_t min_group = 3);

}  // namespace tetra::cli
