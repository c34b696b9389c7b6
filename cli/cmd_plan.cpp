// tetrasim plan SCENARIO [--json] [--csv FILE] [--html FILE] [--threads N] [--fit FILE]
//                        [--shard I/N [--out FILE]] [--merge FILES...]:
// for every candidate cluster and GPU count of the scenario's [plan], the best layout of its
// [search] space, the days, GPU-hours and cost of training the tokens with the time lost to
// failures and checkpoints, the ranking by days and by cost, the Pareto front and the
// candidates that meet the deadline and the budget (docs/cli.md, `tetrasim plan`).

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "band.hpp"
#include "commands.hpp"
#include "html_pages.hpp"
#include "launcher_export.hpp"
#include "output.hpp"
#include "plan_io.hpp"
#include "utilization.hpp"
#include "tetra/scenarios/compact_layout.hpp"
#include "tetra/base/error.hpp"
#include "tetra/base/units.hpp"
#include "tetra/parallel/fp8.hpp"
#include "tetra/plan/plan.hpp"
#include "tetra/report/report.hpp"
#include "tetra/scenarios/plan.hpp"
#include "tetra/scenarios/profile_io.hpp"

namespace tetra::cli {

namespace {

struct PlanArgs {
  std::string scenario;
  bool json = false;
  std::string csv;
  std::string html;
  int threads = 0;
  std::string fit;
  std::string shard;                 // "I/N"
  std::string out;                   // shard output file ("" = stdout)
  std::vector<std::string> merge;    // shard files
  std::string export_to;             // --export: a launcher's name
};

/// JSON number, or null for an infinite value (a job that never finishes, no failures).
nlohmann::json finite_or_null(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

/// "I/N" with 1 <= I <= N, or nothing.
std::optional<std::pair<int, int>> parse_shard(const std::string& text) {
  int i = 0, n = 0;
  char extra = 0;
  if (text.find('/') == std::string::npos || std::sscanf(text.c_str(), "%d/%d%c", &i, &n, &extra) != 2 || n < 1 ||
      i < 1 || i > n || n > 1000000) {
    return std::nullopt;
  }
  return std::make_pair(i, n);
}

/// "12.3" with the given decimals, or "-" when infinite.
std::string num(double x, int digits) { return std::isfinite(x) ? fixed(x, digits) : "never"; }

std::string candidate_label(const plan::Candidate& c) {
  return c.name + " x " + std::to_string(c.cluster.total_gpus());
}

nlohmann::json plan_json(const scenarios::PlanScenario& sc, const plan::PlanInput& in,
                         const std::vector<plan::Evaluation>& evals, const plan::Report& rep) {
  const plan::PlanSettings& set = in.settings;
  nlohmann::json j;
  j["scenario"] = sc.path;
  j["model"] = sc.model.name;
  j["tokens"] = set.tokens;
  j["seq_len"] = sc.training.seq_len;
  j["global_batch"] = sc.training.global_batch;
  j["deadline_days"] = set.deadline_days ? nlohmann::json(*set.deadline_days) : nlohmann::json(nullptr);
  j["budget"] = set.budget ? nlohmann::json(*set.budget) : nlohmann::json(nullptr);
  nlohmann::json g;
  g["failures_per_gpu_hour"] = set.goodput.failures_per_gpu_hour;
  g["checkpoint_bandwidth_Bps"] = set.goodput.checkpoint_bandwidth_Bps;
  g["restart_s"] = set.goodput.restart_s;
  g["checkpoint_bytes"] = rep.checkpoint_bytes;
  j["goodput_model"] = std::move(g);
  j["energy_model"] = {{"pue", set.pue}, {"counts", "gpus"}};
  j["priced"] = rep.priced;
  nlohmann::json rows = nlohmann::json::array();
  for (const plan::Row& r : rep.rows) {
    const plan::Candidate& c = in.candidates[r.index];
    const plan::Evaluation& e = evals[r.index];
    nlohmann::json row;
    row["id"] = r.index;
    row["name"] = c.name;
    row["cluster"] = c.cluster.name;
    row["gpu"] = c.cluster.gpu.name;
    row["gpus"] = c.cluster.total_gpus();
    if (c.price_per_gpu_hour) row["price_per_gpu_hour"] = *c.price_per_gpu_hour;
    row["fits"] = r.fits;
    nlohmann::json s;
    s["valid"] = e.summary.valid;
    s["pruned_by_memory"] = e.summary.pruned_by_memory;
    s["simulated"] = e.summary.simulated;
    s["skipped_by_bound"] = e.skipped_by_bound;
    row["search"] = std::move(s);
    if (r.fits) {
      const search::RankedLayout& b = r.best;
      row["layout"] = layout_json(b.layout);
      row["precision"] = precision_name(b.fp8);
      row["compile"] = b.compile;
      row["micro_batches"] = b.micro_batches;
      row["step_time_s"] = b.step_time_s;
      row["tokens_per_s"] = b.tokens_per_s;
      row["tokens_per_s_per_gpu"] = b.tokens_per_s / static_cast<double>(c.cluster.total_gpus());
      row["tflops_per_gpu"] = b.tflops_per_gpu;
      row["mfu"] = b.mfu;
      add_utilization_json(row, ranked_utilization(sc.model, sc.training, c.cluster.gpu, b));
      row["bubble_fraction"] = b.bubble_fraction;
      row["peak_gib"] = gib3(b.peak_bytes);
      row["capacity_gib"] = gib3(c.cluster.gpu.memory_bytes);
      row["headroom_gib"] = gib3(r.headroom_bytes);
      nlohmann::json gp;
      gp["checkpoint_write_s"] = r.goodput.checkpoint_write_s;
      gp["mtbf_s"] = finite_or_null(r.goodput.mtbf_s);
      gp["checkpoint_interval_s"] = finite_or_null(r.goodput.interval_s);
      gp["checkpoint_fraction"] = r.goodput.checkpoint_fraction;
      gp["failure_fraction"] = r.goodput.failure_fraction;
      gp["goodput"] = r.goodput.goodput;
      row["goodput"] = std::move(gp);
      row["step_time_band_s"] = band_json(c.band, b.step_time_s);
      auto range = [](const std::optional<plan::Range>& x) {
        return x ? nlohmann::json{{"low", finite_or_null(x->low)}, {"high", finite_or_null(x->high)}}
                 : nlohmann::json{{"low", nullptr}, {"high", nullptr}};
      };
      row["compute_days"] = r.compute_days;
      row["days"] = finite_or_null(r.days);
      row["days_band"] = range(r.days_band);
      if (r.cost) row["cost_band"] = range(r.cost_band);
      row["gpu_hours"] = finite_or_null(r.gpu_hours);
      if (r.cost) row["cost"] = finite_or_null(*r.cost);
      row["gpu_power_w"] = r.gpu_power_w;
      row["energy_mwh"] = r.energy_mwh ? nlohmann::json(*r.energy_mwh) : nlohmann::json(nullptr);
      if (r.energy_mwh) row["energy_band"] = range(r.energy_band);
      row["finishes"] = r.finishes;
      row["pareto"] = r.pareto;
      if (r.deadline) {
        row["meets_deadline"] = *r.deadline == plan::Verdict::meets;
        row["deadline_verdict"] = plan::to_string(*r.deadline);
      }
      if (r.budget) {
        row["meets_budget"] = *r.budget == plan::Verdict::meets;
        row["budget_verdict"] = plan::to_string(*r.budget);
      }
      row["rank_days"] = r.rank_days;
      if (rep.priced) row["rank_cost"] = r.rank_cost;
    }
    rows.push_back(std::move(row));
  }
  j["candidates"] = std::move(rows);
  auto ids = [](const std::vector<std::size_t>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (auto i : v) a.push_back(i);
    return a;
  };
  j["by_days"] = ids(rep.by_days);
  j["by_cost"] = ids(rep.by_cost);
  j["pareto"] = ids(rep.pareto);
  j["meeting"] = ids(rep.meeting);
  j["at_risk"] = ids(rep.at_risk);
  nlohmann::json v;
  v["fastest"] = rep.by_days.empty() ? nlohmann::json(nullptr) : nlohmann::json(rep.by_days.front());
  v["cheapest"] = rep.by_cost.empty() ? nlohmann::json(nullptr) : nlohmann::json(rep.by_cost.front());
  v["recommended"] = rep.meeting.empty() ? nlohmann::json(nullptr) : nlohmann::json(rep.meeting.front());
  j["verdict"] = std::move(v);
  return j;
}

std::string plan_csv(const plan::PlanInput& in, const plan::Report& rep) {
  std::ostringstream os;
  os.precision(17);
  os << "id,name,cluster,gpu,gpus,price_per_gpu_hour,fits,tp,cp,pp,dp,vp,mbs,sp,recompute,schedule,"
        "first_stage_layers,last_stage_layers,precision,micro_batches,step_time_s,tokens_per_s,"
        "tflops_per_gpu,mfu,bubble_fraction,peak_gib,headroom_gib,checkpoint_write_s,mtbf_s,"
        "checkpoint_interval_s,goodput,compute_days,days,gpu_hours,cost,pareto,meets_deadline,"
        "meets_budget,rank_days,rank_cost,tokens_per_s_per_gpu,hfu,mfu_peak_precision,mfu_peak_tflops,precision_peak,"
        "precision_peak_tflops,precision_peak_utilization,gpu_power_w,energy_mwh,deadline_verdict,budget_verdict\n";
  auto quoted = [](const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
  };
  auto opt = [](double x) {
    if (!std::isfinite(x)) return std::string();
    std::ostringstream o;
    o.precision(17);
    o << x;
    return o.str();
  };
  auto flag = [](const std::optional<plan::Verdict>& v) {
    return v ? std::string(*v == plan::Verdict::meets ? "1" : "0") : std::string();
  };
  auto words = [](const std::optional<plan::Verdict>& v) { return v ? std::string(plan::to_string(*v)) : std::string(); };
  for (const plan::Row& r : rep.rows) {
    const plan::Candidate& c = in.candidates[r.index];
    os << r.index << ',' << quoted(c.name) << ',' << quoted(c.cluster.name) << ',' << quoted(c.cluster.gpu.name)
       << ',' << c.cluster.total_gpus() << ',' << (c.price_per_gpu_hour ? opt(*c.price_per_gpu_hour) : "") << ','
       << (r.fits ? 1 : 0);
    if (!r.fits) {
      os << std::string(44, ',') << '\n';
      continue;
    }
    const auto& b = r.best;
    const auto& l = b.layout;
    os << ',' << l.tp << ',' << l.cp << ',' << l.pp << ',' << l.dp << ',' << l.vp << ',' << l.mbs << ','
       << (l.sp ? 1 : 0) << ',' << to_string(l.recompute) << ',' << to_string(l.schedule) << ','
       << l.first_stage_layers << ',' << l.last_stage_layers << ',' << precision_name(b.fp8) << ','
       << b.micro_batches << ',' << opt(b.step_time_s) << ',' << opt(b.tokens_per_s) << ','
       << opt(b.tflops_per_gpu) << ',' << opt(b.mfu) << ',' << opt(b.bubble_fraction) << ','
       << fixed(gib(b.peak_bytes), 3) << ',' << fixed(gib(r.headroom_bytes), 3) << ','
       << opt(r.goodput.checkpoint_write_s) << ',' << opt(r.goodput.mtbf_s) << ','
       << opt(r.goodput.interval_s) << ',' << opt(r.goodput.goodput) << ',' << opt(r.compute_days) << ','
       << opt(r.days) << ',' << opt(r.gpu_hours) << ',' << (r.cost ? opt(*r.cost) : "") << ','
       << (r.pareto ? 1 : 0) << ',' << flag(r.deadline) << ',' << flag(r.budget) << ','
       << r.rank_days << ',' << (rep.priced ? std::to_string(r.rank_cost) : "") << ',';
    const costmodel::Utilization u = ranked_utilization(*in.model, *in.training, c.cluster.gpu, b);
    os << opt(b.tokens_per_s / static_cast<double>(c.cluster.total_gpus())) << ',' << opt(u.hfu) << ','
       << u.mfu_peak.precision << ',' << opt(u.mfu_peak.flops / 1e12) << ',' << u.precision_peak.precision << ','
       << opt(u.precision_peak.flops / 1e12) << ',' << opt(u.precision_peak_utilization) << ',' << opt(r.gpu_power_w)
       << ',' << (r.energy_mwh ? opt(*r.energy_mwh) : "") << ',' << words(r.deadline) << ',' << words(r.budget)
       << '\n';
  }
  return os.str();
}

/// Megawatt-hours: whole ones from 100 up, one decimal below.
std::string mwh(double x) { return fixed(x, x < 100 ? 1 : 0); }

/// "1.23 M" style for large amounts.
std::string millions(double x) { return std::isfinite(x) ? fixed(x / 1e6, 2) : "never"; }

std::string duration_text(double s) {
  if (!std::isfinite(s)) return "never";
  if (s >= 3600) return fixed(s / 3600.0, 2) + " h";
  if (s >= 60) return fixed(s / 60.0, 1) + " min";
  return fixed(s, 1) + " s";
}

/// What MFU divides by and what the energy counts, per GPU type of the table (`order`).
void print_peak_and_energy_notes(const scenarios::PlanScenario& sc, const plan::PlanInput& in, const plan::Report& rep,
                                 const std::vector<std::size_t>& order) {
  std::vector<std::string> gpus;  // first appearance in the table
  std::vector<std::string> gemm;  // the FP8 / FP4 peaks of the best layouts, once each
  std::string peaks, power;
  for (const std::size_t i : order) {
    if (!rep.rows[i].fits) continue;
    const hw::Gpu& g = in.candidates[i].cluster.gpu;
    const costmodel::Utilization u = ranked_utilization(sc.model, sc.training, g, rep.rows[i].best);
    const std::string p = g.name + " " + peak_text(u.precision_peak);
    if (other_precision(u) && std::find(gemm.begin(), gemm.end(), p) == gemm.end()) gemm.push_back(p);
    if (std::find(gpus.begin(), gpus.end(), g.name) != gpus.end()) continue;
    gpus.push_back(g.name);
    peaks += (peaks.empty() ? "" : ", ") + g.name + " " + fixed(g.bf16_peak_flops / 1e12, 0);
    const double w = plan::training_power_w(g);
    power += (power.empty() ? "" : ", ") + g.name + " " + (w > 0 ? fixed(w, 0) + " W" : std::string("unknown"));
  }
  std::cout << "MFU       model FLOPs over each GPU's BF16 dense peak (" << peaks
            << " TFLOP/s); HFU adds the forward FLOPs recomputation runs again\n";
  for (const std::string& p : gemm) std::cout << "GEMM peak model FLOPs over the " << p << " of the linear layers' GEMMs\n";
  std::cout << "energy    the GPUs at their power limit (" << power << ") for the days shown, times PUE "
            << fixed(in.settings.pue, 2) << "; the rest of each node is not counted\n";
}

/// The candidate table, rows in `order`.
std::string candidate_table(const scenarios::PlanScenario& sc, const plan::PlanInput& in, const plan::Report& rep,
                            const std::vector<std::size_t>& order) {
  const plan::PlanSettings& set = in.settings;
  // A column of the GEMM format's own peak when a candidate's best layout runs FP8 or FP4 GEMMs.
  auto utilization_of = [&](const plan::Row& r) {
    return ranked_utilization(sc.model, sc.training, in.candidates[r.index].cluster.gpu, r.best);
  };
  const bool low_precision = std::any_of(rep.rows.begin(), rep.rows.end(), [&](const plan::Row& r) {
    return r.fits && other_precision(utilization_of(r));
  });
  std::vector<std::string> header{"", "candidate", "gpus", "best layout", "step s", "tok/s/GPU", "MFU %", "HFU %",
                                  "headroom GiB", "goodput %", "ckpt every", "days", "days band", "GPU-h M", "MWh"};
  if (low_precision) header.insert(header.begin() + 8, "GEMM peak %");
  if (rep.priced) {
    header.push_back("cost M");
    header.push_back("cost band M");
    header.push_back("rank cost");
  }
  if (set.deadline_days) header.push_back("deadline");
  if (set.budget) header.push_back("budget");
  std::vector<std::vector<std::string>> rows;
  for (const std::size_t i : order) {
    const plan::Row& r = rep.rows[i];
    const plan::Candidate& c = in.candidates[i];
    std::vector<std::string> row{r.pareto ? "*" : "", c.name, std::to_string(c.cluster.total_gpus())};
    if (!r.fits) {
      row.push_back("no layout fits the memory budget");
      rows.push_back(std::move(row));
      continue;
    }
    row.push_back(scenarios::compact_layout(r.best.layout, r.best.fp8, r.best.compile));
    const costmodel::Utilization u = utilization_of(r);
    row.push_back(fixed(r.best.step_time_s, 3));
    row.push_back(fixed(r.best.tokens_per_s / static_cast<double>(c.cluster.total_gpus()), 0));
    row.push_back(fixed(r.best.mfu * 100.0, 1));
    row.push_back(fixed(u.hfu * 100.0, 1));
    if (low_precision) row.push_back(other_precision(u) ? fixed(u.precision_peak_utilization * 100.0, 1) : "-");
    row.push_back(fixed(gib(r.headroom_bytes), 1));
    row.push_back(fixed(r.goodput.goodput * 100.0, 1));
    row.push_back(duration_text(r.goodput.interval_s));
    row.push_back(num(r.days, 1));
    row.push_back(r.days_band ? num(r.days_band->low, 1) + " .. " + num(r.days_band->high, 1) : "-");
    row.push_back(millions(r.gpu_hours));
    row.push_back(r.energy_mwh ? mwh(*r.energy_mwh) : "-");
    if (rep.priced) {
      row.push_back(millions(r.cost.value_or(0)));
      row.push_back(r.cost_band ? millions(r.cost_band->low) + " .. " + millions(r.cost_band->high) : "-");
      row.push_back(r.rank_cost > 0 ? std::to_string(r.rank_cost) : "-");
    }
    if (set.deadline_days) row.push_back(plan::to_string(r.deadline.value_or(plan::Verdict::misses)));
    if (set.budget) row.push_back(plan::to_string(r.budget.value_or(plan::Verdict::misses)));
    rows.push_back(std::move(row));
  }
  return format_table(header, rows);
}

void print_text(const scenarios::PlanScenario& sc, const plan::PlanInput& in,
                const std::vector<plan::Evaluation>& evals, const plan::Report& rep, const std::string& time_line,
                const std::string& fit_line) {
  const plan::PlanSettings& set = in.settings;
  const double tokens_per_step = static_cast<double>(sc.training.global_batch) * sc.training.seq_len;
  char tok[64];
  if (set.tokens >= 1e12) {
    std::snprintf(tok, sizeof tok, "%.4gT", set.tokens / 1e12);
  } else if (set.tokens >= 1e9) {
    std::snprintf(tok, sizeof tok, "%.4gB", set.tokens / 1e9);
  } else {
    std::snprintf(tok, sizeof tok, "%.4g", set.tokens);
  }
  std::cout << "scenario  " << sc.path << '\n'
            << "model     " << sc.model.name << ": " << sc.model.layers << " layers, hidden " << sc.model.hidden
            << '\n'
            << "training  " << tok << " tokens, seq " << sc.training.seq_len << ", global batch "
            << sc.training.global_batch << " (" << fixed(tokens_per_step / 1e6, 1) << "M tokens per step)\n";
  const auto& g = set.goodput;
  char rate[64];
  std::snprintf(rate, sizeof rate, "%.3g", g.failures_per_gpu_hour);
  std::cout << "failures  " << rate << " per GPU-hour; checkpoint (weights + optimizer) "
            << units::format_bytes(rep.checkpoint_bytes) << " at " << units::format_bandwidth(g.checkpoint_bandwidth_Bps)
            << ": " << duration_text(rep.checkpoint_bytes / g.checkpoint_bandwidth_Bps) << "; restart "
            << duration_text(g.restart_s) << '\n';
  if (set.deadline_days || set.budget) {
    std::cout << "limits    ";
    if (set.deadline_days) std::cout << "deadline " << num(*set.deadline_days, 1) << " days";
    if (set.deadline_days && set.budget) std::cout << ", ";
    if (set.budget) std::cout << "budget " << millions(*set.budget) << "M";
    std::cout << '\n';
  }
  if (!fit_line.empty()) std::cout << "fit       " << fit_line << '\n';
  std::size_t fit = 0, simulated = 0, skipped = 0;
  for (std::size_t i = 0; i < evals.size(); ++i) {
    fit += evals[i].best ? 1 : 0;
    simulated += evals[i].summary.simulated;
    skipped += evals[i].skipped_by_bound;
  }
  std::cout << "layouts   " << evals.size() << " candidates, " << fit << " with a layout that fits; "
            << simulated << " layouts simulated, " << skipped << " skipped by the step-time bound\n";
  if (!time_line.empty()) std::cout << "time      " << time_line << '\n';
  std::cout << '\n';

  std::vector<std::size_t> order = rep.by_days;
  for (const plan::Row& r : rep.rows) {
    if (r.rank_days == 0) order.push_back(r.index);
  }
  std::cout << candidate_table(sc, in, rep, order) << '\n';
  // What the bands are: one line per distinct band, naming its candidates.
  std::vector<std::pair<std::string, std::vector<std::string>>> bands;  // (what, candidate names)
  for (const std::size_t i : order) {
    if (!rep.rows[i].fits) continue;
    const std::string what = band_basis_text(in.candidates[i].band);
    const std::string& name = in.candidates[i].name;
    auto it = std::find_if(bands.begin(), bands.end(), [&](const auto& b) { return b.first == what; });
    if (it == bands.end()) {
      bands.push_back({what, {name}});
    } else if (std::find(it->second.begin(), it->second.end(), name) == it->second.end()) {
      it->second.push_back(name);
    }
  }
  for (const auto& [what, names] : bands) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    std::cout << "band      " << list << ": " << what << '\n';
  }

  print_peak_and_energy_notes(sc, in, rep, order);
  auto describe = [&](std::size_t i) {
    const plan::Row& r = rep.rows[i];
    std::string s = candidate_label(in.candidates[i]) + ": " + num(r.days, 1) + " days";
    if (r.cost) s += ", cost " + millions(*r.cost) + "M";
    if (r.energy_mwh) s += ", energy " + mwh(*r.energy_mwh) + " MWh";
    return s;
  };
  std::cout << "front     * " << (rep.priced ? "Pareto front of (days, cost): " : "fastest (no prices given): ")
            << rep.pareto.size() << " candidate" << (rep.pareto.size() == 1 ? "" : "s") << '\n';
  if (!rep.by_days.empty()) std::cout << "fastest   " << describe(rep.by_days.front()) << '\n';
  if (!rep.by_cost.empty()) std::cout << "cheapest  " << describe(rep.by_cost.front()) << '\n';
  if (set.deadline_days || set.budget) {
    std::string what = set.deadline_days && set.budget ? "the deadline and the budget"
                       : set.deadline_days            ? "the deadline"
                                                      : "the budget";
    // Verdicts read the band: "meets" at its slow end, "at risk" inside it; a candidate without
    // a band (a fitted file without one) is judged at its prediction (plan::Verdict).
    const bool banded = std::all_of(rep.by_days.begin(), rep.by_days.end(),
                                    [&](std::size_t i) { return rep.rows[i].days_band.has_value(); });
    const std::string where = banded ? " at the band's slow end" : " at the band's slow end (the prediction where there is none)";
    if (rep.meeting.empty()) {
      std::cout << "verdict   no candidate meets " << what << where << '\n';
    } else {
      std::cout << "verdict   " << rep.meeting.size() << " candidate" << (rep.meeting.size() == 1 ? " meets " : "s meet ")
                << what << " even" << where << "; "
                << (rep.priced ? "cheapest " : "fastest ") << describe(rep.meeting.front()) << '\n';
    }
    if (!rep.at_risk.empty()) {
      std::cout << "at risk   " << rep.at_risk.size() << " candidate" << (rep.at_risk.size() == 1 ? " keeps " : "s keep ")
                << what << " only inside the band; "
                << (rep.priced ? "cheapest " : "fastest ") << describe(rep.at_risk.front()) << '\n';
    }
  }
  for (const plan::Row& r : rep.rows) {
    if (r.fits && !r.finishes) {
      std::cout << "note      " << candidate_label(in.candidates[r.index])
                << " never finishes: failures come faster than it recovers\n";
    }
  }
}

/// Applies the factors of a fitted file to the candidates on the cluster it was fitted on
/// (all candidates when it names none); says which.
std::string apply_fit(const std::string& path, scenarios::PlanScenario& sc) {
  const fit::FitSummary f = scenarios::read_fitted(path);
  std::size_t n = 0;
  for (plan::Candidate& c : sc.candidates) {
    if (f.cluster.empty() || f.cluster == c.cluster.name) {
      c.factors = f.factors;
      c.band = costmodel::fitted_band(f.band, path, sc.training.framework);
      ++n;
    }
  }
  if (n > 0) {
    return path + " on " + std::to_string(n) + " candidate" + (n == 1 ? "" : "s") +
           (f.cluster.empty() ? "" : " (cluster " + f.cluster + ")");
  }
  throw UserError(SourceLocation{path}, "", "factors fitted on cluster \"" + f.cluster +
                                                "\", which no candidate of the plan uses");
}

/// "planning 3/25 candidates" on stderr, overwriting the line.
void draw_progress(std::size_t done, std::size_t total) {
  std::fprintf(stderr, "\r\033[Kplanning %zu/%zu candidates", done, total);
  std::fflush(stderr);
}

int run_plan(const PlanArgs& args) {
  check_threads(args.threads);
  const auto start = std::chrono::steady_clock::now();
  std::optional<std::pair<int, int>> shard;
  if (!args.shard.empty()) shard = parse_shard(args.shard);  // checked by the option's validator
  scenarios::PlanScenario sc = scenarios::load_plan_scenario(args.scenario);
  for (plan::Candidate& c : sc.candidates) c.band = band_for(sc.training.framework, nullptr, "");
  const std::string fit_line = args.fit.empty() ? "" : apply_fit(args.fit, sc);

  plan::PlanInput in;
  in.model = &sc.model;
  in.training = &sc.training;
  in.space = &sc.search;
  in.base = sc.base;
  in.settings = sc.settings;
  in.candidates = sc.candidates;
  const std::string fingerprint = (shard || !args.merge.empty()) ? plan_fingerprint(sc, args.fit) : "";
  search::SearchOptions options;
  options.threads = args.threads;
  const bool tty = isatty(STDERR_FILENO) != 0;
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };

