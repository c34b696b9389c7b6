#pragma once
/// The keys of a scenario file, each described once: its table, type, unit, default, bounds,
/// meaning and source. The loader accepts exactly these names and `docs/scenario-format.md` is
/// written from them (`tetrasim keys --markdown`).

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tetra::scenarios {

struct KeyInfo {
  std::string_view table;          ///< "training", "cluster.gpu", "plan.candidate", ...
  std::string_view name;
  std::string_view type;           ///< integer, number, boolean, string, name, quantity, list, table
  std::string_view default_value;  ///< as the loader applies it when the key is absent
  std::string_view bounds;         ///< accepted values or range
  std::string_view meaning;
  std::string_view source;         ///< the framework setting or publication it mirrors, if any
};

/// Every key, grouped by table in file order.
[[nodiscard]] std::span<const KeyInfo> scenario_keys() noexcept;

/// The key names of one table, in the order the table lists them.
[[nodiscard]] std::vector<std::string_view> key_names(std::string_view table);

/// The tables, in the order a scenario file usually writes them.
[[nodiscard]] std::vector<std::string_view> key_tables();

/// The key reference as Markdown: one section per table, one row per key.
[[nodiscard]] std::string keys_markdown();

}  // namespace tetra::scenarios
