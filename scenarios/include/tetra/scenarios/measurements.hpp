#pragma once
/// Measurement files (docs/accuracy.md): one measured value per CSV row, each resolved into the
/// model, cluster, training and layout it was measured with.

#include <array>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tetra/fit/fit.hpp"
#include "tetra/hw/cluster.hpp"
#include "tetra/parallel/layout.hpp"
#include "tetra/model/model.hpp"

namespace tetra::scenarios {

/// What a row measured. step_time_s: seconds per optimizer step; tokens_per_s_per_gpu;
/// mfu: fraction of the dense bf16 peak; outcome: ran (ok) or ran out of memory (oom);
/// peak_alloc_gib / peak_reserved_gib: the largest torch.cuda.max_memory_allocated /
/// max_memory_reserved over the ranks, GiB.
enum class Metric { step_time_s, tokens_per_s_per_gpu, mfu, outcome, peak_alloc_gib, peak_reserved_gib };

/// Every metric, in the order reports list them.
inline constexpr std::array<Metric, 6> kMetrics{Metric::step_time_s,    Metric::tokens_per_s_per_gpu,
                                                Metric::mfu,            Metric::outcome,
                                                Metric::peak_alloc_gib, Metric::peak_reserved_gib};

/// The column spelling of a metric ("step_time_s", ...).
[[nodiscard]] const char* to_string(Metric m) noexcept;
/// Inverse of to_string; nothing for an unknown name.
[[nodiscard]] std::optional<Metric> parse_metric(std::string_view name) noexcept;

/// One measured value and everything needed to predict it.
struct MeasurementRow {
  int line = 0;                       ///< 1-based line in the CSV
  std::string id;                     ///< unique row id
  std::string source;                 ///< citation key
  std::string group;                  ///< rows measured in one sweep
  Metric metric = Metric::step_time_s;
  double value = 0;                   ///< measured value (outcome: 1 = ok, 0 = oom)
  std::map<std::string, std::string> columns;  ///< every raw cell by header name (--group-by)
  /// Empty when the row can be predicted; otherwise why not (blank layout cells, an invalid
  /// layout, ...). Such rows are listed as skipped by validate.
  std::string skip_reason;
  model::Model model;
  hw::Cluster cluster;                ///< nodes (and gpus_per_node below one node) set to n_gpus
  parallel::Training training;           ///< seq_len, gbs and options over the defaults
  parallel::Layout layout;               ///< dp derived from n_gpus; vp > 1 implies interleaved
};

/// The step time a row measured, in seconds: step_time_s as it is; tokens_per_s_per_gpu and mfu
/// as the step time they imply (the global batch's tokens over the rate; the model FLOPs of
/// tetrasim's MFU, parallel::spec_step_flops, over MFU × the GPU's bf16 peak); 0 for other metrics
/// or a non-positive value.
[[nodiscard]] double measured_step_seconds(const MeasurementRow& row) noexcept;

/// The row as a step-fit case (measured_s = measured_step_seconds); it points into `row`.
[[nodiscard]] fit::StepCase step_case(const MeasurementRow& row);

/// Reads a measurement CSV. Model and cluster cells are presets or TOML paths relative to the
/// CSV. Throws UserError (file:line, column name) for a malformed file; rows that are well
/// formed but cannot be simulated come back with a skip_reason.
/// Required columns: id, model, cluster, n_gpus, tp, pp, mbs, gbs, seq_len, metric, value;
/// source, group, cp, vp, ep, etp, sp, recompute and options may be absent (defaults: empty,
/// 1, 1, 1, 1, 0, none, none); other columns are ignored. A blank tp/cp/pp/vp/mbs/sp/recompute
/// cell skips the row ("layout cell 'mbs' is blank"); a blank ep or etp cell is 1. A non-blank
/// known_issue cell (the source's own flag that the number measures a bug) skips the row with
/// "known issue: " and the cell.
[[nodiscard]] std::vector<MeasurementRow> read_measurements(const std::string& csv_path);

/// Same, from text already read; `origin` names it in errors and is the base of relative paths.
[[nodiscard]] std::vector<MeasurementRow> read_measurements_text(std::string_view csv_text,
                                                                 const std::string& origin);

/// One CSV record: its fields (quotes removed) and the line it starts on.
struct CsvRecord {
  int line = 0;
  std::vector<std::string> fields;
};

/// RFC 4180 CSV: comma-separated, fields in double quotes may hold commas, line breaks and
/// doubled quotes; LF or CRLF line ends; a leading UTF-8 byte-order mark is dropped; blank
/// lines are skipped. Throws UserError (origin:line) for an unterminated quote or text after
/// a closing quote.
[[nodiscard]] std::vector<CsvRecord> parse_csv(std::string_view text, const std::string& origin);

}  // namespace tetra::scenarios
