// tetrasim validate CSV [--group-by COL] [--fit FILE] [--cv K|loo|sweep] [--json]: predicts
// every row of a measurement file (docs/accuracy.md) and reports the error: the outcome confusion
// matrix and accuracy, and per metric MAPE, median and maximum APE and the mean Spearman rank
// correlation inside groups. --fit applies fitted cluster factors; --cv cross-validates the
// step fit: each fold's rows are predicted by factors fitted on the other folds only, and
// reported next to the zero-shot predictions.

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
#include "step_rows.hpp"
#include "tetra/fit/fit.hpp"
#include "tetra/base/error.hpp"
#include "tetra/scenarios/measurements.hpp"
#include "tetra/scenarios/profile_io.hpp"

namespace tetra::cli {

namespace {

struct ValidateArgs {
  std::string csv;
  std::string group_by = "source";
  std::string fit;       // fitted factors to apply
  std::string cv;        // K, "loo" or "sweep"
  std::string factors;   // factors the --cv fits estimate
  std::string cluster;   // rows of this cluster cell only
  int threads = 0;
  bool json = false;
};

struct RowResult {
  const scenarios::MeasurementRow* row = nullptr;
  double predicted = 0;
  std::optional<MemoryVerdict> verdict;
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

/// The folds --cv asks for over `n` rows: K (position i in fold i mod K), loo or sweep.
fit::Folds cv_folds(const std::string& spec, const std::vector<fit::StepCase>& cases, std::string& scheme) {
  if (spec == "sweep") {
    scheme = "leave one sweep out (group column)";
    return fit::folds_by_group(cases);
  }
  if (spec == "loo") {
    scheme = "leave one out";
    return fit::folds_by_position(cases.size(), static_cast<int>(cases.size()));
  }
  int k = 0;
  try {
    std::size_t used = 0;
    k = std::stoi(spec, &used);
    if (used != spec.size()) k = 0;
  } catch (const std::exception&) {
    k = 0;
  }
  if (k < 2) throw UserError(SourceLocation{"--cv"}, spec, "expected a fold count of 2 or more, loo or sweep");
  if (static_cast<std::size_t>(k) > cases.size()) {
    throw UserError(SourceLocation{"--cv"}, spec,
                    "more folds than the " + std::to_string(cases.size()) + " usable step-time rows");
  }
  scheme = std::to_string(k) + "-fold (row i of the file's step-time rows in fold i mod " + std::to_string(k) + ")";
  return fit::folds_by_position(cases.size(), k);
}

struct CvReport {
  std::string scheme;
  StepRows usable;
  fit::Folds folds;
  fit::CrossValidation cv;
  Comparison comparison;
};

CvReport run_cross_validation(const ValidateArgs& args, const std::vector<scenarios::MeasurementRow>& rows) {
  CvReport r;
  fit::FitOptions options;
  options.threads = args.threads;
  if (!args.factors.empty()) options.factors = parse_factor_list(args.factors);
  r.usable = step_rows(rows, args.cluster, args.threads);
  if (r.usable.cases.empty()) throw UserError(SourceLocation{args.csv}, "--cv", "no usable step-time rows");
  r.folds = cv_folds(args.cv, r.usable.cases, r.scheme);
  r.cv = fit::cross_validate(r.usable.cases, r.folds, options);
  std::vector<std::string> groups;
  std::vector<double> measured;
  for (std::size_t i = 0; i < r.usable.cases.size(); ++i) {
    groups.push_back(r.usable.rows[i]->columns.at(args.group_by));
    measured.push_back(r.usable.cases[i].measured_s);
  }
  r.comparison = compare(groups, measured, r.usable.zero_shot_s, r.cv.predicted_s);
  return r;
}

nlohmann::json cv_json(const CvReport& r) {
  nlohmann::json j = comparison_json(r.comparison, "zero_shot", "cv");
  j["scheme"] = r.scheme;
  j["folds"] = r.folds.count;
  j["rows"] = r.usable.cases.size();
  nlohmann::json fits = nlohmann::json::array();
  for (std::size_t f = 0; f < r.cv.fits.size(); ++f) {
    fits.push_back({{"rows_fitted", r.cv.fits[f].rows.size()},
                    {"rms_error", round6(r.cv.fits[f].rms_error)},
                    {"factors", factors_json(r.cv.fits[f])}});
  }
  j["fits"] = std::move(fits);
  nlohmann::json per = nlohmann::json::array();
  for (std::size_t i = 0; i < r.usable.cases.size(); ++i) {
    per.push_back({{"id", r.usable.cases[i].id},
                   {"fold", r.folds.fold[i] + 1},
                   {"measured", round6(r.usable.cases[i].measured_s)},
                   {"zero_shot", round6(r.usable.zero_shot_s[i])},
                   {"cv", round6(r.cv.predicted_s[i])}});
  }
  j["per_row"] = std::move(per);
  return j;
}

void print_cv(const CvReport& r, const ValidateArgs& args) {
  std::cout << "\ncross-validation  " << r.scheme << ", " << r.usable.cases.size()
            << " step-time rows, factors " << (args.factors.empty() ? std::string("default") : args.factors) << '\n'
            << "                  each fold is predicted by factors fitted on the other folds only\n";
  std::cout << comparison_table(r.comparison, "zero-shot", "CV");
  // The spread of each factor over the folds says how stable the fit is.
  std::vector<std::vector<std::string>> rows;
  for (std::size_t k = 0; k < costmodel::kFactors.size(); ++k) {
    double lo = 0, hi = 0;
    std::vector<fit::FactorStatus> seen;
    std::string status;
    for (std::size_t f = 0; f < r.cv.fits.size(); ++f) {
      const auto& ff = r.cv.fits[f].per_factor[k];
      lo = f == 0 ? ff.value : std::min(lo, ff.value);
      hi = f == 0 ? ff.value : std::max(hi, ff.value);
      if (std::find(seen.begin(), seen.end(), ff.status) == seen.end()) {
        seen.push_back(ff.status);
        status += (status.empty() ? "" : ", ") + std::string(fit::to_string(ff.status));
      }
    }
    rows.push_back({costmodel::to_string(costmodel::kFactors[k]), fixed(lo, 3), fixed(hi, 3), status});
  }
  std::cout << "\nfactors over the " << r.cv.fits.size() << " folds\n"
            << format_table({"factor", "min", "max", "status"}, rows);
}

/// An outcome value (measured or predicted): 1 = ran / fits, 0 = out of memory.
bool fits(double outcome) { return outcome > 0.5; }

/// The outcome confusion and the error of each numeric metric over the predicted rows.
struct ValidationStats {
  int fit_fit = 0, fit_oom = 0, oom_fit = 0, oom_oom = 0;
  int outcome_n = 0;
  double accuracy = 0;
  std::map<scenarios::Metric, MetricStats> metrics;
};

ValidationStats validation_stats(const std::vector<RowResult>& done, const std::string& group_by) {
  ValidationStats v;
  int& fit_fit = v.fit_fit;
  int& fit_oom = v.fit_oom;
  int& oom_fit = v.oom_fit;
  int& oom_oom = v.oom_oom;
  // Outcome rows: confusion matrix measured x predicted.
  for (const auto& r : done) {
    if (r.row->metric != scenarios::Metric::outcome) continue;
    const bool measured_ok = fits(r.row->value);
    const bool predicted_ok = fits(r.predicted);
    (measured_ok ? (predicted_ok ? fit_fit : fit_oom) : (predicted_ok ? oom_fit : oom_oom))++;
  }
  v.outcome_n = fit_fit + fit_oom + oom_fit + oom_oom;
  v.accuracy = v.outcome_n > 0 ? static_cast<double>(fit_fit + oom_oom) / v.outcome_n : 0.0;

  // Numeric metrics.
  for (scenarios::Metric m : scenarios::kMetrics) {
    if (m == scenarios::Metric::outcome) continue;
    std::vector<double> errors, measured, predicted;
    std::vector<std::string> groups;
    for (const auto& r : done) {
      if (r.row->metric != m) continue;
      errors.push_back(ape(r.row->value, r.predicted));
      measured.push_back(r.row->value);
      predicted.push_back(r.predicted);
      groups.push_back(r.row->columns.at(group_by));
    }
    if (errors.empty()) continue;
    v.metrics[m] = MetricStats{summarize(errors), grouped_spearman(groups, measured, predicted)};
  }

  return v;
}

/// The runs that ran but are predicted out of memory: the verdicts that would make `search` and
/// `plan` prune a layout people use. Largest overshoot first.
void print_runs_predicted_oom(const std::vector<RowResult>& done) {
  std::vector<const RowResult*> wrong;
  for (const auto& r : done) {
    if (r.row->metric == scenarios::Metric::outcome && fits(r.row->value) && !fits(r.predicted) && r.verdict)
      wrong.push_back(&r);
  }
  if (wrong.empty()) return;
  const auto overshoot = [](const RowResult* r) { return r->verdict->peak_gib - r->verdict->capacity_gib; };
  std::stable_sort(wrong.begin(), wrong.end(),
                   [&](const RowResult* a, const RowResult* b) { return overshoot(a) > overshoot(b); });
  std::vector<std::vector<std::string>> table;
  for (const RowResult* r : wrong) {
    table.push_back({r->row->id, std::to_string(r->verdict->stage), fixed(r->verdict->peak_gib, 2),
                     fixed(r->verdict->capacity_gib, 2), "+" + fixed(overshoot(r), 2)});
  }
  std::cout << "ran, predicted out of memory (" << wrong.size() << ")\n"
            << format_table({"id", "stage", "peak GiB", "capacity GiB", "over"}, table) << '\n';
}

int run_validate(const ValidateArgs& args) {
  check_threads(args.threads);
  const costmodel::Factors factors = args.fit.empty() ? costmodel::Factors{} : scenarios::read_fitted(args.fit).factors;
  const std::vector<scenarios::MeasurementRow> all_rows = scenarios::read_measurements(args.csv);
  if (!all_rows.empty() && all_rows.front().columns.find(args.group_by) == all_rows.front().columns.end()) {
    throw UserError(SourceLocation{"--group-by"}, args.group_by,
                    "no such column in " + args.csv);
  }
  std::vector<scenarios::MeasurementRow> rows;
  for (const auto& r : all_rows) {
    if (args.cluster.empty() || cluster_cell(r) == args.cluster) rows.push_back(r);
  }
  std::optional<CvReport> cv;
  if (!args.cv.empty()) cv = run_cross_validation(args, rows);

  std::vector<std::pair<std::string, std::string>> skipped;  // id, reason
  std::vector<RowResult> done;
  for (const auto& row : rows) {
    if (!row.skip_reason.empty()) {
      skipped.emplace_back(row.id, row.skip_reason);
      continue;
    }
    const Prediction p = predict(row, factors);
    if (!p.skip_reason.empty()) {
      skipped.emplace_back(row.id, p.skip_reason);
      continue;
    }
    done.push_back({&row, p.value, p.verdict});
  }

  const ValidationStats stats = validation_stats(done, args.group_by);
  const int fit_fit = stats.fit_fit, fit_oom = stats.fit_oom, oom_fit = stats.oom_fit, oom_oom = stats.oom_oom;
  const int outcome_n = stats.outcome_n;
  const double accuracy = stats.accuracy;
  const std::map<scenarios::Metric, MetricStats>& metrics = stats.metrics;

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
      nlohmann::json row = {{"id", r.row->id},
                            {"metric", scenarios::to_string(r.row->metric)},
                            {"measured", round6(r.row->value)},
                            {"predicted", round6(r.predicted)},
                            {"ape", outcome ? nlohmann::json(nullptr)
                                            : nlohmann::json(round6(ape(r.row->value, r.predicted)))}};
      if (r.verdict) {
        row["peak_stage"] = r.verdict->stage;
        row["peak_gib"] = round6(r.verdict->peak_gib);
        row["capacity_gib"] = round6(r.verdict->capacity_gib);
      }
      per.push_back(std::move(row));
    }
    j["per_row"] = std::move(per);
    if (!args.fit.empty()) j["fit"] = args.fit;
    if (cv) j["cv"] = cv_json(*cv);
    print_json(j);
    return 0;
  }

