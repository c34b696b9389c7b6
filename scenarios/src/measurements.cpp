#include "tetra/base/text_file.hpp"
#include "tetra/scenarios/measurements.hpp"

#include "tetra/parallel/flops.hpp"
#include "tetra/parallel/params.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <optional>
#include <set>

#include "loader.hpp"
#include "tetra/base/error.hpp"
#include "tetra/hw/presets.hpp"
#include "tetra/model/presets.hpp"

namespace tetra::scenarios {

namespace fs = std::filesystem;
using detail::Doc;

const char* to_string(Metric m) noexcept {
  switch (m) {
    case Metric::step_time_s: return "step_time_s";
    case Metric::tokens_per_s_per_gpu: return "tokens_per_s_per_gpu";
    case Metric::mfu: return "mfu";
    case Metric::outcome: return "outcome";
    case Metric::peak_alloc_gib: return "peak_alloc_gib";
    case Metric::peak_reserved_gib: return "peak_reserved_gib";
  }
  return "?";
}

std::optional<Metric> parse_metric(std::string_view name) noexcept {
  for (Metric m : kMetrics) {
    if (name == to_string(m)) return m;
  }
  return std::nullopt;
}

std::vector<CsvRecord> parse_csv(std::string_view text, const std::string& origin) {
  std::vector<CsvRecord> out;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // UTF-8 byte-order mark
  std::size_t i = 0;
  int line = 1;
  while (i < text.size()) {
    CsvRecord rec;
    rec.line = line;
    std::string field;
    bool at_field_start = true;
    bool end_of_record = false;
    while (!end_of_record) {
      if (i >= text.size()) {
        rec.fields.push_back(std::move(field));
        break;
      }
      const char c = text[i];
      if (at_field_start && c == '"') {
        at_field_start = false;
        const int open_line = line;
        ++i;
        while (true) {
          if (i >= text.size()) {
            throw UserError(SourceLocation{origin, open_line}, "",
                            "unterminated quoted field (a '\"' is missing)");
          }
          const char q = text[i];
          if (q == '"') {
            if (i + 1 < text.size() && text[i + 1] == '"') {
              field += '"';
              i += 2;
              continue;
            }
            ++i;
            break;
          }
          if (q == '\n') ++line;
          field += q;
          ++i;
        }
        // After the closing quote only a separator or the end of the record may follow.
        if (i < text.size() && text[i] != ',' && text[i] != '\n' && text[i] != '\r') {
          throw UserError(SourceLocation{origin, line}, "",
                          "unexpected character after a closing quote (quote the whole field "
                          "and double the quotes inside it)");
        }
        continue;
      }
      at_field_start = false;
      if (c == ',') {
        rec.fields.push_back(std::move(field));
        field.clear();
        at_field_start = true;
        ++i;
      } else if (c == '\n' || c == '\r') {
        rec.fields.push_back(std::move(field));
        field.clear();
        if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
        ++i;
        ++line;
        end_of_record = true;
      } else {
        field += c;
        ++i;
      }
    }
    const bool blank = rec.fields.size() == 1 && rec.fields[0].find_first_not_of(" \t") == std::string::npos;
    if (!blank) out.push_back(std::move(rec));
  }
  return out;
}

namespace {

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

/// Columns every measurement file must have; the others default (source, group: empty;
/// cp, vp: 1; sp: 0; recompute: none; options: none).
const std::vector<std::string>& required_columns() {
  static const std::vector<std::string> cols{"id", "model", "cluster", "n_gpus", "tp", "pp",
                                             "mbs", "gbs", "seq_len", "metric", "value"};
  return cols;
}

/// Reads model and cluster cells, caching every file and preset it has seen.
class Resolver {
 public:
  explicit Resolver(fs::path dir) : dir_(std::move(dir)) {}

