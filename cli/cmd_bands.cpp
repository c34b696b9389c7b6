// tetrasim bands [CSV...] [-o FILE] [--check FILE] [--commit REV] [--threads N] [--json]: the
// zero-shot error bands of predicted step times (costmodel/error_band.hpp). Every step-time row
// of the measurement files (step_time_s, and tokens/s per GPU and MFU as the step they imply)
// is predicted; its signed error predicted / measured - 1 goes to the band of the framework
// that ran it. Each file is also checked against the band built without its rows (leave one
// file out). -o writes the bands file the build embeds (make error-bands); --check fails when
// a committed one differs from what the files give now.

#include <algorithm>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "output.hpp"
#include "tetra/base/text_file.hpp"
#include "tetra/costmodel/error_band.hpp"
#include "tetra/costmodel/memory.hpp"
#include "tetra/fit/fit.hpp"
#include "tetra/base/error.hpp"
#include "tetra/scenarios/measurements.hpp"
#include "tetra/scenarios/profile_io.hpp"

namespace tetra::cli {

namespace {

struct BandsArgs {
  std::vector<std::string> csvs;
  std::string out;
  std::string check;
  std::string commit;
  int threads = 0;
  bool json = false;
};

/// One predicted step-time row.
struct RowError {
  std::size_t file = 0;  ///< index into the files
  std::string id;
  parallel::Framework framework = parallel::Framework::megatron;
  double measured_s = 0;
  double predicted_s = 0;
  double error = 0;      ///< signed_error(predicted_s, measured_s)
};

struct Excluded {
  std::size_t file = 0;
  std::string id;
  std::string reason;
};

bool is_step_metric(scenarios::Metric m) {
  return m == scenarios::Metric::step_time_s || m == scenarios::Metric::tokens_per_s_per_gpu ||
         m == scenarios::Metric::mfu;
}

/// The signed errors of one file's step-time rows. Rows validate skips, and rows the memory
/// model predicts not to fit the GPU (validate's outcome rule), are excluded: a band says how
/// far off a step that runs is, and the planner never ranks a layout that does not fit.
void file_errors(std::size_t file, const std::vector<scenarios::MeasurementRow>& rows, int threads,
                 std::vector<RowError>& out, std::vector<Excluded>& excluded) {
  std::vector<fit::StepCase> cases;
  std::vector<const scenarios::MeasurementRow*> sources;
  for (const auto& r : rows) {
    if (!is_step_metric(r.metric)) continue;
    if (!r.skip_reason.empty()) {
      excluded.push_back({file, r.id, r.skip_reason});
      continue;
    }
    fit::StepCase c = scenarios::step_case(r);
    if (c.measured_s <= 0) {
      excluded.push_back({file, r.id, "no positive measured value"});
      continue;
    }
    bool fits = false;
    try {
      fits = costmodel::estimate_memory(r.model, r.cluster, r.training, r.layout).fits;
    } catch (const std::exception& e) {
      excluded.push_back({file, r.id, std::string("memory cannot be estimated: ") + e.what()});
      continue;
    }
    if (!fits) {
      excluded.push_back({file, r.id, "predicted out of memory"});
      continue;
    }
    cases.push_back(std::move(c));
    sources.push_back(&r);
  }
  const std::vector<fit::StepPrediction> pred = fit::predict_steps(cases, costmodel::Factors{}, threads);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    if (!pred[i].failure.empty()) {
      excluded.push_back({file, cases[i].id, pred[i].failure});
      continue;
    }
    out.push_back({file, cases[i].id, sources[i]->training.framework, cases[i].measured_s,
                   pred[i].seconds, costmodel::signed_error(pred[i].seconds, cases[i].measured_s)});
  }
}

/// Rounds a signed error to 1e-6 so the bands file carries no float noise.
double round_error(double e) { return round_to(e, 6); }

costmodel::ErrorBand rounded(costmodel::ErrorBand b) {
  b.low_error = round_error(b.low_error);
  b.high_error = round_error(b.high_error);
  return b;
}

/// The bands of every framework and the pooled band, from the rows of every file but `skip`
/// (none when skip is past the files).
costmodel::RegimeBands bands_without(const std::vector<RowError>& errors, std::size_t skip) {
  std::map<parallel::Framework, std::vector<double>> by_framework;
  std::vector<double> every;
  for (const auto& e : errors) {
    if (e.file == skip) continue;
    by_framework[e.framework].push_back(e.error);
    every.push_back(e.error);
  }
  costmodel::RegimeBands b;
  for (const auto& [f, list] : by_framework) b.entries.push_back({f, rounded(costmodel::band_of_errors(list))});
  b.pooled = rounded(costmodel::band_of_errors(every));
  return b;
}

costmodel::RegimeBands compute_bands(const BandsArgs& args, const std::vector<RowError>& errors) {
  costmodel::RegimeBands b = bands_without(errors, args.csvs.size());
  b.command = "tetrasim bands";
  for (const auto& f : args.csvs) b.command += " " + f;
  b.commit = args.commit;
  b.sources = args.csvs;
  for (std::size_t f = 0; f < args.csvs.size(); ++f) {
    // Each file against the band a prediction would carry without its rows (zero_shot_band:
    // its framework's, or the pooled one where the other files hold too few of it).
    const costmodel::RegimeBands others = bands_without(errors, f);
    for (const auto& entry : b.entries) {
      std::vector<const RowError*> mine;
      for (const auto& e : errors) {
        if (e.file == f && e.framework == entry.framework) mine.push_back(&e);
      }
      if (mine.empty()) continue;
      const costmodel::StepBand band = costmodel::zero_shot_band(others, entry.framework);
      costmodel::BandCoverage c;
      c.file = args.csvs[f];
      c.framework = entry.framework;
      c.rows = mine.size();
      c.band = band.band;
      c.pooled = band.regime == "all";
      if (c.band.available()) {
        for (const RowError* e : mine) {
          const costmodel::StepInterval iv = costmodel::band_interval(c.band, e->predicted_s);
          if (e->measured_s >= iv.low_s && e->measured_s <= iv.high_s) ++c.inside;
        }
      }
      b.coverage.push_back(std::move(c));
    }
  }
  return b;
}

std::string signed_percent(double e) { return (e >= 0 ? "+" : "") + fixed(e * 100.0, 1) + " %"; }

std::string band_cell(const costmodel::ErrorBand& b) {
  return b.available() ? signed_percent(b.low_error) + " .. " + signed_percent(b.high_error) : std::string("-");
}

/// The bands of each framework and the leave-one-file-out coverage, as tables.
void print_band_tables(const costmodel::RegimeBands& bands) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : bands.entries) {
    rows.push_back({costmodel::regime_name(e.framework), std::to_string(e.band.rows),
                    e.band.available() ? band_cell(e.band)
                                       : "too few rows (a band needs " + std::to_string(costmodel::kMinBandRows) + ")"});
  }
  rows.push_back({"all (pooled)", std::to_string(bands.pooled.rows), band_cell(bands.pooled)});
  std::cout << format_table({"framework", "rows", "signed error band"}, rows);
  std::cout << "\nleave one file out: each file against the band of the other files' rows\n";
  rows.clear();
  for (const auto& c : bands.coverage) {
    rows.push_back({c.file, std::string(costmodel::regime_name(c.framework)) + (c.pooled ? " (pooled)" : ""),
                    std::to_string(c.rows), std::to_string(c.band.rows),
                    band_cell(c.band),
                    c.band.available() ? std::to_string(c.inside) + " (" + percent(static_cast<double>(c.inside) / c.rows) + ")"
                                       : std::string("no band")});
  }
  std::cout << format_table({"file", "framework", "rows", "band rows", "band", "inside"}, rows);
  std::size_t pooled_rows = 0;
  std::size_t pooled_inside = 0;
  for (const auto& c : bands.coverage) {
    pooled_rows += c.rows;
    pooled_inside += c.inside;
  }
  if (pooled_rows > 0) {
    std::cout << "pooled    " << pooled_inside << " of " << pooled_rows << " rows inside ("
              << percent(static_cast<double>(pooled_inside) / pooled_rows) << ")\n";
  }
}

