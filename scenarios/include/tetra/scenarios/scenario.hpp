#pragma once
/// Scenario files (docs/scenario-format.md): TOML -> validated, immutable value structs.
/// Every error is a tetra::UserError naming file:line:col and the key.

#include <optional>
#include <string>
#include <string_view>

#include "tetra/costmodel/profile.hpp"
#include "tetra/hw/cluster.hpp"
#include "tetra/parallel/layout.hpp"
#include "tetra/model/model.hpp"
#include "tetra/search/space.hpp"

namespace tetra::scenarios {

/// One scenario file, resolved: presets expanded, overrides applied, units converted, the
/// layout validated against the model and the cluster.
struct Scenario {
  std::string path;                 ///< the file as given (errors and reports name it)
  model::Model model;               ///< [model]
  hw::Cluster cluster;              ///< [cluster] with its gpu / intra_node / inter_node tables
  parallel::Training training;         ///< [training]
  parallel::Layout layout;             ///< validated; dp derived when omitted
  bool has_layout = false;          ///< the file (or --layout) gave a [layout]
  search::SearchSpace search;       ///< defaults when the file has no [search]
  bool has_search = false;          ///< the file has a [search] table
  std::optional<costmodel::Profile> profile;  ///< loaded from [cluster].profile when given
};

/// Reads and validates a scenario. A missing [model], [cluster] or [training] table, an
/// unknown table or key, a value of the wrong type or unit, and a layout that breaks a rule of
/// parallel::check_layout are UserErrors at the offending key's file:line:col.
/// `layout_override` is the --layout string ("tp=2,pp=4,schedule=interleaved"); its values
/// replace the file's [layout] keys and its errors name "--layout". dp is derived as
/// GPUs / (tp*cp*pp) unless given. With `require_layout` false (search), a missing or invalid
/// [layout] is not an error: has_layout is then false.
[[nodiscard]] Scenario load_scenario(const std::string& path, std::string_view layout_override = {},
                                     bool require_layout = true);

/// Same, from TOML text already read; `origin` names the text in errors and is the base for
/// relative paths (hf_config, profile).
[[nodiscard]] Scenario load_scenario_text(std::string_view toml_text, const std::string& origin,
                                          std::string_view layout_override = {},
                                          bool require_layout = true);

/// Applies "key=value,key=value" layout overrides to a layout (no validation).
/// Throws UserError naming `origin` (e.g. "--layout") and the key.
void apply_layout_string(parallel::Layout& layout, std::string_view text, const std::string& origin);

/// The layout in --layout syntax, every key spelled out
/// ("tp=8,cp=1,pp=4,dp=2,vp=1,mbs=1,sp=true,recompute=none,schedule=1f1b,rank_order=tp-cp-dp-pp";
/// first_stage_layers/last_stage_layers only when set). apply_layout_string reads it back.
[[nodiscard]] std::string format_layout(const parallel::Layout& layout);

}  // namespace tetra::scenarios
