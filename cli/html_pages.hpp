#pragma once
// The --html pages of plan, search and simulate, filled from the very JSON objects that --json
// prints, so that the page and --json agree number for number.

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tetra/report/report.hpp"
#include "tetra/sim/simulator.hpp"

namespace tetra::cli {

/// The plan page of `plan_json`'s object `j`; `layouts[id]` is the best layout of candidate
/// `id` as text ("" when it has none).
[[nodiscard]] report::PlanPage plan_page(const nlohmann::json& j, const std::vector<std::string>& layouts);

/// The search page of the object `tetrasim search --json` prints, with every ranked layout in
/// `j["layouts"]`; `layouts[i]` is row i's layout as text; `table_rows` the top-N table's size.
[[nodiscard]] report::SearchPage search_page(const nlohmann::json& j, const std::vector<std::string>& layouts,
                                             std::size_t table_rows);

/// The simulate page of the object `tetrasim simulate --json` prints and the trace of the same
/// run (`simulator`'s last recorded run, read slice by slice): one timeline lane per trace
/// stream; `layout` is the compact layout shown under the title.
[[nodiscard]] report::SimulatePage simulate_page(const nlohmann::json& j, const sim::Simulator& simulator,
                                                 const std::string& layout);

}  // namespace tetra::cli