int run_bands(const BandsArgs& given) {
  check_threads(given.threads);
  BandsArgs args = given;
  std::string committed;
  if (!args.check.empty()) {
    committed = read_input_file(args.check);
    const costmodel::RegimeBands recorded = scenarios::parse_error_bands(committed, args.check);
    // The check regenerates exactly what the file records: its sources and its commit.
    if (args.csvs.empty()) args.csvs = recorded.sources;
    args.commit = recorded.commit;
  }
  if (args.csvs.empty()) throw UserError(SourceLocation{"bands"}, "csv", "no measurement file given");
  std::vector<RowError> errors;
  std::vector<Excluded> excluded;
  std::size_t step_rows = 0;
  for (std::size_t f = 0; f < args.csvs.size(); ++f) {
    const std::vector<scenarios::MeasurementRow> rows = scenarios::read_measurements(args.csvs[f]);
    for (const auto& r : rows) step_rows += is_step_metric(r.metric) ? 1 : 0;
    file_errors(f, rows, args.threads, errors, excluded);
  }
  const costmodel::RegimeBands bands = compute_bands(args, errors);
  const std::string text = scenarios::format_error_bands(bands);
  if (!args.check.empty() && text != committed) {
    throw UserError(SourceLocation{args.check}, "",
                    "differs from the bands the measurement files give now (run make error-bands)");
  }
  if (!args.out.empty()) write_file_atomic(args.out, text);

  if (args.json) {
    nlohmann::json j;
    j["sources"] = args.csvs;
    j["step_rows"] = step_rows;
    j["low_quantile"] = costmodel::kBandLowQuantile;
    j["high_quantile"] = costmodel::kBandHighQuantile;
    j["min_rows"] = costmodel::kMinBandRows;
    nlohmann::json frameworks = nlohmann::json::object();
    for (const auto& e : bands.entries) {
      frameworks[parallel::to_string(e.framework)] = {
          {"rows", e.band.rows},
          {"low_error", e.band.available() ? nlohmann::json(e.band.low_error) : nlohmann::json(nullptr)},
          {"high_error", e.band.available() ? nlohmann::json(e.band.high_error) : nlohmann::json(nullptr)}};
    }
    frameworks["all"] = {
        {"rows", bands.pooled.rows},
        {"low_error", bands.pooled.available() ? nlohmann::json(bands.pooled.low_error) : nlohmann::json(nullptr)},
        {"high_error", bands.pooled.available() ? nlohmann::json(bands.pooled.high_error) : nlohmann::json(nullptr)}};
    j["frameworks"] = std::move(frameworks);
    nlohmann::json cov = nlohmann::json::array();
    for (const auto& c : bands.coverage) {
      const bool ok = c.band.available();
      cov.push_back({{"file", c.file},
                     {"framework", parallel::to_string(c.framework)},
                     {"pooled", c.pooled},
                     {"rows", c.rows},
                     {"band_rows", c.band.rows},
                     {"low_error", ok ? nlohmann::json(c.band.low_error) : nlohmann::json(nullptr)},
                     {"high_error", ok ? nlohmann::json(c.band.high_error) : nlohmann::json(nullptr)},
                     {"inside", ok ? nlohmann::json(c.inside) : nlohmann::json(nullptr)},
                     {"coverage", ok ? nlohmann::json(round_to(static_cast<double>(c.inside) / c.rows, 4))
                                     : nlohmann::json(nullptr)}});
    }
    j["coverage"] = std::move(cov);
    nlohmann::json ex = nlohmann::json::array();
    for (const auto& e : excluded) ex.push_back({{"file", args.csvs[e.file]}, {"id", e.id}, {"reason", e.reason}});
    j["excluded"] = std::move(ex);
    nlohmann::json per = nlohmann::json::array();
    for (const auto& e : errors) {
      per.push_back({{"file", args.csvs[e.file]},
                     {"id", e.id},
                     {"framework", parallel::to_string(e.framework)},
                     {"measured_s", round_to(e.measured_s, 6)},
                     {"predicted_s", round_to(e.predicted_s, 6)},
                     {"error", round_error(e.error)}});
    }
    j["per_row"] = std::move(per);
    if (!args.out.empty()) j["written"] = args.out;
    print_json(j);
    return 0;
  }

  std::cout << "bands     " << fixed(costmodel::kBandLowQuantile * 100, 0) << "th-"
            << fixed(costmodel::kBandHighQuantile * 100, 0)
            << "th percentile of the signed step-time errors (predicted / measured - 1)\n"
            << "rows      " << step_rows << " step-time rows in " << args.csvs.size() << " files: " << errors.size()
            << " predicted, " << excluded.size() << " excluded\n";
  std::map<std::string, int> reasons;
  for (const auto& e : excluded) ++reasons[e.reason];
  for (const auto& [reason, n] : reasons) std::cout << "          " << n << " " << reason << '\n';
  std::cout << '\n';
  print_band_tables(bands);
  if (!args.out.empty()) std::cout << "\nwritten   " << args.out << '\n';
  if (!args.check.empty()) std::cout << "\nchecked   " << args.check << " is up to date\n";
  return 0;
}

}  // namespace

void register_bands(CLI::App& app, Action& action) {
  auto args = std::make_shared<BandsArgs>();
  auto* cmd = app.add_subcommand("bands", "measure the error bands of predicted step times on measurement files");
  cmd->add_option("csv", args->csvs,
                  "measurement CSVs (docs/accuracy.md); with --check, default the file's sources");
  cmd->add_option("-o,--out", args->out, "write the bands file (data/error_bands.toml)");
  cmd->add_option("--check", args->check, "fail unless this bands file is what the measurement files give now");
  cmd->add_option("--commit", args->commit, "tetrasim commit recorded in the bands file");
  cmd->add_option("--threads", args->threads, "simulation threads (default: all cores)");
  cmd->add_flag("--json", args->json, "machine-readable output on stdout");
  cmd->callback([&action, args] { action = [args] { return run_bands(*args); }; });
}

}  // namespace tetra::cli
