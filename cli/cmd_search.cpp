// tetrasim search SCENARIO [--top N] [--csv FILE] [--html FILE] [--threads N] [--json]: every
// valid layout of the scenario's [search] space, pruned by memory, simulated and ranked by
// tokens/s (docs/cli.md). A progress bar goes to stderr when stderr is a terminal.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "band.hpp"
#include "commands.hpp"
#include "html_pages.hpp"
#include "launcher_export.hpp"
#include "output.hpp"
#include "utilization.hpp"
#include "tetra/scenarios/compact_layout.hpp"
#include "tetra/base/error.hpp"
#include "tetra/base/units.hpp"
#include "tetra/parallel/layout.hpp"
#include "tetra/report/report.hpp"
#include "tetra/scenarios/profile_io.hpp"
#include "tetra/scenarios/scenario.hpp"
#include "tetra/search/search.hpp"

namespace tetra::cli {

namespace {

struct SearchArgs {
  std::string scenario;
  int top = -1;        // -1: 10 for the table, all for --json / --csv
  std::string csv;
  std::string html;
  int threads = 0;
  std::string fit;
  bool json = false;
  std::string export_to;  // --export: a launcher's name
};

/// Draws "search [=====>    ] 123/456" on stderr, overwriting the line.
void draw_progress(std::size_t done, std::size_t total) {
  constexpr int kWidth = 40;
  const int filled = total > 0 ? static_cast<int>(kWidth * done / total) : kWidth;
  std::string bar(static_cast<std::size_t>(kWidth), ' ');
  for (int i = 0; i < filled; ++i) bar[static_cast<std::size_t>(i)] = '=';
  if (filled < kWidth) bar[static_cast<std::size_t>(filled)] = '>';
  std::fprintf(stderr, "\rsimulating [%s] %zu/%zu", bar.c_str(), done, total);
  std::fflush(stderr);
}

/// Tokens per second per GPU of a ranked layout on the scenario's cluster.
double per_gpu(const scenarios::Scenario& sc, const search::RankedLayout& r) {
  return r.tokens_per_s / static_cast<double>(std::max<long long>(1, sc.cluster.total_gpus()));
}

costmodel::Utilization utilization_of(const scenarios::Scenario& sc, const search::RankedLayout& r) {
  return ranked_utilization(sc.model, sc.training, sc.cluster.gpu, r);
}

nlohmann::json layout_row(const scenarios::Scenario& sc, const search::RankedLayout& r, const costmodel::StepBand& band) {
  nlohmann::json j = layout_json(r.layout);
  j["micro_batches"] = r.micro_batches;
  j["step_time_s"] = r.step_time_s;
  j["step_time_band_s"] = interval_json(band, r.step_time_s);
  j["tokens_per_s"] = r.tokens_per_s;
  j["tokens_per_s_per_gpu"] = per_gpu(sc, r);
  j["tflops_per_gpu"] = r.tflops_per_gpu;
  j["mfu"] = r.mfu;
  add_utilization_json(j, utilization_of(sc, r));
  j["bubble_fraction"] = r.bubble_fraction;
  j["peak_gib"] = gib3(r.peak_bytes);
  j["estimate_peak_gib"] = gib3(r.estimate_peak_bytes);
  j["precision"] = precision_name(r.fp8);
  if (r.fp8.enabled()) j["fp8_param_gather"] = r.fp8.param_gather;
  j["grad_dtype"] = to_string(r.grad_dtype);
  j["compile"] = r.compile;
  return j;
}

std::string csv_text(const scenarios::Scenario& sc, const std::vector<search::RankedLayout>& rows, std::size_t n) {
  std::ostringstream os;
  os.precision(17);
  os << "rank,tp,cp,pp,dp,vp,mbs,recompute,schedule,sp,first_stage_layers,last_stage_layers,"
        "micro_batches,step_time_s,tokens_per_s,tflops_per_gpu,mfu,bubble_fraction,peak_gib,"
        "estimate_peak_gib,precision,dp_replicate,ac_freq,compile,tokens_per_s_per_gpu,hfu,"
        "mfu_peak_precision,mfu_peak_tflops,precision_peak,precision_peak_tflops,precision_peak_utilization,"
        "cp_comm_type,cp_a2a\n";
  for (std::size_t i = 0; i < n; ++i) {
    const auto& r = rows[i];
    const auto& l = r.layout;
    const costmodel::Utilization u = utilization_of(sc, r);
    os << i + 1 << ',' << l.tp << ',' << l.cp << ',' << l.pp << ',' << l.dp << ',' << l.vp << ','
       << l.mbs << ',' << to_string(l.recompute) << ',' << to_string(l.schedule)
       << ',' << (l.sp ? 1 : 0) << ',' << l.first_stage_layers << ',' << l.last_stage_layers << ','
       << r.micro_batches << ',' << r.step_time_s << ',' << r.tokens_per_s << ','
       << r.tflops_per_gpu << ',' << r.mfu << ',' << r.bubble_fraction << ','
       << fixed(gib(r.peak_bytes), 3) << ',' << fixed(gib(r.estimate_peak_bytes), 3) << ','
       << precision_name(r.fp8) << ',' << l.dp_replicate << ','
       << (l.recompute == parallel::Recompute::selective_layer ? l.ac_freq : 0) << ',' << (r.compile ? 1 : 0) << ','
       << per_gpu(sc, r) << ',' << u.hfu << ',' << u.mfu_peak.precision << ',' << u.mfu_peak.flops / 1e12 << ','
       << u.precision_peak.precision << ',' << u.precision_peak.flops / 1e12 << ',' << u.precision_peak_utilization
       << ',' << to_string(l.cp_comm) << ',' << l.cp_a2a << '\n';
  }
  return os.str();
}

/// The object `search --json` prints, with the first `listed` ranked layouts.
nlohmann::json search_json(const scenarios::Scenario& sc, const search::SearchResult& res, double seconds,
                           std::size_t listed, const costmodel::StepBand& band) {
  const auto& s = res.summary;
  nlohmann::json j;
  j["scenario"] = sc.path;
  j["model"] = sc.model.name;
  j["cluster"] = sc.cluster.name;
  j["gpus"] = sc.cluster.total_gpus();
  j["evaluated"] = s.valid;
  j["feasible"] = s.feasible;
  j["seconds"] = std::round(seconds * 1000.0) / 1000.0;
  nlohmann::json summary = search_counts_json(s);
  summary["capacity_gib"] = gib3(s.capacity_bytes);
  summary["budget_gib"] = gib3(s.budget_bytes);
  summary["memory_fraction"] = sc.search.memory_fraction;
  j["summary"] = std::move(summary);
  nlohmann::json rows = nlohmann::json::array();
  for (std::size_t i = 0; i < listed; ++i) rows.push_back(layout_row(sc, res.layouts[i], band));
  j["layouts"] = std::move(rows);
  // The band's source once; each layout carries its own low / high.
  j["step_time_band"] = band_source_json(band);
  return j;
}

/// The ranked layouts as a text table: a column for each knob the space varies.
std::string ranked_table(const scenarios::Scenario& sc, const search::SearchResult& res, std::size_t shown,
                         const costmodel::StepBand& band) {
  // A precision column when the space compares precisions.
  const bool by_precision = sc.search.precision.size() > 1;
  const bool by_compile = sc.search.compile.size() > 1;
  const bool by_gather = sc.search.fp8_param_gather.size() > 1;  // " pg": FP8 parameter gather
  const bool by_grads = sc.search.grad_dtype.size() > 1;
  const bool by_replicas =
      std::any_of(sc.search.dp_replicate.begin(), sc.search.dp_replicate.end(), [](int r) { return r != 1; });
  // ep / etp columns when the space varies them on a MoE model.
  const bool by_expert = sc.model.is_moe() && (sc.search.ep.size() > 1 || sc.search.etp.size() > 1);
  const bool by_order = sc.search.rank_order.size() > 1;
  // A column of the GEMM format's own peak when a listed layout runs FP8 or FP4 GEMMs.
  bool low_precision = false;
  for (std::size_t i = 0; i < shown; ++i) low_precision = low_precision || other_precision(utilization_of(sc, res.layouts[i]));
  std::vector<std::vector<std::string>> rows;
  for (std::size_t i = 0; i < shown; ++i) {
    const auto& r = res.layouts[i];
    const auto& l = r.layout;
    const costmodel::Utilization u = utilization_of(sc, r);
    std::string pp = std::to_string(l.pp);
    if (l.first_stage_layers > 0 || l.last_stage_layers > 0) {
      pp += " (" + std::to_string(l.first_stage_layers) + "/" + std::to_string(l.last_stage_layers) + ")";
    }
    std::string cp = std::to_string(l.cp);
    if (const std::string x = scenarios::cp_exchange(l); !x.empty()) cp += " (" + x + ")";
    rows.push_back({std::to_string(i + 1), std::to_string(l.tp), cp, pp,
                    std::to_string(l.dp), std::to_string(l.vp), std::to_string(l.mbs),
                    l.sp ? "on" : "off", to_string(l.recompute),
                    to_string(l.schedule), fixed(r.step_time_s, 3), interval_text(band, r.step_time_s),
                    fixed(r.tokens_per_s / 1e6, 3),
                    fixed(per_gpu(sc, r), 0), fixed(r.tflops_per_gpu, 0), fixed(r.mfu * 100.0, 1),
                    fixed(u.hfu * 100.0, 1), fixed(std::max(0.0, r.bubble_fraction) * 100.0, 1),
                    fixed(gib(r.peak_bytes), 1)});
    if (low_precision) {
      rows.back().insert(rows.back().begin() + 17, other_precision(u) ? fixed(u.precision_peak_utilization * 100.0, 1) : "-");
    }
    std::string rc = to_string(l.recompute);
    if (l.recompute == parallel::Recompute::selective_layer) rc += "/" + std::to_string(l.ac_freq);
    if (l.offload_layers > 0) rc += " off" + std::to_string(l.offload_layers);
    rows.back()[8] = rc;
    if (by_grads) rows.back().insert(rows.back().begin() + 10, to_string(r.grad_dtype));
    if (by_compile) rows.back().insert(rows.back().begin() + 10, r.compile ? "on" : "off");
    if (by_precision || by_gather) {
      const bool pg = by_gather && r.fp8.enabled() && r.fp8.param_gather;
      rows.back().insert(rows.back().begin() + 10, precision_name(r.fp8) + (pg ? " pg" : ""));
    }
    if (by_replicas) {
      rows.back()[4] = std::to_string(l.shard_dp()) + "x" + std::to_string(l.dp_replicate);
    }
    if (by_expert) {
      rows.back().insert(rows.back().begin() + 5, std::to_string(l.etp));
      rows.back().insert(rows.back().begin() + 5, std::to_string(l.ep));
    }
    if (by_order) rows.back().insert(rows.back().begin() + 1, l.rank_order);
  }
  std::vector<std::string> header{"rank", "tp", "cp", "pp", "dp", "vp", "mbs", "sp", "recompute",
                                  "schedule", "step s", "step band", "Mtok/s", "tok/s/GPU", "TFLOP/s", "MFU %", "HFU %",
                                  "bubble %", "peak GiB"};
  if (low_precision) header.insert(header.begin() + 17, "GEMM peak %");
  if (by_grads) header.insert(header.begin() + 10, "grads");
  if (by_compile) header.insert(header.begin() + 10, "compile");
  if (by_precision || by_gather) header.insert(header.begin() + 10, "precision");
  if (by_replicas) header[4] = "dp (shard x rep)";
  if (by_expert) {
    header.insert(header.begin() + 5, "etp");
    header.insert(header.begin() + 5, "ep");
  }
  if (by_order) header.insert(header.begin() + 1, "order");
  return format_table(header, rows);
}

/// What the MFU, HFU and GEMM peak columns divide by, under the table.
std::string utilization_notes(const scenarios::Scenario& sc, const search::SearchResult& res, std::size_t shown) {
  const costmodel::Peak peak = costmodel::mfu_peak(sc.cluster.gpu);
  std::string out = "MFU       model FLOPs per second (Megatron-LM's count: no recomputation, causal attention at half) "
                    "over the GPU's " + peak_text(peak) + "\n"
                    "HFU       the same with the forward FLOPs recomputation runs again, over the same peak\n";
  std::vector<std::string> peaks;  // the FP8 / FP4 peaks of the listed layouts, once each
  for (std::size_t i = 0; i < shown; ++i) {
    const costmodel::Utilization u = utilization_of(sc, res.layouts[i]);
    const std::string p = peak_text(u.precision_peak);
    if (other_precision(u) && std::find(peaks.begin(), peaks.end(), p) == peaks.end()) peaks.push_back(p);
  }
  for (const std::string& p : peaks) {
    out += "GEMM peak model FLOPs per second over the " + p + " of the linear layers' GEMMs\n";
  }
  return out;
}

int run_search(const SearchArgs& args) {
  check_threads(args.threads);
  const auto start = std::chrono::steady_clock::now();
  const scenarios::Scenario sc = scenarios::load_scenario(args.scenario, "", false);

  search::SearchInput in;
  in.model = &sc.model;
  in.cluster = &sc.cluster;
  in.training = &sc.training;
  in.space = &sc.search;
  // What [search] does not vary comes from [layout]: rank order, recompute modules, the expert
  // dispatcher, activation offloading and an explicit pipeline split.
  in.base = sc.layout;
  in.profile = sc.profile ? &*sc.profile : nullptr;
  std::optional<fit::FitSummary> fitted;
  if (!args.fit.empty()) {
    fitted = scenarios::read_fitted(args.fit);
    in.factors = fitted->factors;
  }
  const costmodel::StepBand band = band_for(sc.training.framework, fitted ? &*fitted : nullptr, args.fit);
  search::SearchOptions options;
  options.threads = args.threads;
  const bool tty = isatty(STDERR_FILENO) != 0;
  if (tty) options.progress = draw_progress;
  const search::SearchResult res = [&] {
    try {
      return search::run_search(in, options);
    } catch (const UserError& e) {
      // The search names the [search] key; the scenario file is where it stands.
      if (!e.where().file.empty()) throw;
      throw UserError(SourceLocation{sc.path}, e.key(), e.detail());
    }
  }();
  if (tty) std::fputs("\r\033[K", stderr);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto& s = res.summary;

  const std::size_t all = res.layouts.size();
  const std::size_t listed = args.top >= 0 ? std::min<std::size_t>(static_cast<std::size_t>(args.top), all) : all;
  std::vector<OutputFile> outputs;  // written together, or none of them
  if (!args.csv.empty()) outputs.push_back({args.csv, csv_text(sc, res.layouts, listed)});
  if (!args.html.empty()) {
    // The page plots every ranked layout; its table shows the --top N (default 10).
    std::vector<std::string> texts;
    for (const auto& r : res.layouts) texts.push_back(scenarios::compact_layout(r.layout, r.fp8, r.compile));
    const std::size_t table = args.top >= 0 ? listed : std::min<std::size_t>(10, all);
    outputs.push_back(
        {args.html, report::search_html(search_page(search_json(sc, res, seconds, all, band), texts, table))});
  }
  write_outputs(outputs);
  const SearchVerdict verdict = search_verdict(s);
  if (!args.export_to.empty()) {  // the launcher's text alone, so it can be saved as it is
    if (verdict.exit_code != 0) return verdict.exit_code;
    std::cout << export_ranked(args.export_to, sc.model, sc.training, sc.cluster, res.layouts.front());
    return 0;
  }
  if (args.json) {
    nlohmann::json j = search_json(sc, res, seconds, listed, band);
    j["verdict"] = verdict.name;
    print_json(j);
    return verdict.exit_code;
  }

  const std::size_t shown = args.top >= 0 ? listed : std::min<std::size_t>(10, all);
  std::cout << "scenario  " << sc.path << '\n'
            << "model     " << sc.model.name << ": " << sc.model.layers << " layers, hidden "
            << sc.model.hidden << '\n'
            << "cluster   " << sc.cluster.name << ": " << sc.cluster.total_gpus() << " GPUs, "
            << fixed(gib(s.capacity_bytes), 1) << " GiB each, budget "
            << fixed(gib(s.budget_bytes), 1) << " GiB ("
            << fixed(sc.search.memory_fraction * 100.0, 0) << "%)\n"
            << "training  seq " << sc.training.seq_len << ", global batch "
            << sc.training.global_batch << "\n\n";
  std::cout << "layouts   " << s.enumerated << " enumerated, " << s.invalid << " invalid, "
            << s.pruned_by_memory << " pruned by memory, " << s.simulated << " simulated, "
            << s.feasible << " ranked (" << s.layer_shapes << " layer shapes priced)";
  if (s.over_budget_simulated > 0) {
    std::cout << " (" << s.over_budget_simulated << " over budget after simulation)";
  }
  std::cout << '\n';
  if (!s.invalid_by_rule.empty()) {
    std::cout << "invalid   ";
    bool first = true;
    for (const auto& [rule, count] : s.invalid_by_rule) {
      std::cout << (first ? "" : ", ") << rule << ' ' << count;
      first = false;
    }
    std::cout << '\n';
  }
  std::cout << "time      " << fixed(seconds, 2) << " s\n"
            << "band      " << band_basis_text(band) << "\n\n";
  if (verdict.exit_code == kExitNothingValid) {
    std::cout << "no valid layout: each of the " << s.enumerated
              << " enumerated layouts breaks a rule (the `invalid` line counts them by rule)\n";
    return verdict.exit_code;
  }
  if (verdict.exit_code == kExitNothingFits) {
    std::cout << "no layout fits the memory budget\n";
    return verdict.exit_code;
  }
  std::cout << ranked_table(sc, res, shown, band) << '\n' << utilization_notes(sc, res, shown);
  return 0;
}

}  // namespace

void register_search(CLI::App& app, Action& action) {
  auto args = std::make_shared<SearchArgs>();
  auto* cmd = app.add_subcommand(
      "search", "enumerate every valid layout, prune by memory, simulate and rank by tokens/s");
  cmd->add_option("scenario", args->scenario, "scenario TOML file with a [search] table")
      ->required();
  cmd->add_option("--top", args->top,
                  "list the N best layouts (default 10 in the table, all with --json / --csv)")
      ->check(CLI::Range(0, 1000000000));
  cmd->add_option("--csv", args->csv, "also write the ranked layouts to this CSV file");
  cmd->add_option("--html", args->html,
                  "write a self-contained HTML page (throughput against memory, the top-N table) to FILE");
  cmd->add_option("--threads", args->threads, "worker threads (default: all cores)")
      ->check(CLI::Range(0, 1000000000));
  cmd->add_option("--fit", args->fit, "apply the cluster factors of this fitted file (tetrasim fit -o)");
  auto* json = cmd->add_flag("--json", args->json, "machine-readable output on stdout");
  add_export_option(cmd, args->export_to)->excludes(json);
  cmd->callback([&action, args] { action = [args] { return run_search(*args); }; });
}

}  // namespace tetra::cli
