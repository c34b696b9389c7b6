#pragma once
/// Measurement files (SPEC section 4): one measured value per CSV row, each resolved into the
/// model, cluster, training and layout it was measured with.

#include <map>
#include <string>
#include <vector>

#include "tetra/hw/cluster.hpp"
#include "tetra/llama/layout.hpp"
#include "tetra/llama/model.hpp"

namespace tetra::scenarios {

enum class Metric { step_time_s, tokens_per_s_per_gpu, mfu, outcome, peak_alloc_gib, peak_reserved_gib };

[[nodiscard]] const char* to_string(Metric m) noexcept;

struct MeasurementRow {
  int line = 0;                       ///< 1-based line in the CSV
  std::string id;
  std::string source;
  std::string group;
  Metric metric = Metric::step_time_s;
  double value = 0;                   ///< measured value (outcome: 1 = ok, 0 = oom)
  std::map<std::string, std::string> columns;  ///< every raw cell by header name (--group-by)
  /// Empty when the row can be predicted; otherwise why not (blank layout cells, an invalid
  /// layout, ...). Such rows are listed as skipped by validate.
  std::string skip_reason;
  llama::Model model;
  hw::Cluster cluster;
  llama::Training training;
  llama::Layout layout;
};

/// Reads a measurement CSV. Model and cluster cells are presets or TOML paths relative to the
/// CSV. Throws UserError (file:line, column name) for a malformed file; rows that are well
/// formed but cannot be simulated come back with a skip_reason.
[[nodiscard]] std::vector<MeasurementRow> read_measurements(const std::string& csv_path);

}  // namespace tetra::scenarios
