// tetrasim fit CSV [--cluster C] [--factors LIST] [--take N] [--threads N] [-o FILE] [--json]:
// learns the cluster factors (costmodel/factors.hpp) from measured step times, prints each
// factor with its bound and how well the rows constrain it, and writes them as a fitted file
// that simulate, search and validate take with --fit. With --take N only N rows, chosen
// without looking at their measurements to constrain the factors best, are fitted, and the
// others are predicted and scored.

#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "output.hpp"
#include "step_rows.hpp"
#include "tetra/fit/fit.hpp"
#include "tetra/base/error.hpp"
#include "tetra/scenarios/measurements.hpp"
#include "tetra/scenarios/profile_io.hpp"

namespace tetra::cli {

namespace {

struct FitArgs {
  std::string csv;
  std::string cluster;
  std::string factors;
  int take = 0;
  int threads = 0;
  std::string out;
  bool json = false;
};

/// Folds of the band a fitted file records: 5, so that every fit sees 80 % of the rows.
constexpr int kBandFolds = 5;

/// The band of steps predicted with factors fitted on `cases`: the signed errors of each case
/// predicted by factors fitted on the other folds (costmodel/error_band.hpp); rows only, and
/// no errors, below costmodel::kMinBandRows cases.
costmodel::ErrorBand cv_band(const std::vector<fit::StepCase>& cases, const fit::FitOptions& options,
                             std::string& scheme) {
  costmodel::ErrorBand band;
  band.rows = cases.size();
  if (!band.available()) return band;
  scheme = std::to_string(kBandFolds) + "-fold (row i of the fitted rows in fold i mod " +
           std::to_string(kBandFolds) + ")";
  const fit::CrossValidation cv = fit::cross_validate(cases, fit::folds_by_position(cases.size(), kBandFolds), options);
  std::vector<double> errors;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    errors.push_back(costmodel::signed_error(cv.predicted_s[i], cases[i].measured_s));
  }
  band = costmodel::band_of_errors(errors);
  band.low_error = round_to(band.low_error, 6);
  band.high_error = round_to(band.high_error, 6);
  return band;
}

std::string signed_percent(double e) { return (e >= 0 ? "+" : "") + fixed(e * 100.0, 1) + " %"; }

/// What `tetrasim fit` found, for its two outputs.
struct FitOutcome {
  const std::vector<scenarios::MeasurementRow>& rows;
  const StepRows& usable;
  const fit::FitSummary& summary;
  const std::vector<fit::StepCase>& fitted_cases;
  const std::vector<double>& zero_fit;
  const std::vector<fit::StepCase>& held_out;
  const std::vector<std::size_t>& held_index;
  const std::vector<double>& held_pred;
  const Comparison& on_fitted;
  const std::optional<Comparison>& on_held;
};

/// The JSON object of `tetrasim fit --json`.
nlohmann::json fit_json(const FitArgs& args, const FitOutcome& r) {
  const auto& [rows, usable, summary, fitted_cases, zero_fit, held_out, held_index, held_pred, on_fitted, on_held] = r;
  const std::vector<double>& fitted_pred = summary.predicted_s;
  nlohmann::json j;
  j["file"] = args.csv;
  j["cluster"] = usable.cluster;
  j["rows"] = rows.size();
  j["usable"] = usable.cases.size();
  nlohmann::json sk = nlohmann::json::array();
  for (const auto& [id, reason] : usable.skipped) sk.push_back({{"id", id}, {"reason", reason}});
  j["skipped"] = std::move(sk);
  j["fitted_rows"] = summary.rows;
  j["factors"] = factors_json(summary);
  j["fit"] = {{"rms_error", round_to(summary.rms_error, 6)},
              {"mape", round_to(summary.mape, 6)},
              {"iterations", summary.iterations},
              {"converged", summary.converged}};
  const costmodel::ErrorBand& b = *summary.band;
  j["band"] = {{"scheme", summary.band_scheme.empty() ? nlohmann::json(nullptr) : nlohmann::json(summary.band_scheme)},
               {"rows", b.rows},
               {"low_quantile", b.low_quantile},
               {"high_quantile", b.high_quantile},
               {"low_error", b.available() ? nlohmann::json(b.low_error) : nlohmann::json(nullptr)},
               {"high_error", b.available() ? nlohmann::json(b.high_error) : nlohmann::json(nullptr)}};
  j["on_fitted_rows"] = comparison_json(on_fitted, "zero_shot", "fitted");
  if (on_held) j["on_other_rows"] = comparison_json(*on_held, "zero_shot", "fitted");
  nlohmann::json per = nlohmann::json::array();
  for (std::size_t k = 0; k < fitted_cases.size(); ++k) {
    per.push_back({{"id", fitted_cases[k].id}, {"fitted", true}, {"measured", round_to(fitted_cases[k].measured_s, 6)},
                   {"zero_shot", round_to(zero_fit[k], 6)}, {"predicted", round_to(fitted_pred[k], 6)}});
  }
  for (std::size_t k = 0; k < held_out.size(); ++k) {
    per.push_back({{"id", held_out[k].id}, {"fitted", false}, {"measured", round_to(held_out[k].measured_s, 6)},
                   {"zero_shot", round_to(usable.zero_shot_s[held_index[k]], 6)},
                   {"predicted", round_to(held_pred[k], 6)}});
  }
  j["per_row"] = std::move(per);
  if (!args.out.empty()) j["written"] = args.out;
  return j;
}

/// The text report of `tetrasim fit`.
void print_fit_text(const FitArgs& args, const FitOutcome& r) {
  const auto& [rows, usable, summary, fitted_cases, zero_fit, held_out, held_index, held_pred, on_fitted, on_held] = r;

  std::cout << "file      " << args.csv << '\n'
            << "cluster   " << (usable.cluster.empty() ? "-" : usable.cluster) << '\n'
            << "rows      " << rows.size() << ": " << usable.cases.size() << " usable step times, "
            << usable.skipped.size() << " skipped\n";
  print_skip_reasons(usable.skipped);
  if (args.take > 0) {
    std::cout << "fitted    " << fitted_cases.size() << " rows chosen to constrain the factors (D-optimal on "
              << "zero-shot sensitivities):";
    for (const auto& c : fitted_cases) std::cout << ' ' << c.id;
    std::cout << '\n';
  } else {
    std::cout << "fitted    all " << fitted_cases.size() << " usable rows\n";
  }
  std::cout << "fit       RMS error " << percent(summary.rms_error) << ", MAPE " << percent(summary.mape)
            << " on the fitted rows, " << summary.iterations << " iterations"
            << (summary.converged ? "" : " (stopped at the iteration limit)") << "\n\n";
  if (summary.band->available()) {
    std::cout << "band      " << signed_percent(summary.band->low_error) << " .. "
              << signed_percent(summary.band->high_error) << " signed step-time error (10th-90th percentile, "
              << summary.band_scheme << " cross-validation)\n\n";
  } else {
    std::cout << "band      none: " << summary.band->rows << " fitted rows, a band needs "
              << costmodel::kMinBandRows << "\n\n";
  }
  std::cout << factors_table(summary) << '\n';
  std::cout << "on the fitted rows\n" << comparison_table(on_fitted, "zero-shot", "fitted");
  if (on_held) {
    std::cout << "\non the " << held_out.size() << " other rows (not fitted)\n"
              << comparison_table(*on_held, "zero-shot", "fitted");
  }
  if (!args.out.empty()) std::cout << "\nwritten   " << args.out << '\n';
}

int run_fit(const FitArgs& args) {
  check_threads(args.threads);
  if (args.take < 0) throw UserError(SourceLocation{"--take"}, "take", "must be a positive number of rows");
  fit::FitOptions options;
  options.threads = args.threads;
  if (!args.factors.empty()) options.factors = parse_factor_list(args.factors);
  const std::size_t n_factors = options.factors.empty() ? fit::kDefaultFactors.size() : options.factors.size();
  if (args.take > 0 && static_cast<std::size_t>(args.take) < n_factors) {
    throw UserError(SourceLocation{"--take"}, "take",
                    std::to_string(args.take) + " rows cannot fit " + std::to_string(n_factors) +
                        " factors; take at least " + std::to_string(n_factors) + " or name at most " +
                        std::to_string(args.take) + " with --factors");
  }

  const std::vector<scenarios::MeasurementRow> rows = scenarios::read_measurements(args.csv);
  const StepRows usable = step_rows(rows, args.cluster, args.threads);

  // The rows to fit: all of them, or --take N of them.
  std::vector<std::size_t> fitted_index;
  if (args.take > 0) {
    fitted_index = fit::spanning_cases(usable.cases, static_cast<std::size_t>(args.take), options);
  } else {
    for (std::size_t i = 0; i < usable.cases.size(); ++i) fitted_index.push_back(i);
  }
  std::vector<bool> in_fit(usable.cases.size(), false);
  std::vector<fit::StepCase> fitted_cases;
  for (std::size_t i : fitted_index) {
    in_fit[i] = true;
    fitted_cases.push_back(usable.cases[i]);
  }
  fit::FitSummary summary = fit::fit_factors(fitted_cases, options);
  summary.csv = args.csv;
  summary.cluster = usable.cluster;
  summary.band = cv_band(fitted_cases, options, summary.band_scheme);
  if (!args.out.empty()) write_file_atomic(args.out, scenarios::format_fitted(summary));

  // Fitted rows: zero-shot against fitted error. Held-out rows (--take): predicted and scored.
  std::vector<fit::StepCase> held_out;
  std::vector<std::size_t> held_index;
  for (std::size_t i = 0; i < usable.cases.size(); ++i) {
    if (!in_fit[i]) {
      held_out.push_back(usable.cases[i]);
      held_index.push_back(i);
    }
  }
  std::vector<double> zero_fit;
  for (std::size_t i : fitted_index) zero_fit.push_back(usable.zero_shot_s[i]);
  const std::vector<double>& fitted_pred = summary.predicted_s;
  std::vector<std::string> fit_groups;
  std::vector<double> fit_measured;
  for (const auto& c : fitted_cases) {
    fit_groups.push_back(c.group);
    fit_measured.push_back(c.measured_s);
  }
  const Comparison on_fitted = compare(fit_groups, fit_measured, zero_fit, fitted_pred);
  std::optional<Comparison> on_held;
  std::vector<double> held_pred;
  if (!held_out.empty()) {
    std::vector<std::string> groups;
    std::vector<double> measured, zero;
    for (const auto& p : fit::predict_steps(held_out, summary.factors, args.threads)) held_pred.push_back(p.seconds);
    for (std::size_t k = 0; k < held_out.size(); ++k) {
      groups.push_back(held_out[k].group);
      measured.push_back(held_out[k].measured_s);
      zero.push_back(usable.zero_shot_s[held_index[k]]);
    }
    on_held = compare(groups, measured, zero, held_pred);
  }

  const FitOutcome outcome{rows,     usable,     summary,   fitted_cases, zero_fit,
                           held_out, held_index, held_pred, on_fitted,    on_held};
  if (args.json) {
    print_json(fit_json(args, outcome));
  } else {
    print_fit_text(args, outcome);
  }
  return 0;
}

}  // namespace

void register_fit(CLI::App& app, Action& action) {
  auto args = std::make_shared<FitArgs>();
  auto* cmd = app.add_subcommand("fit", "learn a cluster's factors from measured step times");
  cmd->add_option("csv", args->csv, "measurement CSV with measured step times (docs/accuracy.md)")
      ->required();
  cmd->add_option("--cluster", args->cluster, "use only rows whose cluster cell is this");
  cmd->add_option("--factors", args->factors,
                  "factors to fit, comma-separated (default: gemm, attention, memory_bound, "
                  "intra_node, inter_node, step_overhead; host only when named)");
  cmd->add_option("--take", args->take, "fit only N rows chosen to span the factors; score the rest");
  cmd->add_option("--threads", args->threads, "simulation threads (default: all cores)");
  cmd->add_option("-o,--out", args->out, "write the fitted factors to this TOML file");
  cmd->add_flag("--json", args->json, "machine-readable output on stdout");
  cmd->callback([&action, args] { action = [args] { return run_fit(*args); }; });
}

}  // namespace tetra::cli
