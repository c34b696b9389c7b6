// tetrasim validate CSV [--group-by COL] [--json]: predicts every row of a measurement file
// (SPEC section 4) and reports the error: the outcome confusion matrix and accuracy, and per
// metric MAPE, median and maximum APE and the mean Spearman rank correlation inside groups.

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "output.hpp"
#include "predict.hpp"
#include "stats.hpp"
#include "tetra/hw/error.hpp"
#include "tetra/scenarios/measurements.hpp"

namespace tetra::cli {

namespace {

struct ValidateArgs {
  std::string csv;
  std::string group_by = "source";
  bool json = false;
};

struct RowResult {
  const scenarios::MeasurementRow* row = nullptr;
  double predicted = 0;
};

struct MetricStats {
  ErrorSummary ape;
  std::optional<double> spearman;
};

/// Rounds to 6 significant decimals so that JSON output is stable and readable.
double round6(double x) { return std::round(x * 1e6) / 1e6; }

nlohmann::json opt_json(const std::optional<double>& v) {
  return v ? nlohmann::json(round6(*v)) : nlohmann::json(nullptr);
}

std::string percent(double fraction) { return fixed(fraction * 100.0, 1) + "%"; }

int run_validate(const ValidateArgs& args) {
  const std::vector<scenarios::MeasurementRow> rows = scenarios::read_measurements(args.csv);
  if (!rows.empty() && rows.front().columns.find(args.group_by) == rows.front().columns.end()) {
    throw UserError(SourceLocation{"--group-by"}, args.group_by,
                    "no such column in " + args.csv);
  }

  std::vector<std::pair<std::string, std::string>> skipped;  // id, reason
  std::vector<RowResult> done;
  for (const auto& row : rows) {
    if (!row.skip_reason.empty()) {
      skipped.emplace_back(row.id, row.skip_reason);
      continue;
    }
    const Prediction p = predict(row);
    if (!p.skip_reason.empty()) {
      skipped.emplace_back(row.id, p.skip_reason);
      continue;
    }
    done.push_back({&row, p.value});
  }

  // Outcome rows: confusion matrix measured x predicted.
  int fit_fit = 0, fit_oom = 0, oom_fit = 0, oom_oom = 0;
  for (const auto& r : done) {
    if (r.row->metric != scenarios::Metric::outcome) continue;
    const bool measured_ok = r.row->value > 0.5;
    const bool predicted_ok = r.predicted > 0.5;
    (measured_ok ? (predicted_ok ? fit_fit : fit_oom) : (predicted_ok ? oom_fit : oom_oom))++;
  }
  const int outcome_n = fit_fit + fit_oom + oom_fit + oom_oom;
  const double accuracy =
      outcome_n > 0 ? static_cast<double>(fit_fit + oom_oom) / outcome_n : 0.0;

  // Numeric metrics.
  std::map<scenarios::Metric, MetricStats> metrics;
  for (scenarios::Metric m : scenarios::kMetrics) {
    if (m == scenarios::Metric::outcome) continue;
    std::vector<double> errors, measured, predicted;
    std::vector<std::string> groups;
    for (const auto& r : done) {
      if (r.row->metric != m) continue;
      errors.push_back(ape(r.row->value, r.predicted));
      measured.push_back(r.row->value);
      predicted.push_back(r.predicted);
      groups.push_back(r.row->columns.at(args.group_by));
    }
    if (errors.empty()) continue;
    metrics[m] = MetricStats{summarize(errors), grouped_spearman(groups, measured, predicted)};
  }

  if (args.json) {
    nlohmann::json j;
    j["file"] = args.csv;
    j["group_by"] = args.group_by;
    j["rows"] = rows.size();
    j["predicted"] = done.size();
    nlohmann::json sk = nlohmann::json::array();
    for (const auto& [id, reason] : skipped) sk.push_back({{"id", id}, {"reason", reason}});
    j["skipped"] = std::move(sk);
    nlohmann::json mj = nlohmann::json::object();
    for (const auto& [m, st] : metrics) {
      mj[scenarios::to_string(m)] = {{"n", st.ape.n},
                                     {"mape", round6(st.ape.mean)},
                                     {"max_ape", round6(st.ape.max)},
                                     {"median_ape", round6(st.ape.median)},
                                     {"spearman", opt_json(st.spearman)}};
    }
    j["metrics"] = std::move(mj);
    j["outcome"] = {{"n", outcome_n},
                    {"accuracy", outcome_n > 0 ? nlohmann::json(round6(accuracy)) : nlohmann::json(nullptr)},
                    {"confusion",
                     {{"fit_fit", fit_fit}, {"fit_oom", fit_oom}, {"oom_fit", oom_fit}, {"oom_oom", oom_oom}}}};
    nlohmann::json per = nlohmann::json::array();
    for (const auto& r : done) {
      const bool outcome = r.row->metric == scenarios::Metric::outcome;
      per.push_back({{"id", r.row->id},
                     {"metric", scenarios::to_string(r.row->metric)},
                     {"measured", round6(r.row->value)},
                     {"predicted", round6(r.predicted)},
                     {"ape", outcome ? nlohmann::json(nullptr)
                                     : nlohmann::json(round6(ape(r.row->value, r.predicted)))}});
    }
    j["per_row"] = std::move(per);
    print_json(j);
    return 0;
  }

  std::cout << "file      " << args.csv << '\n'
            << "rows      " << rows.size() << ": " << done.size() << " predicted, "
            << skipped.size() << " skipped\n";
  // Skip reasons by count (most frequent first, then by text), not one line per row.
  std::map<std::string, int> reasons;
  for (const auto& s : skipped) ++reasons[s.second];
  std::vector<std::pair<int, std::string>> by_count;
  for (const auto& [reason, n] : reasons) by_count.emplace_back(-n, reason);
  std::sort(by_count.begin(), by_count.end());
  for (const auto& [neg, reason] : by_count) {
    std::cout << "skipped   " << -neg << "  " << reason << '\n';
  }
  std::cout << '\n';

  if (outcome_n > 0) {
    std::cout << "outcome   " << outcome_n << " rows, accuracy " << percent(accuracy) << '\n'
              << format_table({"measured \\ predicted", "ok", "oom"},
                              {{"ok", std::to_string(fit_fit), std::to_string(fit_oom)},
                               {"oom", std::to_string(oom_fit), std::to_string(oom_oom)}})
              << '\n';
  } else {
    std::cout << "outcome   no rows\n\n";
  }
  if (!metrics.empty()) {
    std::vector<std::vector<std::string>> table;
    for (const auto& [m, st] : metrics) {
      table.push_back({scenarios::to_string(m), std::to_string(st.ape.n), percent(st.ape.mean),
                       percent(st.ape.median), percent(st.ape.max),
                       st.spearman ? fixed(*st.spearman, 3) : std::string("-")});
    }
    std::cout << format_table({"metric", "n", "MAPE", "median APE", "max APE",
                               "Spearman (by " + args.group_by + ")"},
                              table);
  } else {
    std::cout << "metrics   no numeric metric predicted\n";
  }
  return 0;
}

}  // namespace

void register_validate(CLI::App& app, Action& action) {
  auto args = std::make_shared<ValidateArgs>();
  auto* cmd = app.add_subcommand("validate", "predict every row of a measurement file and report the error");
  cmd->add_option("csv", args->csv, "measurement CSV (SPEC section 4)")->required();
  cmd->add_option("--group-by", args->group_by,
                  "column whose values form the groups of the rank correlation (default: source)");
  cmd->add_flag("--json", args->json, "machine-readable output on stdout");
  cmd->callback([&action, args] { action = [args] { return run_validate(*args); }; });
}

}  // namespace tetra::cli
