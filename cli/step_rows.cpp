#include "step_rows.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "output.hpp"
#include "tetra/base/error.hpp"

namespace tetra::cli {

namespace {

std::string rho(const std::optional<double>& r) { return r ? fixed(*r, 3) : std::string("-"); }

nlohmann::json summary_json(const ErrorSummary& e, const std::optional<double>& r) {
  return {{"mape", round_to(e.mean, 6)},
          {"median_ape", round_to(e.median, 6)},
          {"max_ape", round_to(e.max, 6)},
          {"spearman", r ? nlohmann::json(round_to(*r, 6)) : nlohmann::json(nullptr)}};
}

}  // namespace

std::string cluster_cell(const scenarios::MeasurementRow& r) {
  const auto it = r.columns.find("cluster");
  return it != r.columns.end() ? it->second : std::string();
}

StepRows step_rows(const std::vector<scenarios::MeasurementRow>& rows, const std::string& cluster,
                   int threads) {
  StepRows out;
  std::vector<fit::StepCase> candidates;
  std::vector<const scenarios::MeasurementRow*> sources;
  std::set<std::string> clusters;
  for (const auto& r : rows) {
    if (!cluster.empty() && cluster_cell(r) != cluster) {
      out.skipped.emplace_back(r.id, "cluster is not " + cluster);
      continue;
    }
    if (!r.skip_reason.empty()) {
      out.skipped.emplace_back(r.id, r.skip_reason);
      continue;
    }
    fit::StepCase c = scenarios::step_case(r);
    if (c.measured_s <= 0) {
      out.skipped.emplace_back(r.id, std::string("no step time (metric ") + scenarios::to_string(r.metric) + ")");
      continue;
    }
    candidates.push_back(std::move(c));
    sources.push_back(&r);
    clusters.insert(cluster_cell(r));
  }
  if (clusters.size() > 1) {
    std::string list;
    for (const auto& c : clusters) list += (list.empty() ? "" : ", ") + c;
    throw UserError("the step-time rows come from " + std::to_string(clusters.size()) + " clusters (" + list +
                    "); choose one with --cluster");
  }
  out.cluster = clusters.empty() ? cluster : *clusters.begin();
  const std::vector<fit::StepPrediction> zero = fit::predict_steps(candidates, costmodel::Factors{}, threads);
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (!zero[i].failure.empty()) {
      out.skipped.emplace_back(candidates[i].id, zero[i].failure);
      continue;
    }
    out.cases.push_back(std::move(candidates[i]));
    out.rows.push_back(sources[i]);
    out.zero_shot_s.push_back(zero[i].seconds);
  }
  return out;
}

std::vector<costmodel::Factor> parse_factor_list(const std::string& list) {
  std::vector<costmodel::Factor> out;
  std::stringstream ss(list);
  std::string name;
  while (std::getline(ss, name, ',')) {
    const auto f = costmodel::parse_factor(name);
    if (!f) {
      std::string known;
      for (costmodel::Factor x : costmodel::kFactors) known += (known.empty() ? "" : ", ") + std::string(costmodel::to_string(x));
      throw UserError(SourceLocation{"--factors"}, name, "unknown factor (expected one of: " + known + ")");
    }
    if (std::find(out.begin(), out.end(), *f) == out.end()) out.push_back(*f);
  }
  if (out.empty()) throw UserError(SourceLocation{"--factors"}, "", "names no factor");
  return out;
}

Comparison compare(const std::vector<std::string>& group, const std::vector<double>& measured,
                   const std::vector<double>& before, const std::vector<double>& after) {
  Comparison c;
  std::map<std::string, std::vector<std::size_t>> members;
  for (std::size_t i = 0; i < group.size(); ++i) members[group[i]].push_back(i);
  auto line = [&](const std::string& name, const std::vector<std::size_t>& idx) {
    ComparisonLine l;
    l.group = name;
    std::vector<double> m, b, a, eb, ea;
    for (std::size_t i : idx) {
      m.push_back(measured[i]);
      b.push_back(before[i]);
      a.push_back(after[i]);
      eb.push_back(ape(measured[i], before[i]));
      ea.push_back(ape(measured[i], after[i]));
    }
    l.before = summarize(eb);
    l.after = summarize(ea);
    if (idx.size() >= 3) {
      l.before_rho = spearman(m, b);
      l.after_rho = spearman(m, a);
    }
    return l;
  };
  for (const auto& [name, idx] : members) c.groups.push_back(line(name, idx));
  std::vector<std::size_t> all(group.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  c.all = line("all", all);
  c.all.before_rho = grouped_spearman(group, measured, before);
  c.all.after_rho = grouped_spearman(group, measured, after);
  return c;
}

std::string comparison_table(const Comparison& c, const std::string& before, const std::string& after) {
  std::vector<std::vector<std::string>> rows;
  auto add = [&](const ComparisonLine& l) {
    rows.push_back({l.group, std::to_string(l.after.n), percent(l.before.mean), percent(l.after.mean),
                    percent(l.after.median), percent(l.after.max), rho(l.before_rho), rho(l.after_rho)});
  };
  for (const auto& l : c.groups) add(l);
  add(c.all);
  return format_table({"sweep", "n", "MAPE " + before, "MAPE " + after, "median APE", "max APE",
                       "Spearman " + before, "Spearman " + after},
                      rows);
}

nlohmann::json comparison_json(const Comparison& c, const std::string& before, const std::string& after) {
  auto line = [&](const ComparisonLine& l) {
    return nlohmann::json{{"group", l.group},
                          {"n", l.after.n},
                          {before, summary_json(l.before, l.before_rho)},
                          {after, summary_json(l.after, l.after_rho)}};
  };
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& l : c.groups) groups.push_back(line(l));
  return {{"groups", std::move(groups)}, {"all", line(c.all)}};
}

nlohmann::json factors_json(const fit::FitSummary& f) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& ff : f.per_factor) {
    j[costmodel::to_string(ff.factor)] = {
        {"value", round_to(ff.value, 6)},
        {"lower", round_to(ff.lower, 6)},
        {"upper", round_to(ff.upper, 6)},
        {"std_error", ff.std_error >= 0 ? nlohmann::json(round_to(ff.std_error, 6)) : nlohmann::json(nullptr)},
        {"share", round_to(ff.share, 6)},
        {"status", fit::to_string(ff.status)}};
  }
  return j;
}

std::string factors_table(const fit::FitSummary& f) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& ff : f.per_factor) {
    const bool seconds = ff.factor == costmodel::Factor::step_overhead;
    auto val = [&](double v) { return seconds ? fixed(v, 3) + " s" : fixed(v, 3); };
    rows.push_back({costmodel::to_string(ff.factor), val(ff.value), val(ff.lower) + " .. " + val(ff.upper),
                    ff.std_error >= 0 ? val(ff.std_error) : std::string("-"),
                    percent(ff.share), fit::to_string(ff.status)});
  }
  return format_table({"factor", "value", "bound", "std error", "share of step", "status"}, rows);
}

}  // namespace tetra::cli
