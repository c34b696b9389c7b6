// Plan scenarios: [plan] and its candidates over the tables `search` reads (plan.hpp).

#include "tetra/base/text_file.hpp"
#include "tetra/scenarios/plan.hpp"

#include <algorithm>
#include <filesystem>
#include <set>
#include <utility>

#include "loader.hpp"
#include "tetra/base/error.hpp"
#include "tetra/parallel/fp8.hpp"

namespace tetra::scenarios {

namespace fs = std::filesystem;
using detail::Doc;

namespace {

/// `c` sized to `gpus` GPUs, or why it cannot be.
std::string size_cluster(hw::Cluster& c, long long gpus) {
  const int gpn = std::max(1, c.gpus_per_node);
  if (gpus % gpn == 0) {
    c.nodes = static_cast<int>(gpus / gpn);
    if (c.nvlink_domain() > gpn) c.intra.domain_gpus = hw::job_domain(c, gpus);
  } else if (gpus < gpn) {
    c.gpus_per_node = static_cast<int>(gpus);
    c.nodes = 1;
    c.intra.domain_gpus = 0;
  } else {
    return std::to_string(gpus) + " GPUs are not whole nodes of " + std::to_string(gpn) + " GPUs (" +
           c.name + ")";
  }
  if (auto bad = hw::domain_problem(c)) return *bad;
  return {};
}

/// A GPU that can run every precision (for reading [search].precision before the candidates'
/// GPUs are known; each candidate's GPU is checked afterwards).
hw::Gpu any_gpu() {
  hw::Gpu g;
  g.name = "any";
  g.fp8_peak_flops = g.fp4_peak_flops = g.bf16_peak_flops = 1;
  g.compute_capability = 1000;
  return g;
}

}  // namespace

PlanScenario load_plan_scenario_text(std::string_view toml_text, const std::string& origin) {
  const toml::table root = detail::parse_toml_text(toml_text, origin);
  const Doc doc{origin, fs::path(origin).parent_path(), 0, false, ""};
  {
    static const std::vector<std::string_view> known{"model", "cluster", "training", "layout", "search", "plan"};
    for (auto&& [k, v] : root) {
      (void)v;
      if (std::find(known.begin(), known.end(), k.str()) == known.end()) {
        detail::fail(doc, k.source(), std::string(k.str()),
                     "unknown table or key (a plan scenario has [model], [training], [search], "
                     "[layout], [plan] and, unused by the plan, [cluster])");
      }
    }
  }
  const toml::table* model = detail::table_or_fail(doc, root, "model");
  const toml::table* training = detail::table_or_fail(doc, root, "training");
  const toml::table* layout = detail::table_or_fail(doc, root, "layout");
  const toml::table* search = detail::table_or_fail(doc, root, "search");
  const toml::table* plan = detail::table_or_fail(doc, root, "plan");
  (void)detail::table_or_fail(doc, root, "cluster");
  if (plan == nullptr) {
    throw UserError(SourceLocation{origin}, "[plan]",
                    "missing table (give tokens and [[plan.candidate]] tables with cluster and gpus)");
  }
  if (model == nullptr) {
    throw UserError(SourceLocation{origin}, "[model]",
                    "missing table (give preset = \"name\", hf_config = \"config.json\" or the shape)");
  }
  if (training == nullptr) {
    throw UserError(SourceLocation{origin}, "[training]",
                    "missing table (seq_len and global_batch are required)");
  }

  PlanScenario sc;
  sc.path = origin;
  sc.model = detail::load_model(doc, *model);
  if (const auto* hf = model->get("hf_config"); hf != nullptr && hf->is_string()) {
    const fs::path rel(hf->as_string()->get());
    sc.input_files.push_back((rel.is_absolute() ? rel : doc.dir / rel).generic_string());
  }
  detail::KeyOrigins origins;
  detail::apply_training(doc, *training, sc.training, origins);
  for (std::string_view k : {"seq_len", "global_batch"}) {
    if (origins.find(k) == origins.end()) {
      detail::fail(doc, training->source(), detail::key_name(doc, "training", k), "missing (required)");
    }
  }
  if (search != nullptr) sc.search = detail::load_search(doc, *search, sc.training, any_gpu());
  if (layout != nullptr) detail::apply_layout(doc, *layout, sc.base, origins);

  detail::PlanTable table = detail::load_plan(doc, *plan);
  sc.settings = table.settings;

  // Prices on every candidate or on none; a budget needs them.
  const auto priced = std::count_if(table.candidates.begin(), table.candidates.end(),
                                    [](const auto& e) { return e.price_per_gpu_hour.has_value(); });
  if (priced > 0 && priced < static_cast<long>(table.candidates.size())) {
    const auto it = std::find_if(table.candidates.begin(), table.candidates.end(),
                                 [](const auto& e) { return !e.price_per_gpu_hour.has_value(); });
    throw UserError(it->at, "[plan.candidate].price_per_gpu_hour",
                    "missing for \"" + it->name + "\" (give a price to every candidate or to none)");
  }
  if (table.settings.budget && priced == 0) {
    throw UserError(*table.budget_at, "[plan].budget",
                    "needs price_per_gpu_hour on the candidates (no price is built in)");
  }

  std::set<std::pair<std::string, long long>> seen;
  for (const detail::CandidateEntry& e : table.candidates) {
    // The precisions asked for must run on this candidate's GPU.
    if (const auto bad = detail::check_precision(e.cluster.gpu, sc.training, origins)) {
      throw UserError(e.cluster_at, e.cluster_key, e.name + ": " + bad->message + " (asked by [training])");
    }
    for (const parallel::Fp8Recipe r : sc.search.precision) {
      if (std::string why = parallel::recipe_problem(r, e.cluster.gpu); !why.empty()) {
        throw UserError(e.cluster_at, e.cluster_key, e.name + ": " + why + " (asked by [search].precision)");
      }
    }
    if (!e.cluster_file.empty()) sc.input_files.push_back(e.cluster_file);
    std::optional<costmodel::Profile> profile;
    if (!e.cluster.profile_path.empty()) {
      profile = detail::load_profile_file(e.cluster.profile_path, e.cluster.gpu.sms);
      if (const auto bad = detail::profile_gpu_mismatch(*profile, e.cluster)) {
        throw UserError(e.cluster_at, e.cluster_key, e.name + ": profile " + *bad);
      }
      sc.input_files.push_back(e.cluster.profile_path);
    }
    for (std::size_t k = 0; k < e.gpus.size(); ++k) {
      if (!seen.emplace(e.name, e.gpus[k]).second) {
        throw UserError(e.gpus_at[k], e.gpus_key,
                        "\"" + e.name + "\" at " + std::to_string(e.gpus[k]) +
                            " GPUs is listed twice (give the candidates different names)");
      }
      plan::Candidate c;
      c.name = e.name;
      c.cluster = e.cluster;
      if (std::string why = size_cluster(c.cluster, e.gpus[k]); !why.empty()) {
        throw UserError(e.gpus_at[k], e.gpus_key, why);
      }
      c.profile = profile;
      c.price_per_gpu_hour = e.price_per_gpu_hour;
      sc.candidates.push_back(std::move(c));
    }
  }
  return sc;
}

PlanScenario load_plan_scenario(const std::string& path) {
  return load_plan_scenario_text(read_input_file(path), path);
}

}  // namespace tetra::scenarios