  model::Model model(const std::string& cell, const SourceLocation& at) {
    if (auto it = models_.find(cell); it != models_.end()) return it->second;
    model::Model m;
    if (!looks_like_path(cell)) {
      if (auto p = model::find_model_preset(cell)) {
        m = *p;
        return models_.emplace(cell, m).first->second;
      }
    }
    const fs::path path = resolve(cell);
    if (!is_file(path)) {
      std::string names;
      for (const auto& p : model::model_presets()) names += (names.empty() ? "" : ", ") + p.name;
      throw UserError(at, "model",
                      "\"" + cell + "\" is neither a built-in model (" + names +
                          ") nor a TOML file relative to the CSV");
    }
    const std::string file = path.generic_string();
    const toml::table root = detail::parse_toml_file(file);
    const Doc doc{file, path.parent_path(), 0, false, ""};
    const toml::table& t = only_table(doc, root, "model");
    m = detail::load_model(doc, t);
    return models_.emplace(cell, m).first->second;
  }

  hw::Cluster cluster(const std::string& cell, const SourceLocation& at) {
    if (auto it = clusters_.find(cell); it != clusters_.end()) return it->second;
    hw::Cluster c;
    if (!looks_like_path(cell)) {
      if (auto p = hw::find_cluster_preset(cell)) {
        c = *p;
        return clusters_.emplace(cell, c).first->second;
      }
    }
    const fs::path path = resolve(cell);
    if (!is_file(path)) {
      std::string names;
      for (const auto& p : hw::cluster_presets()) names += (names.empty() ? "" : ", ") + p.name;
      throw UserError(at, "cluster",
                      "\"" + cell + "\" is neither a built-in cluster (" + names +
                          ") nor a TOML file relative to the CSV");
    }
    const std::string file = path.generic_string();
    const toml::table root = detail::parse_toml_file(file);
    const Doc doc{file, path.parent_path(), 0, false, ""};
    const toml::table& t = only_table(doc, root, "cluster");
    c = detail::load_cluster(doc, t);
    return clusters_.emplace(cell, c).first->second;
  }

 private:
  static bool looks_like_path(const std::string& cell) {
    return cell.find('/') != std::string::npos || cell.find('\\') != std::string::npos ||
           (cell.size() > 5 && cell.substr(cell.size() - 5) == ".toml");
  }
  [[nodiscard]] fs::path resolve(const std::string& cell) const {
    const fs::path p(cell);
    return p.is_absolute() ? p : dir_ / p;
  }
  static bool is_file(const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec);
  }
  static const toml::table& only_table(const Doc& doc, const toml::table& root, const char* name) {
    for (auto&& [k, v] : root) {
      if (k.str() != name) {
        detail::fail(doc, k.source(), std::string(k.str()),
                     std::string("unknown table or key (this file holds only [") + name + "])");
      }
      if (!v.is_table()) {
        detail::fail(doc, v.source(), "[" + std::string(name) + "]", "expected a table");
      }
    }
    const toml::node* n = root.get(name);
    if (n == nullptr) {
      throw UserError(SourceLocation{doc.file}, "[" + std::string(name) + "]", "missing table");
    }
    return *n->as_table();
  }

  fs::path dir_;
  std::map<std::string, model::Model> models_;
  std::map<std::string, hw::Cluster> clusters_;
};

}  // namespace

double measured_step_seconds(const MeasurementRow& r) noexcept {
  const double world = static_cast<double>(r.layout.world());
  if (!(r.value > 0) || world <= 0) return 0;
  switch (r.metric) {
    case Metric::step_time_s:
      return r.value;
    case Metric::tokens_per_s_per_gpu:
      return static_cast<double>(r.training.global_batch) * static_cast<double>(r.training.seq_len) /
             (r.value * world);
    case Metric::mfu: {
      const double flops = parallel::spec_step_flops(r.model, r.training, r.layout);
      const double peak = r.cluster.gpu.bf16_peak_flops;
      return peak > 0 ? flops / (r.value * peak * world) : 0;
    }
    default:
      return 0;
  }
}

fit::StepCase step_case(const MeasurementRow& r) {
  fit::StepCase c;
  c.id = r.id;
  c.group = r.group;
  c.model = &r.model;
  c.cluster = &r.cluster;
  c.training = &r.training;
  c.layout = r.layout;
  c.measured_s = measured_step_seconds(r);
  return c;
}

