#pragma once
// The step-time rows of a measurement file as fit cases (tetrasim fit, validate --cv), and the
// per-sweep comparison of two predictions of the same rows.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "stats.hpp"
#include "tetra/fit/fit.hpp"
#include "tetra/scenarios/measurements.hpp"

namespace tetra::cli {

/// Rows a fit can use and those it cannot, with why.
struct StepRows {
  std::vector<fit::StepCase> cases;                          ///< point into the rows read
  std::vector<const scenarios::MeasurementRow*> rows;         ///< the row of each case
  std::vector<double> zero_shot_s;                            ///< per case, no factors
  std::vector<std::pair<std::string, std::string>> skipped;  ///< (id, reason)
  std::string cluster;                                        ///< the cluster cell they share
};

/// A row's `cluster` cell as written ("" when the file has no such column).
[[nodiscard]] std::string cluster_cell(const scenarios::MeasurementRow& row);

/// The rows with a step time (scenarios::measured_step_seconds) as fit cases. Rows of other metrics, rows with a skip reason, rows of another cluster cell than `cluster`
/// (when given) and rows the simulator cannot run are skipped. Throws UserError when the usable
/// rows come from more than one cluster cell and `cluster` is empty.
[[nodiscard]] StepRows step_rows(const std::vector<scenarios::MeasurementRow>& rows,
                                 const std::string& cluster, int threads);

/// Parses a --factors list ("gemm,inter_node"); throws UserError naming an unknown factor.
[[nodiscard]] std::vector<costmodel::Factor> parse_factor_list(const std::string& list);

/// Two predictions of the same rows (e.g. zero-shot and fitted), per sweep and overall.
struct ComparisonLine {
  std::string group;
  ErrorSummary before, after;
  std::optional<double> before_rho, after_rho;  ///< Spearman (overall: mean over sweeps)
};
struct Comparison {
  std::vector<ComparisonLine> groups;           ///< by group name
  ComparisonLine all;
};
[[nodiscard]] Comparison compare(const std::vector<std::string>& group, const std::vector<double>& measured,
                                 const std::vector<double>& before, const std::vector<double>& after);

/// A text table of a comparison, columns headed `before` / `after` ("zero-shot", "CV").
[[nodiscard]] std::string comparison_table(const Comparison& c, const std::string& before,
                                           const std::string& after);
/// {"groups": [{"group", "n", before: {mape, median_ape, max_ape, spearman}, after: {...}}],
///  "all": {...}} with the two keys named `before` / `after`.
[[nodiscard]] nlohmann::json comparison_json(const Comparison& c, const std::string& before,
                                             const std::string& after);

/// The factors of a fit as a JSON object: name -> {value, lower, upper, std_error, share, status}.
[[nodiscard]] nlohmann::json factors_json(const fit::FitSummary& f);
/// The factors of a fit as a text table.
[[nodiscard]] std::string factors_table(const fit::FitSummary& f);

}  // namespace tetra::cli
