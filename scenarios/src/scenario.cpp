#include "tetra/base/text_file.hpp"
#include "tetra/scenarios/scenario.hpp"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "loader.hpp"
#include "tetra/base/error.hpp"
#include "tetra/calib/bounded_fit.hpp"
#include "tetra/calib/curve_fit.hpp"
#include "tetra/parallel/validate.hpp"
#include "tetra/scenarios/compact_layout.hpp"
#include "tetra/scenarios/profile_io.hpp"

namespace tetra::scenarios {

namespace fs = std::filesystem;
using detail::Doc;
using detail::KeyOrigins;

namespace {

void check_top_level(const Doc& doc, const toml::table& root) {
  static const std::vector<std::string_view> known{"model", "cluster", "training", "layout", "search", "plan"};
  const toml::key* first = nullptr;
  for (auto&& [k, v] : root) {
    (void)v;
    if (std::find(known.begin(), known.end(), k.str()) != known.end()) continue;
    if (first == nullptr || k.source().begin.line < first->source().begin.line) first = &k;
  }
  if (first != nullptr) {
    detail::fail(doc, first->source(), std::string(first->str()),
                 "unknown table or key (a scenario has [model], [cluster], [training], [layout], "
                 "[search] and [plan])");
  }
}

/// Turns a broken layout rule into an error at the position of the key it blames.
[[noreturn]] void fail_issue(const Doc& doc, const toml::table* layout_table,
                             const toml::table* training_table, const KeyOrigins& origins,
                             const parallel::LayoutIssue& issue) {
  if (auto it = origins.find(issue.key); it != origins.end()) {
    throw UserError(it->second.where, it->second.name, issue.message);
  }
  if (issue.key.empty()) {
    // dp could not be derived: blame a factor given on the command line, if any.
    for (const char* k : {"tp", "cp", "pp"}) {
      auto it = origins.find(k);
      if (it != origins.end() && it->second.where.file == "--layout") {
        throw UserError(it->second.where, it->second.name, issue.message);
      }
    }
  }
  const bool training_key = std::find(detail::training_keys().begin(), detail::training_keys().end(),
                                       issue.key) != detail::training_keys().end();
  const toml::table* table = training_key && training_table != nullptr ? training_table : layout_table;
  const std::string section = training_key ? "training" : "layout";
  const SourceLocation loc = table != nullptr ? detail::where(doc, table->source())
                                              : SourceLocation{doc.file};
  throw UserError(loc, detail::key_name(doc, section, issue.key), issue.message);
}

/// The calibration profile named by [cluster].profile (a path relative to the scenario).
/// A missing file is reported at the key; errors inside the profile name the profile file.
costmodel::Profile load_profile(const Doc& doc, const toml::table& cluster,
                                const std::string& path, int cluster_sms) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    const toml::node* n = cluster.get("profile");
    detail::fail(doc, n != nullptr ? n->source() : cluster.source(), "[cluster].profile",
                 "cannot read \"" + path + "\": no such file");
  }
  return detail::load_profile_file(path, cluster_sms);
}

}  // namespace

std::optional<std::string> detail::profile_gpu_mismatch(const costmodel::Profile& profile, const hw::Cluster& c) {
  if (c.profile_any_gpu || profile.meta.gpu.empty()) return std::nullopt;
  const auto measured = calib::find_device(profile.meta.gpu);
  const auto target = calib::find_device(c.gpu.name, c.gpu.memory_bytes);
  if (!measured || !target || calib::same_device(measured->key, target->key)) return std::nullopt;
  return "measured on " + profile.meta.gpu + ", but the cluster's GPU is " + c.gpu.name +
         " (set profile_any_gpu = true in [cluster] to apply it anyway)";
}

costmodel::Profile detail::load_profile_file(const std::string& path, int cluster_sms) {
  costmodel::Profile profile = read_profile(path);
  // A profile without a [fit] table is fitted on load (docs/calibration.md).
  if (!profile.fit.valid) {
    calib::ProfileFitOptions options;
    options.sms = profile.meta.sms > 0 ? profile.meta.sms : cluster_sms;
    profile.fit = calib::fit_profile(profile, options);
  }
  return profile;
}

void apply_layout_string(parallel::Layout& layout, std::string_view text, const std::string& origin) {
  const Doc doc{origin, fs::current_path(), 0, true, ""};
  const toml::table table = detail::parse_key_values(text, ',', doc);
  KeyOrigins origins;
  detail::apply_layout(doc, table, layout, origins);
}

