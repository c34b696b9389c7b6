// The [plan] table of a plan scenario.

#include "loader.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <stdexcept>
#include <cmath>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "section.hpp"
#include "tetra/costmodel/collective.hpp"
#include "tetra/hw/presets.hpp"
#include "tetra/base/units.hpp"
#include "tetra/model/presets.hpp"
#include "tetra/scenarios/keys.hpp"

namespace tetra::scenarios::detail {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// [plan]

namespace {

/// A positive (or, with allow_zero, non-negative) finite number.
double positive_number(const Section& s, const toml::node& node, std::string_view k, bool allow_zero) {
  const double x = s.number(node, k, -std::numeric_limits<double>::max(), std::numeric_limits<double>::max());
  if (x < 0 || (x == 0 && !allow_zero)) {
    std::ostringstream os;
    os << (allow_zero ? "must not be negative" : "must be greater than zero") << ", got " << x;
    s.fail_at(node, k, os.str());
  }
  return x;
}

constexpr long long kMaxGpuCounts = 4096;  // values of one `gpus` range

/// "A..B" (A, 2A, 4A, ... up to B) or "A..B step S" (A, A+S, ... up to B).
std::vector<long long> gpu_range(const Section& s, const toml::node& node, std::string_view k,
                                 const std::string& text) {
  const auto bad = [&](const std::string& why) -> void {
    s.fail_at(node, k, "\"" + text + "\": " + why +
                           " (expected \"A..B\", doubling from A up to B, or \"A..B step S\")");
  };
  auto integer = [&](std::string_view part) {
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    long long v = 0;
    const auto r = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || r.ec != std::errc{} || r.ptr != part.data() + part.size()) {
      bad("\"" + std::string(part) + "\" is not a whole number");
    }
    if (v < 1 || v > kMaxNodes * kMaxGpusPerNode) bad("GPU counts must be between 1 and " +
                                                      std::to_string(kMaxNodes * kMaxGpusPerNode));
    return v;
  };
  const std::size_t dots = text.find("..");
  if (dots == std::string::npos) bad("no \"..\"");
  std::string_view rest = std::string_view(text).substr(dots + 2);
  std::optional<long long> step;
  if (const std::size_t st = rest.find("step"); st != std::string_view::npos) {
    step = integer(rest.substr(st + 4));
    rest = rest.substr(0, st);
  }
  const long long lo = integer(std::string_view(text).substr(0, dots));
  const long long hi = integer(rest);
  if (lo > hi) bad("the first count is larger than the last");
  std::vector<long long> out;
  for (long long v = lo; v <= hi; v = step ? v + *step : v * 2) {
    out.push_back(v);
    if (static_cast<long long>(out.size()) > kMaxGpuCounts) bad("more than " + std::to_string(kMaxGpuCounts) + " GPU counts");
  }
  return out;
}

CandidateEntry load_candidate(const Doc& doc, const toml::table& table) {
  const Section s{doc, "plan.candidate", table};
  s.check_keys(key_names("plan.candidate"));
  CandidateEntry e;
  e.at = where(doc, table.source());
  const toml::node* preset = s.get("cluster");
  const toml::node* file = s.get("cluster_file");
  if (preset != nullptr && file != nullptr) s.fail_at(*file, "cluster_file", "give either cluster or cluster_file, not both");
  if (preset == nullptr && file == nullptr) {
    fail(doc, table.source(), s.key(""),
         "candidate without a cluster (give cluster = \"preset\" or cluster_file = \"file.toml\")");
  }
  if (preset != nullptr) {
    const std::string name = s.string(*preset, "cluster");
    const auto found = hw::find_cluster_preset(name);
    if (!found) {
      s.fail_at(*preset, "cluster",
                "unknown cluster preset \"" + name + "\" (built-ins: " + preset_names_clusters() +
                    "; a TOML file goes in cluster_file)");
    }
    e.cluster = *found;
    e.name = name;
    e.cluster_at = where(doc, preset->source());
    e.cluster_key = s.key("cluster");
  } else {
    const std::string rel = s.string(*file, "cluster_file");
    if (rel.empty()) s.fail_at(*file, "cluster_file", "empty path");
    const fs::path path = fs::path(rel).is_absolute() ? fs::path(rel) : doc.dir / rel;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      s.fail_at(*file, "cluster_file", "cannot read \"" + path.generic_string() + "\": no such file");
    }
    const std::string f = path.generic_string();
    const toml::table root = parse_toml_file(f);
    const Doc fdoc{f, path.parent_path(), 0, false, ""};
    for (auto&& [k, v] : root) {
      if (k.str() != "cluster") {
        fail(fdoc, k.source(), std::string(k.str()), "unknown table or key (a cluster file holds only [cluster])");
      }
      if (!v.is_table()) fail(fdoc, v.source(), "[cluster]", "expected a table");
    }
    const toml::node* c = root.get("cluster");
    if (c == nullptr) throw UserError(SourceLocation{f}, "[cluster]", "missing table");
    e.cluster = load_cluster(fdoc, *c->as_table());
    if (!e.cluster.profile_path.empty() && !fs::is_regular_file(e.cluster.profile_path, ec)) {
      const toml::node* pn = c->as_table()->get("profile");
      fail(fdoc, pn != nullptr ? pn->source() : c->source(), "[cluster].profile",
           "cannot read \"" + e.cluster.profile_path + "\": no such file");
    }
    e.cluster_file = f;
    e.name = rel;
    e.cluster_at = where(doc, file->source());
    e.cluster_key = s.key("cluster_file");
  }
  if (const auto* n = s.get("name")) {
    e.name = s.string(*n, "name");
    if (e.name.empty()) s.fail_at(*n, "name", "empty name");
  }
  const toml::node* gpus = s.get("gpus");
  if (gpus == nullptr) {
    fail(doc, table.source(), s.key("gpus"),
         "missing (give a GPU count, a list, or a range such as \"1024..16384\")");
  }
  e.gpus_key = s.key("gpus");
  const long long max_gpus = kMaxNodes * kMaxGpusPerNode;
  if (const auto* str = gpus->as_string()) {
    e.gpus = gpu_range(s, *gpus, "gpus", str->get());
    e.gpus_at.assign(e.gpus.size(), where(doc, gpus->source()));
  } else if (const auto* arr = gpus->as_array()) {
    if (arr->empty()) s.fail_at(*gpus, "gpus", "empty list");
    for (const auto& el : *arr) {
      const long long v = s.integer(el, "gpus", 1, max_gpus);
      if (std::find(e.gpus.begin(), e.gpus.end(), v) != e.gpus.end()) s.fail_at(el, "gpus", "value listed twice");
      e.gpus.push_back(v);
      e.gpus_at.push_back(where(doc, el.source()));
    }
  } else {
    e.gpus.push_back(s.integer(*gpus, "gpus", 1, max_gpus));
    e.gpus_at.push_back(where(doc, gpus->source()));
  }
  if (const auto* n = s.get("price_per_gpu_hour")) {
    e.price_per_gpu_hour = positive_number(s, *n, "price_per_gpu_hour", true);
  }
  return e;
}

}  // namespace