/// The cells of one data row, by column name, with errors at the row's line.
struct RowCells {
  const std::map<std::string, std::size_t>& col;
  const CsvRecord& rec;
  SourceLocation at;

  [[nodiscard]] std::string cell(const std::string& name) const {
    auto it = col.find(name);
    return it == col.end() ? std::string() : trim(rec.fields[it->second]);
  }
  [[nodiscard]] bool has(const std::string& name) const { return col.find(name) != col.end(); }
  [[nodiscard]] int integer(const std::string& name, long long lo, long long hi) const {
    const std::string s = cell(name);
    long long v = 0;
    const char* b = s.data();
    const char* e = s.data() + s.size();
    auto res = std::from_chars(b, e, v);
    if (s.empty() || res.ec != std::errc{} || res.ptr != e) {
      throw UserError(at, name, "expected an integer, got \"" + s + "\"");
    }
    if (v < lo || v > hi) {
      throw UserError(at, name, "must be between " + std::to_string(lo) + " and " +
                                    std::to_string(hi) + ", got " + s);
    }
    return static_cast<int>(v);
  }
};

/// The metric and value cells.
void read_value(const RowCells& c, MeasurementRow& row) {
  const SourceLocation& at = c.at;
  auto cell = [&](const std::string& name) { return c.cell(name); };
  const std::string metric = cell("metric");
  const auto m = parse_metric(metric);
  if (!m) {
    std::string names;
    for (Metric x : kMetrics) names += (names.empty() ? "" : ", ") + std::string(to_string(x));
    throw UserError(at, "metric", "unknown metric \"" + metric + "\" (expected one of: " + names + ")");
  }
  row.metric = *m;
  const std::string value = cell("value");
  if (row.metric == Metric::outcome) {
    if (value == "ok") {
      row.value = 1;
    } else if (value == "oom") {
      row.value = 0;
    } else {
      throw UserError(at, "value", "an outcome is \"ok\" or \"oom\", got \"" + value + "\"");
    }
  } else {
    double v = 0;
    const char* b = value.data();
    const char* e = value.data() + value.size();
    auto res = std::from_chars(b, e, v);
    if (value.empty() || res.ec != std::errc{} || res.ptr != e || !std::isfinite(v) || v <= 0) {
      throw UserError(at, "value", "expected a positive number, got \"" + value + "\"");
    }
    // Physical ranges: MFU is a fraction of the peak (a measured 0.55, not 55); a step, a
    // throughput or a memory peak beyond these is a unit slip, not a run.
    if (row.metric == Metric::mfu && v > 1.0) {
      throw UserError(at, "value", "mfu is a fraction of the peak, at most 1 (got " + value + "; 55 % is 0.55)");
    }
    if (row.metric == Metric::step_time_s && v > 1e6) {
      throw UserError(at, "value", "step_time_s above 10^6 s (11.6 days) is not a training step (got " + value + ")");
    }
    if ((row.metric == Metric::peak_alloc_gib || row.metric == Metric::peak_reserved_gib) && v > 1e6) {
      throw UserError(at, "value", "a memory peak above 10^6 GiB is not one GPU's (got " + value + ")");
    }
    if (row.metric == Metric::tokens_per_s_per_gpu && v > 1e9) {
      throw UserError(at, "value", "tokens_per_s_per_gpu above 10^9 is not one GPU's (got " + value + ")");
    }
    row.value = v;
  }

}