  if (tty) options.progress = draw_progress;
  auto evaluate = [&](const std::vector<std::size_t>& indices) {
    std::vector<plan::Evaluation> out = plan::evaluate_all(in, indices, options);
    if (tty) std::fputs("\r\033[K", stderr);
    return out;
  };

  if (shard) {
    const std::vector<std::size_t> indices = plan::shard_indices(in.candidates.size(), shard->first, shard->second);
    const std::vector<plan::Evaluation> evals = evaluate(indices);
    const nlohmann::json j = shard_json(sc, fingerprint, shard->first, shard->second, indices, evals,
                                        round_to(elapsed(), 3));
    if (args.out.empty()) {
      print_json(j);
    } else {
      write_file_atomic(args.out, j.dump(2) + "\n");
    }
    return 0;
  }

  std::vector<plan::Evaluation> evals;
  std::string time_line;
  if (!args.merge.empty()) {
    MergedShards merged = merge_shards(sc, fingerprint, args.merge);
    evals = std::move(merged.evals);
    time_line = fixed(merged.seconds, 2) + " s in " + std::to_string(merged.shards) + " shard" +
                (merged.shards == 1 ? "" : "s") + " (added up)";
  } else {
    std::vector<std::size_t> all(in.candidates.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
    evals = evaluate(all);
  }
  const plan::Report rep = plan::assemble(in, evals);
  // No candidate at all fits: nothing to compare, so no table, and the exit code says why.
  if (std::none_of(rep.rows.begin(), rep.rows.end(), [](const plan::Row& r) { return r.fits; })) {
    std::cerr << "tetrasim: " << sc.path
              << ": [plan]: no candidate has a layout that fits the memory budget ([search].memory_fraction "
              << fixed(sc.search.memory_fraction, 2) << " of the GPU memory)\n";
    return kExitNothingFits;
  }
  std::vector<OutputFile> outputs;  // written together, or none of them
  if (!args.csv.empty()) outputs.push_back({args.csv, plan_csv(in, rep)});
  nlohmann::json j = plan_json(sc, in, evals, rep);
  j["fit"] = args.fit.empty() ? nlohmann::json(nullptr) : nlohmann::json(args.fit);
  if (!args.html.empty()) {
    std::vector<std::string> layouts(in.candidates.size());
    for (const plan::Row& r : rep.rows) {
      if (r.fits) layouts[r.index] = scenarios::compact_layout(r.best.layout, r.best.fp8, r.best.compile);
    }
    outputs.push_back({args.html, report::plan_html(plan_page(j, layouts))});
  }
  write_outputs(outputs);
  if (!args.export_to.empty()) {
    // The fastest candidate's layout (the first row of the table).
    std::size_t i = 0;
    if (!rep.by_days.empty()) {
      i = rep.by_days.front();
    } else {
      while (!rep.rows[i].fits) ++i;  // one fits (checked above)
    }
    const plan::Row& best = rep.rows[i];
    std::cout << "# " << in.candidates[best.index].name << ", " << in.candidates[best.index].cluster.total_gpus()
              << " GPUs: the fastest candidate of " << sc.path << '\n'
              << export_ranked(args.export_to, sc.model, sc.training, in.candidates[best.index].cluster, best.best);
    return 0;
  }
  if (args.json) {
    print_json(j);
    return 0;
  }
  if (args.merge.empty()) time_line = fixed(elapsed(), 2) + " s";
  print_text(sc, in, evals, rep, time_line, fit_line);
  return 0;
}

}  // namespace

void register_plan(CLI::App& app, Action& action) {
  auto args = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand(
      "plan", "the best layout, days, GPU-hours and cost of every candidate cluster and GPU count; "
              "ranking, Pareto front, deadline and budget");
  cmd->add_option("scenario", args->scenario, "scenario TOML file with a [plan] table")->required();
  auto* json = cmd->add_flag("--json", args->json, "machine-readable output on stdout");
  auto* csv = cmd->add_option("--csv", args->csv, "also write one row per candidate to this CSV file");
  auto* html = cmd->add_option("--html", args->html,
                               "also write a self-contained HTML page (days against cost with the Pareto front, "
                               "scaling curves, the candidates) to FILE");
  cmd->add_option("--threads", args->threads, "worker threads (default: all cores)")
      ->check(CLI::Range(0, 1000000000));
  cmd->add_option("--fit", args->fit,
                  "apply the cluster factors of this fitted file (tetrasim fit -o) to the candidates on its cluster");
  auto* shard = cmd->add_option("--shard", args->shard,
                                "compute only share I of N of the candidates (1 <= I <= N) and write it as JSON")
                    ->check(CLI::Validator(
                        [](std::string& text) {
                          return parse_shard(text) ? std::string() : "expected I/N with 1 <= I <= N (e.g. 2/8)";
                        },
                        "I/N"));
  auto* out = cmd->add_option("--out", args->out, "with --shard: write the share to this file instead of stdout");
  auto* merge = cmd->add_option("--merge", args->merge,
                                "combine the shares written by --shard 1/N .. N/N into the whole plan")
                    ->expected(1, -1);
  auto* exported = add_export_option(cmd, args->export_to);
  exported->excludes(json);
  shard->excludes(json)->excludes(csv)->excludes(html)->excludes(merge)->excludes(exported);
  out->needs(shard);
  cmd->callback([&action, args] { action = [args] { return run_plan(*args); }; });
}

}  // namespace tetra::cli