PlanTable load_plan(const Doc& doc, const toml::table& table) {
  const Section s{doc, "plan", table};
  s.check_keys(key_names("plan"));
  PlanTable out;
  out.at = where(doc, table.source());
  plan::PlanSettings& set = out.settings;
  if (const auto* n = s.get("tokens")) {
    set.tokens = positive_number(s, *n, "tokens", false);
  } else {
    fail(doc, table.source(), s.key("tokens"), "missing (the tokens to train, e.g. 15.6e12)");
  }
  if (const auto* n = s.get("deadline_days")) set.deadline_days = positive_number(s, *n, "deadline_days", false);
  if (const auto* n = s.get("budget")) {
    set.budget = positive_number(s, *n, "budget", false);
    out.budget_at = where(doc, n->source());
  }
  if (const auto* n = s.get("failures_per_gpu_hour")) {
    set.goodput.failures_per_gpu_hour = positive_number(s, *n, "failures_per_gpu_hour", true);
  }
  if (const auto* n = s.get("checkpoint_bandwidth")) {
    set.goodput.checkpoint_bandwidth_Bps =
        s.quantity(*n, "checkpoint_bandwidth", units::parse_bandwidth, "2TB/s", kMaxBandwidth);
  }
  if (const auto* n = s.get("restart_time")) {
    set.goodput.restart_s = s.quantity(*n, "restart_time", units::parse_duration, "10min", 1e9, true);
  }
  if (const auto* n = s.get("pue")) set.pue = s.number(*n, "pue", plan::kMinPue, plan::kMaxPue);
  const toml::node* cands = s.get("candidate");
  const toml::array* arr = cands != nullptr ? cands->as_array() : nullptr;
  if (cands != nullptr && (arr == nullptr || !arr->is_array_of_tables())) {
    s.fail_at(*cands, "candidate", "expected [[plan.candidate]] tables");
  }
  if (arr == nullptr || arr->empty()) {
    fail(doc, table.source(), s.key("candidate"),
         "no candidates (add [[plan.candidate]] tables with cluster and gpus)");
  }
  for (const auto& el : *arr) out.candidates.push_back(load_candidate(doc, *el.as_table()));
  return out;
}

}  // namespace tetra::scenarios::detail