/// The layout cells (a blank one makes the row unpredictable, not malformed) and the pipeline
/// split they imply.
void read_layout(const RowCells& c, MeasurementRow& row) {
  const SourceLocation& at = c.at;
  auto cell = [&](const std::string& name) { return c.cell(name); };
  auto has = [&](const std::string& name) { return c.has(name); };
  auto integer = [&](const std::string& name, long long lo, long long hi) { return c.integer(name, lo, hi); };
  for (const char* name : {"tp", "cp", "pp", "vp", "mbs", "sp", "recompute"}) {
    if (has(name) && cell(name).empty() && row.skip_reason.empty()) {
      row.skip_reason = std::string("layout cell '") + name + "' is blank";
    }
  }
  auto layout_int = [&](const char* name, int fallback) {
    if (!has(name) || cell(name).empty()) return fallback;
    return integer(name, 1, 1'000'000);
  };
  row.layout.tp = layout_int("tp", 1);
  row.layout.cp = layout_int("cp", 1);
  row.layout.pp = layout_int("pp", 1);
  row.layout.vp = layout_int("vp", 1);
  row.layout.mbs = layout_int("mbs", 1);
  // Expert parallelism (MoE rows): a blank or absent cell is 1, as in a dense run; the
  // published tables give EP and rarely ETP.
  row.layout.ep = layout_int("ep", 1);
  row.layout.etp = layout_int("etp", 1);
  if (has("sp") && !cell("sp").empty()) {
    const std::string sp = cell("sp");
    if (sp == "1" || sp == "true") {
      row.layout.sp = true;
    } else if (sp == "0" || sp == "false") {
      row.layout.sp = false;
    } else {
      throw UserError(at, "sp", "expected 0 or 1, got \"" + sp + "\"");
    }
  }
  if (has("recompute") && !cell("recompute").empty()) {
    const std::string rc = cell("recompute");
    const auto parsed = parallel::parse_recompute(rc);
    if (!parsed) throw UserError(at, "recompute", "expected none, selective or full, got \"" + rc + "\"");
    row.layout.recompute = *parsed;
  }
  // Interleaving is what vp > 1 means in a measurement row.
  if (row.layout.vp > 1) row.layout.schedule = parallel::Schedule::interleaved;
  // A pipeline that does not divide the layers ran with an uneven split; the CSV has no
  // columns for it, so the rows take the split tetrasim uses everywhere (parallel::uneven_split).
  if (row.layout.vp == 1) {
    if (const auto split = parallel::uneven_split(row.model.layers, row.layout.pp)) {
      row.layout.first_stage_layers = split->first_stage_layers;
      row.layout.last_stage_layers = split->last_stage_layers;
    }
  } else if (row.model.is_moe()) {
    // MoE recipes interleave layer counts that do not divide (DeepSeek-V3's 61 layers,
    // Qwen3-235B's 94) with Megatron-Core's custom pipeline layouts; the rows take
    // tetrasim's interleaved uneven split (parallel::uneven_chunk_split).
    if (const auto split = parallel::uneven_chunk_split(row.model.layers, row.layout.pp, row.layout.vp)) {
      row.layout.first_stage_layers = split->first_stage_layers;
      row.layout.last_stage_layers = split->last_stage_layers;
    }
  }

}

/// The row's cluster sized to its GPUs, or the reason it cannot be.
void size_cluster(MeasurementRow& row, int n_gpus) {
  // The cluster holds exactly the row's GPUs; on racks larger than one node (NVL72) the job
  // fills each rack with the same share of it (hw::job_domain).
  if (n_gpus % row.cluster.gpus_per_node == 0) {
    row.cluster.nodes = n_gpus / row.cluster.gpus_per_node;
    if (row.cluster.nvlink_domain() > row.cluster.gpus_per_node) {
      row.cluster.intra.domain_gpus = hw::job_domain(row.cluster, n_gpus);
    }
  } else if (n_gpus < row.cluster.gpus_per_node) {
    row.cluster.gpus_per_node = n_gpus;
    row.cluster.nodes = 1;
  } else if (row.skip_reason.empty()) {
    row.skip_reason = "n_gpus " + std::to_string(n_gpus) + " is not a multiple of the " +
                      std::to_string(row.cluster.gpus_per_node) + " GPUs per node of " +
                      row.cluster.name;
  }

}

