#pragma once
// Private to the scenarios library: the TOML table loaders shared by scenario files,
// measurement files (model/cluster cells, options) and --layout overrides. Every error is a
// tetra::UserError whose location comes from the offending node's source position.

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tetra/hw/cluster.hpp"
#include "tetra/base/error.hpp"
#include "tetra/parallel/layout.hpp"
#include "tetra/model/model.hpp"
#include "tetra/parallel/validate.hpp"
#include "tetra/plan/plan.hpp"
#include "tetra/search/space.hpp"
#include "toml.hpp"

namespace tetra::scenarios::detail {

/// Where a table came from, for error messages and relative paths.
struct Doc {
  std::string file;             ///< shown in errors ("scenarios/x.toml", "--layout", "m.csv")
  std::filesystem::path dir;    ///< base folder of relative paths given in the document
  int fixed_line = 0;           ///< line used for nodes without a source position (0: none)
  bool bare_keys = false;       ///< name keys "tp" instead of "[layout].tp"
  std::string key_prefix;       ///< put in front of bare keys ("options." for CSV cells)
};

/// "[section].key" or, for bare documents, prefix + key.
[[nodiscard]] std::string key_name(const Doc& doc, std::string_view section, std::string_view key);

/// Source location of a node (or of the document when the node has none).
[[nodiscard]] SourceLocation where(const Doc& doc, const toml::source_region& region);

/// Throws a UserError at `region` for `key`.
[[noreturn]] void fail(const Doc& doc, const toml::source_region& region, const std::string& key,
                       const std::string& message);

/// The top-level table `name` of `root`, null when absent; a value that is not a table is a
/// UserError naming `[name]`.
[[nodiscard]] const toml::table* table_or_fail(const Doc& doc, const toml::table& root, std::string_view name);

/// The text of data/error_bands.toml at build time (error_bands_data.cpp.in, configured by CMake).
[[nodiscard]] std::string_view builtin_error_bands_text() noexcept;

/// Reads and parses a TOML file; a missing file or a syntax error is a UserError.
[[nodiscard]] toml::table parse_toml_file(const std::string& path);
/// Parses TOML text; `origin` names it in errors.
[[nodiscard]] toml::table parse_toml_text(std::string_view text, const std::string& origin);

/// Turns "k=v<sep>k=v" into a table of typed values (true/false -> boolean, integers,
/// finite decimals, anything else a string). Keys must be non-empty and appear once.
[[nodiscard]] toml::table parse_key_values(std::string_view text, char separator, const Doc& doc);

/// Where each [training]/[layout] key was set, for errors found later (check_layout).
struct KeyOrigin {
  SourceLocation where;
  std::string name;  ///< as shown in errors ("[layout].tp", "tp")
};
using KeyOrigins = std::map<std::string, KeyOrigin, std::less<>>;

/// The [model] table: preset / hf_config / explicit keys, validated shape.
[[nodiscard]] model::Model load_model(const Doc& doc, const toml::table& table);
/// The [cluster] table and its gpu / intra_node / inter_node sub-tables. `profile` is returned
/// resolved against doc.dir in Cluster::profile_path and not read here.
[[nodiscard]] hw::Cluster load_cluster(const Doc& doc, const toml::table& table);
/// [training] keys over `training`.
void apply_training(const Doc& doc, const toml::table& table, parallel::Training& training,
                    KeyOrigins& origins);
/// [layout] keys over `layout`; records which keys were set (so dp can be derived).
void apply_layout(const Doc& doc, const toml::table& table, parallel::Layout& layout,
                  KeyOrigins& origins);
/// Applies one key that may be a [training] or a [layout] key (CSV options).
void apply_option(const Doc& doc, const toml::table& table, parallel::Training& training,
                  parallel::Layout& layout, KeyOrigins& origins);
/// The [search] table.
/// The [search] table; `precision` entries resolve against the [training] FP8 recipe and are
/// checked against the GPU.
[[nodiscard]] search::SearchSpace load_search(const Doc& doc, const toml::table& table,
                                              const parallel::Training& training, const hw::Gpu& gpu);

/// One [[plan.candidate]] table, read but not yet sized to its GPU counts.
struct CandidateEntry {
  std::string name;                  ///< `name`, else the preset or the cluster file as written
  hw::Cluster cluster;               ///< the preset or the file's [cluster] (profile_path resolved)
  std::string cluster_file;          ///< the file read, empty for a preset
  std::vector<long long> gpus;       ///< GPU counts in the order given
  std::optional<double> price_per_gpu_hour;
  SourceLocation at;                 ///< the table
  SourceLocation cluster_at;         ///< the `cluster` / `cluster_file` key
  std::string cluster_key;           ///< "[plan.candidate].cluster" or "...cluster_file"
  std::vector<SourceLocation> gpus_at;  ///< per GPU count (the list element, or the key)
  std::string gpus_key;              ///< "[plan.candidate].gpus"
};

/// The [plan] table: settings and candidates (docs/scenario-format.md).
struct PlanTable {
  plan::PlanSettings settings;
  std::vector<CandidateEntry> candidates;
  SourceLocation at;                 ///< the [plan] table
  std::optional<SourceLocation> budget_at;
};

/// Reads [plan]: key types and ranges, the candidates' clusters (a preset, or a TOML file
/// holding only [cluster], relative to the scenario) and their GPU lists (an integer, a list,
/// or "A..B" doubling from A up to B, or "A..B step S"). A [plan] without candidates, a
/// negative or zero token count, a negative price, an unknown key: UserError at the key.
[[nodiscard]] PlanTable load_plan(const Doc& doc, const toml::table& table);

/// Reads a calibration profile and fits it when it has no [fit] table (docs/calibration.md);
/// `cluster_sms` when the profile does not say. Errors name the profile file.
[[nodiscard]] costmodel::Profile load_profile_file(const std::string& path, int cluster_sms);

/// Why `profile` must not be applied to cluster `c`: it was measured on another GPU model and
/// [cluster].profile_any_gpu is not set (names neither side knows are let through); nothing
/// when it may.
[[nodiscard]] std::optional<std::string> profile_gpu_mismatch(const costmodel::Profile& profile,
                                                              const hw::Cluster& c);

/// Checks rank_order: a permutation of tp, cp, dp, pp joined by '-'. Empty when fine,
/// otherwise what is wrong.
[[nodiscard]] std::string rank_order_problem(std::string_view order);

/// Derives dp from the world size when it was not given, then checks rank_order, every rule
/// of parallel::check_layout and the placement of TP / CP groups on NVLink domains of
/// `nvlink_domain` GPUs. An issue with an empty key blames the [layout] table as a whole.
[[nodiscard]] std::optional<parallel::LayoutIssue> resolve_layout(const model::Model& model,
                                                               long long world, int nvlink_domain,
                                                               const parallel::Training& training,
                                                               parallel::Layout& layout, bool dp_given);

/// An FP8 setting the cluster's GPU cannot run (a recipe without its tensor cores,
/// fp8_param_gather without FP8), blamed on the key that asked for it.
[[nodiscard]] std::optional<parallel::LayoutIssue> check_precision(const hw::Gpu& gpu,
                                                               const parallel::Training& training,
                                                               const KeyOrigins& origins);

/// Names of the [layout] keys, in the order docs/scenario-format.md lists them.
[[nodiscard]] const std::vector<std::string_view>& layout_keys();
/// Names of the [training] keys, in the order docs/scenario-format.md lists them.
[[nodiscard]] const std::vector<std::string_view>& training_keys();

}  // namespace tetra::scenarios::detail
