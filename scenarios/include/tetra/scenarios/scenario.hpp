#pragma once
/// Scenario files (SPEC section 2): TOML -> validated, immutable value structs.
/// Every error is a tetra::UserError naming file:line:col and the key.

#include <optional>
#include <string>
#include <string_view>

#include "tetra/costmodel/profile.hpp"
#include "tetra/hw/cluster.hpp"
#include "tetra/llama/layout.hpp"
#include "tetra/llama/model.hpp"
#include "tetra/search/space.hpp"

namespace tetra::scenarios {

struct Scenario {
  std::string path;
  llama::Model model;
  hw::Cluster cluster;
  llama::Training training;
  llama::Layout layout;             ///< validated; dp derived when omitted
  bool has_layout = false;          ///< the file (or --layout) gave a [layout]
  search::SearchSpace search;       ///< defaults when the file has no [search]
  bool has_search = false;
  std::optional<costmodel::Profile> profile;  ///< loaded from [cluster].profile when given
};

/// Reads and validates a scenario. `layout_override` is the --layout string
/// ("tp=2,pp=4,schedule=interleaved"); its values replace the file's [layout] keys and its
/// errors name "--layout". With `require_layout` false (search), a missing or invalid
/// [layout] is not an error.
[[nodiscard]] Scenario load_scenario(const std::string& path, std::string_view layout_override = {},
                                     bool require_layout = true);

/// Same, from TOML text already read; `origin` names the text in errors and is the base for
/// relative paths (hf_config, profile).
[[nodiscard]] Scenario load_scenario_text(std::string_view toml_text, const std::string& origin,
                                          std::string_view layout_override = {},
                                          bool require_layout = true);

/// Applies "key=value,key=value" layout overrides to a layout (no validation).
/// Throws UserError naming `origin` (e.g. "--layout") and the key.
void apply_layout_string(llama::Layout& layout, std::string_view text, const std::string& origin);

}  // namespace tetra::scenarios