std::string format_layout(const parallel::Layout& l) {
  std::ostringstream os;
  os << "tp=" << l.tp << ",cp=" << l.cp << ",pp=" << l.pp << ",dp=" << l.dp << ",vp=" << l.vp
     << ",mbs=" << l.mbs << ",sp=" << (l.sp ? "true" : "false")
     << ",recompute=" << to_string(l.recompute);
  if (l.recompute == parallel::Recompute::selective_layer) os << ",ac_freq=" << l.ac_freq;
  if (l.offload_layers > 0) os << ",offload_layers=" << l.offload_layers;
  if (!l.recompute_modules.empty()) {
    os << ",recompute_modules=" << parallel::format_recompute_modules(l.recompute_modules);
  }
  if (l.dp_replicate > 1) os << ",dp_replicate=" << l.dp_replicate;
  os << ",schedule=" << to_string(l.schedule) << ",rank_order=" << l.rank_order;
  if (l.first_stage_layers > 0) os << ",first_stage_layers=" << l.first_stage_layers;
  if (l.last_stage_layers > 0) os << ",last_stage_layers=" << l.last_stage_layers;
  if (l.ep > 1) os << ",ep=" << l.ep;
  if (l.etp > 1) os << ",etp=" << l.etp;
  if (l.moe_dispatcher != parallel::MoeDispatcher::alltoall) {
    os << ",moe_token_dispatcher=" << to_string(l.moe_dispatcher);
  }
  if (l.moe_flex_backend != parallel::FlexBackend::deepep) {
    os << ",moe_flex_backend=" << to_string(l.moe_flex_backend);
  }
  if (l.cp_comm != parallel::CpComm::p2p) os << ",cp_comm_type=" << to_string(l.cp_comm);
  if (l.cp_a2a > 1) os << ",cp_a2a=" << l.cp_a2a;
  return os.str();
}

Scenario load_scenario_text(std::string_view toml_text, const std::string& origin,
                            std::string_view layout_override, bool require_layout) {
  const toml::table root = detail::parse_toml_text(toml_text, origin);
  const Doc doc{origin, fs::path(origin).parent_path(), 0, false, ""};
  check_top_level(doc, root);

  Scenario sc;
  sc.path = origin;
  const toml::table* model = detail::table_or_fail(doc, root, "model");
  const toml::table* cluster = detail::table_or_fail(doc, root, "cluster");
  const toml::table* training = detail::table_or_fail(doc, root, "training");
  const toml::table* layout = detail::table_or_fail(doc, root, "layout");
  const toml::table* search = detail::table_or_fail(doc, root, "search");
  if (model == nullptr) {
    throw UserError(SourceLocation{origin}, "[model]",
                    "missing table (give preset = \"name\", hf_config = \"config.json\" or the shape)");
  }
  if (cluster == nullptr) {
    throw UserError(SourceLocation{origin}, "[cluster]",
                    "missing table (give preset = \"name\" and nodes, or the hardware)");
  }
  if (training == nullptr) {
    throw UserError(SourceLocation{origin}, "[training]",
                    "missing table (seq_len and global_batch are required)");
  }
  sc.model = detail::load_model(doc, *model);
  sc.cluster = detail::load_cluster(doc, *cluster);

  KeyOrigins origins;
  detail::apply_training(doc, *training, sc.training, origins);
  for (std::string_view k : {"seq_len", "global_batch"}) {
    if (origins.find(k) == origins.end()) {
      detail::fail(doc, training->source(), detail::key_name(doc, "training", k),
                   "missing (required)");
    }
  }
  if (search != nullptr) {
    sc.search = detail::load_search(doc, *search, sc.training, sc.cluster.gpu);
    sc.has_search = true;
  }

  if (layout != nullptr) detail::apply_layout(doc, *layout, sc.layout, origins);
  if (!layout_override.empty()) {
    // key=value pairs, or the compact form search and plan print (compact_layout.hpp).
    const Doc over{"--layout", fs::current_path(), 0, true, ""};
    const auto compact = expand_compact_layout(layout_override);
    const toml::table t = detail::parse_key_values(compact ? compact->layout : layout_override, ',', over);
    detail::apply_layout(over, t, sc.layout, origins);
    if (compact && !compact->training.empty()) {
      detail::apply_training(over, detail::parse_key_values(compact->training, ',', over), sc.training, origins);
    }
  }
  const bool given = layout != nullptr || !layout_override.empty();
  if (!given && require_layout) {
    throw UserError(SourceLocation{origin}, "[layout]",
                    "missing table (this command needs a layout: add [layout] or pass --layout)");
  }
  if (const auto bad = detail::check_precision(sc.cluster.gpu, sc.training, origins)) {
    fail_issue(doc, layout, training, origins, *bad);
  }
  const bool dp_given = origins.find("dp") != origins.end();
  const auto issue = detail::resolve_layout(sc.model, sc.cluster.total_gpus(), sc.cluster.nvlink_domain(),
                                            sc.training, sc.layout, dp_given);
  if (issue) {
    if (require_layout) fail_issue(doc, layout, training, origins, *issue);
    sc.has_layout = false;
  } else {
    sc.has_layout = given;
  }

  if (!sc.cluster.profile_path.empty()) {
    sc.profile = load_profile(doc, *cluster, sc.cluster.profile_path, sc.cluster.gpu.sms);
    if (const auto bad = detail::profile_gpu_mismatch(*sc.profile, sc.cluster)) {
      const toml::node* n = cluster->get("profile");
      detail::fail(doc, n != nullptr ? n->source() : cluster->source(), "[cluster].profile", *bad);
    }
  }
  return sc;
}

Scenario load_scenario(const std::string& path, std::string_view layout_override,
                       bool require_layout) {
  return load_scenario_text(read_input_file(path), path, layout_override, require_layout);
}

}  // namespace tetra::scenarios