std::vector<MeasurementRow> read_measurements_text(std::string_view text, const std::string& origin) {
  const std::vector<CsvRecord> records = parse_csv(text, origin);
  if (records.empty()) throw UserError(SourceLocation{origin}, "", "empty file (a header row is required)");

  // Header.
  const CsvRecord& head = records.front();
  std::map<std::string, std::size_t> col;
  for (std::size_t i = 0; i < head.fields.size(); ++i) {
    const std::string name = trim(head.fields[i]);
    if (name.empty()) continue;
    if (!col.emplace(name, i).second) {
      throw UserError(SourceLocation{origin, head.line}, name, "column appears twice in the header");
    }
  }
  for (const auto& need : required_columns()) {
    if (col.find(need) == col.end()) {
      throw UserError(SourceLocation{origin, head.line}, need,
                      "required column is missing from the header (see docs/accuracy.md)");
    }
  }

  Resolver resolver(fs::path(origin).parent_path());
  std::vector<MeasurementRow> rows;
  std::map<std::string, int> first_line_of_id;
  for (std::size_t r = 1; r < records.size(); ++r) {
    const CsvRecord& rec = records[r];
    const SourceLocation at{origin, rec.line};
    if (rec.fields.size() != head.fields.size()) {
      throw UserError(at, "", "expected " + std::to_string(head.fields.size()) + " fields like the header, got " +
                                  std::to_string(rec.fields.size()));
    }
    const RowCells cells{col, rec, at};
    auto cell = [&](const std::string& name) { return cells.cell(name); };
    auto integer = [&](const std::string& name, long long lo, long long hi) { return cells.integer(name, lo, hi); };

    MeasurementRow row;
    row.line = rec.line;
    for (const auto& [name, idx] : col) row.columns[name] = rec.fields[idx];
    row.id = cell("id");
    if (row.id.empty()) throw UserError(at, "id", "empty cell (every row needs a unique id)");
    if (auto [it, fresh] = first_line_of_id.emplace(row.id, rec.line); !fresh) {
      throw UserError(at, "id", "duplicate id \"" + row.id + "\" (first on line " +
                                    std::to_string(it->second) + ")");
    }
    row.source = cell("source");
    row.group = cell("group");
    // A row its source flags as unrepresentative (a regression the publisher names as a bug) is
    // kept in the file with the flag and skipped, so the skip list shows it.
    if (const std::string flag = cell("known_issue"); !flag.empty()) row.skip_reason = "known issue: " + flag;

    read_value(cells, row);

    const std::string model_cell = cell("model");
    const std::string cluster_cell = cell("cluster");
    if (model_cell.empty()) throw UserError(at, "model", "empty cell");
    if (cluster_cell.empty()) throw UserError(at, "cluster", "empty cell");
    row.model = resolver.model(model_cell, at);
    row.cluster = resolver.cluster(cluster_cell, at);

    const int n_gpus = integer("n_gpus", 1, 1'000'000'000);
    row.training.seq_len = integer("seq_len", 1, 100'000'000);
    row.training.global_batch = integer("gbs", 1, 1'000'000'000);

    read_layout(cells, row);

    detail::KeyOrigins origins;
    if (cells.has("options") && !cell("options").empty()) {
      const Doc doc{origin, fs::path(origin).parent_path(), rec.line, true, "options: "};
      const toml::table opts = detail::parse_key_values(cell("options"), ';', doc);
      detail::apply_option(doc, opts, row.training, row.layout, origins);
    }

    size_cluster(row, n_gpus);

    if (row.skip_reason.empty()) {
      if (auto bad = detail::check_precision(row.cluster.gpu, row.training, origins)) {
        row.skip_reason = bad->key + ": " + bad->message;
      }
    }
    if (row.skip_reason.empty()) {
      const bool dp_given = origins.find("dp") != origins.end();
      if (auto issue = detail::resolve_layout(row.model, n_gpus, row.cluster.nvlink_domain(), row.training,
                                                row.layout, dp_given)) {
        row.skip_reason = issue->key.empty() ? issue->message : issue->key + ": " + issue->message;
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<MeasurementRow> read_measurements(const std::string& csv_path) {
  return read_measurements_text(read_input_file(csv_path), csv_path);
}

}  // namespace tetra::scenarios