  std::cout << "file      " << args.csv << '\n'
            << "rows      " << rows.size() << ": " << done.size() << " predicted, "
            << skipped.size() << " skipped\n";
  if (!args.fit.empty()) std::cout << "factors   " << args.fit << '\n';
  print_skip_reasons(skipped);
  std::cout << '\n';

  if (outcome_n > 0) {
    std::cout << "outcome   " << outcome_n << " rows, accuracy " << percent(accuracy) << '\n'
              << format_table({"measured \\ predicted", "ok", "oom"},
                              {{"ok", std::to_string(fit_fit), std::to_string(fit_oom)},
                               {"oom", std::to_string(oom_fit), std::to_string(oom_oom)}})
              << '\n';
    print_runs_predicted_oom(done);
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
  if (cv) print_cv(*cv, args);
  return 0;
}

}  // namespace

void register_validate(CLI::App& app, Action& action) {
  auto args = std::make_shared<ValidateArgs>();
  auto* cmd = app.add_subcommand("validate", "predict every row of a measurement file and report the error");
  cmd->add_option("csv", args->csv,
                  "measurement CSV: one measured value per row, with the model, cluster and layout of "
                  "the run (docs/accuracy.md)")
      ->required();
  cmd->add_option("--group-by", args->group_by,
                  "column whose values form the groups of the rank correlation (default: source)");
  auto* fit = cmd->add_option("--fit", args->fit, "apply the cluster factors of this fitted file (tetrasim fit -o)");
  auto* cv = cmd->add_option("--cv", args->cv,
                             "cross-validate the step fit: K folds, loo (leave one out) or sweep (leave one sweep out)");
  cv->excludes(fit);
  cmd->add_option("--factors", args->factors, "factors the --cv fits estimate (default: every factor but host)")->needs(cv);
  cmd->add_option("--cluster", args->cluster, "only rows whose cluster cell is this");
  cmd->add_option("--threads", args->threads, "simulation threads for --cv (default: all cores)");
  cmd->add_flag("--json", args->json, "machine-readable output on stdout");
  cmd->callback([&action, args] { action = [args] { return run_validate(*args); }; });
}

}  // namespace tetra::cli
