// Calibration profile TOML; see profile_io.hpp and docs/calibration.md for the format.
#include "tetra/base/text_file.hpp"
#include "tetra/scenarios/profile_io.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <sstream>
#include <vector>

#include "loader.hpp"
#include "tetra/base/error.hpp"
#include "tetra/base/units.hpp"
#include "toml.hpp"

namespace tetra::scenarios {
namespace {

using detail::Doc;
using detail::fail;

/// One table being read: its document, display name ("[[gemm]] #3", "[meta]") and node.
struct Section {
  const Doc& doc;
  std::string name;
  const toml::table& table;

  [[nodiscard]] std::string key(std::string_view k) const { return name + "." + std::string(k); }
};

void check_keys(const Section& s, std::initializer_list<std::string_view> allowed) {
  for (const auto& [k, node] : s.table) {
    (void)node;
    bool ok = false;
    for (std::string_view a : allowed) ok = ok || k.str() == a;
    if (!ok) {
      std::string list;
      for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      fail(s.doc, k.source(), s.key(k.str()), "unknown key (expected one of: " + list + ")");
    }
  }
}

const toml::node* get(const Section& s, std::string_view k, bool required) {
  const toml::node* n = s.table.get(k);
  if (n == nullptr && required) fail(s.doc, s.table.source(), s.key(k), "missing key");
  return n;
}

std::string get_string(const Section& s, std::string_view k, bool required, std::string fallback = "") {
  const toml::node* n = get(s, k, required);
  if (n == nullptr) return fallback;
  if (!n->is_string()) fail(s.doc, n->source(), s.key(k), "expected a string");
  return std::string(n->as_string()->get());
}

/// A TOML integer or float as a double; anything else is the error of key `k`.
double number_of(const Section& s, const toml::node& n, std::string_view k) {
  if (n.is_integer()) return static_cast<double>(n.as_integer()->get());
  if (n.is_floating_point()) return n.as_floating_point()->get();
  fail(s.doc, n.source(), s.key(k), "expected a number");
}

double get_number(const Section& s, std::string_view k, bool required, double fallback = 0,
                  bool positive = false) {
  const toml::node* n = get(s, k, required);
  if (n == nullptr) return fallback;
  const double v = number_of(s, *n, k);
  if (!std::isfinite(v) || v < 0 || (positive && v <= 0)) {
    fail(s.doc, n->source(), s.key(k), positive ? "expected a positive number" : "expected a number >= 0");
  }
  return v;
}

long long get_int(const Section& s, std::string_view k, bool required, long long fallback = 0,
                  bool positive = true) {
  const toml::node* n = get(s, k, required);
  if (n == nullptr) return fallback;
  if (!n->is_integer()) fail(s.doc, n->source(), s.key(k), "expected an integer");
  const long long v = n->as_integer()->get();
  if (v < 0 || (positive && v == 0) || v > (1LL << 50)) {
    fail(s.doc, n->source(), s.key(k), positive ? "expected a positive integer" : "expected an integer >= 0");
  }
  return v;
}

bool get_bool(const Section& s, std::string_view k, bool required, bool fallback) {
  const toml::node* n = get(s, k, required);
  if (n == nullptr) return fallback;
  if (!n->is_boolean()) fail(s.doc, n->source(), s.key(k), "expected true or false");
  return n->as_boolean()->get();
}

template <std::size_t N>
std::string get_choice(const Section& s, std::string_view k, bool required,
                       const std::array<std::string_view, N>& choices) {
  const std::string v = get_string(s, k, required);
  if (v.empty() && !required) return v;
  for (std::string_view c : choices) {
    if (v == c) return v;
  }
  std::string list;
  for (std::string_view c : choices) list += (list.empty() ? "" : ", ") + std::string(c);
  fail(s.doc, s.table.get(k)->source(), s.key(k), "unknown value \"" + v + "\" (expected one of: " + list + ")");
}

constexpr std::array<std::string_view, 5> kCollectiveOps = {
    "all_reduce", "all_gather", "reduce_scatter", "send_recv", "all_to_all"};
constexpr std::array<std::string_view, 14> kMemoryKernels = {
    "copy", "rmsnorm", "layernorm", "swiglu", "gelu", "rope", "residual_add", "softmax", "embedding",
    "cross_entropy", "grad_norm", "adam", "quantize", "amax"};
constexpr std::array<std::string_view, 2> kPasses = {"fwd", "bwd"};

/// The array-of-tables `name` (or nothing); anything else under that key is an error.
template <typename F>
void for_each_row(const Doc& doc, const toml::table& parent, std::string_view name, const std::string& display,
                  F&& f) {
  const toml::node* n = parent.get(name);
  if (n == nullptr) return;
  const toml::array* arr = n->as_array();
  if (arr == nullptr) fail(doc, n->source(), display, "expected an array of tables ([[" + display + "]])");
  int i = 0;
  for (const toml::node& row : *arr) {
    ++i;
    const toml::table* t = row.as_table();
    if (t == nullptr) fail(doc, row.source(), display, "expected a table in [[" + display + "]]");
    f(Section{doc, "[[" + display + "]] #" + std::to_string(i), *t});
  }
}

/// [meta]: where and on what the profile was measured.
void load_meta(const Doc& doc, const toml::table& root, costmodel::Profile& p) {
  if (const toml::node* m = root.get("meta")) {
    const toml::table* t = m->as_table();
    if (t == nullptr) fail(doc, m->source(), "[meta]", "expected a table");
    const Section s{doc, "[meta]", *t};
    check_keys(s, {"gpu", "driver", "cuda", "cublas", "cudnn", "nccl", "date", "source", "hosts",
                   "gpus_per_node", "device_memory", "sms", "l2_cache"});
    p.meta.gpu = get_string(s, "gpu", false);
    p.meta.driver = get_string(s, "driver", false);
    p.meta.cuda = get_string(s, "cuda", false);
    p.meta.cublas = get_string(s, "cublas", false);
    p.meta.cudnn = get_string(s, "cudnn", false);
    p.meta.nccl = get_string(s, "nccl", false);
    p.meta.date = get_string(s, "date", false);
    p.meta.source = get_string(s, "source", false);
    p.meta.hosts = static_cast<int>(get_int(s, "hosts", false, 1));
    p.meta.gpus_per_node = static_cast<int>(get_int(s, "gpus_per_node", false, 8));
    p.meta.sms = static_cast<int>(get_int(s, "sms", false, 0, false));
    const auto size = [&](const char* key, double& out) {
      const toml::node* n = t->get(key);
      if (n == nullptr) return;
      if (n->is_string()) {
        try {
          out = units::parse_bytes(n->as_string()->get());
        } catch (const std::invalid_argument& e) {
          fail(doc, n->source(), s.key(key), e.what());
        }
      } else {
        out = get_number(s, key, false);
      }
    };
    size("device_memory", p.meta.device_memory_bytes);
    size("l2_cache", p.meta.l2_bytes);
  }
}

/// The measured tables: [[gemm]], [[attention]], [[memory_bound]], [[collective]].
void load_rows(const Doc& doc, const toml::table& root, costmodel::Profile& p) {
  for_each_row(doc, root, "gemm", "gemm", [&](const Section& s) {
    check_keys(s, {"m", "n", "k", "dtype", "seconds"});
    costmodel::GemmRow r;
    r.m = get_int(s, "m", true);
    r.n = get_int(s, "n", true);
    r.k = get_int(s, "k", true);
    r.dtype = get_string(s, "dtype", false, "bf16");
    r.seconds = get_number(s, "seconds", true, 0, true);
    p.gemm.push_back(r);
  });
  for_each_row(doc, root, "attention", "attention", [&](const Section& s) {
    check_keys(s, {"batch", "seq", "heads", "kv_heads", "head_dim", "causal", "pass", "seconds"});
    costmodel::AttentionRow r;
    r.batch = static_cast<int>(get_int(s, "batch", false, 1));
    r.seq = static_cast<int>(get_int(s, "seq", true));
    r.heads = static_cast<int>(get_int(s, "heads", true));
    r.kv_heads = static_cast<int>(get_int(s, "kv_heads", false, r.heads));
    r.head_dim = static_cast<int>(get_int(s, "head_dim", true));
    r.causal = get_bool(s, "causal", false, true);
    r.pass = get_choice(s, "pass", true, kPasses) == "bwd" ? costmodel::AttentionPass::bwd
                                                                  : costmodel::AttentionPass::fwd;
    r.seconds = get_number(s, "seconds", true, 0, true);
    p.attention.push_back(r);
  });
  for_each_row(doc, root, "memory_bound", "memory_bound", [&](const Section& s) {
    check_keys(s, {"kernel", "bytes", "seconds"});
    costmodel::MemoryBoundRow r;
    r.kernel = get_choice(s, "kernel", true, kMemoryKernels);
    r.bytes = get_number(s, "bytes", true, 0, true);
    r.seconds = get_number(s, "seconds", true, 0, true);
    p.memory_bound.push_back(r);
  });
  for_each_row(doc, root, "collective", "collective", [&](const Section& s) {
    check_keys(s, {"op", "ranks", "ranks_per_node", "bytes", "seconds", "algorithm", "protocol"});
    costmodel::CollectiveRow r;
    r.op = get_choice(s, "op", true, kCollectiveOps);
    r.ranks = static_cast<int>(get_int(s, "ranks", true));
    r.ranks_per_node = static_cast<int>(get_int(s, "ranks_per_node", false, r.ranks));
    r.bytes = get_number(s, "bytes", true, 0, true);
    r.seconds = get_number(s, "seconds", true, 0, true);
    r.algorithm = get_string(s, "algorithm", false);  // NCCL_ALGO of the sweep, free form
    r.protocol = get_string(s, "protocol", false);    // NCCL_PROTO of the sweep, free form
    if (r.ranks_per_node > r.ranks) {
      fail(doc, s.table.get("ranks_per_node")->source(), s.key("ranks_per_node"), "exceeds ranks");
    }
    p.collective.push_back(r);
  });
}

/// [fit]: the parameters fitted to the tables.
void load_fit(const Doc& doc, const toml::table& root, costmodel::Profile& p) {
  if (const toml::node* fn = root.get("fit")) {
    const toml::table* t = fn->as_table();
    if (t == nullptr) fail(doc, fn->source(), "[fit]", "expected a table");
    const Section s{doc, "[fit]", *t};
    check_keys(s, {"gemm_peak_flops", "gemm_launch_s", "gemm_wave_s", "gemm_tile_m", "gemm_tile_n",
                   "attention_fwd_flops", "attention_bwd_flops", "hbm_Bps", "kernel_launch_s",
                   "collective", "memory_bound"});
    costmodel::ProfileFit& f = p.fit;
    f.valid = true;
    f.gemm_peak_flops = get_number(s, "gemm_peak_flops", false);
    f.gemm_launch_s = get_number(s, "gemm_launch_s", false);
    f.gemm_wave_s = get_number(s, "gemm_wave_s", false);
    f.gemm_tile_m = static_cast<int>(get_int(s, "gemm_tile_m", false, 128, false));
    f.gemm_tile_n = static_cast<int>(get_int(s, "gemm_tile_n", false, 128, false));
    f.attention_fwd_flops = get_number(s, "attention_fwd_flops", false);
    f.attention_bwd_flops = get_number(s, "attention_bwd_flops", false);
    f.hbm_Bps = get_number(s, "hbm_Bps", false);
    f.kernel_launch_s = get_number(s, "kernel_launch_s", false);
    for_each_row(doc, *t, "collective", "fit.collective", [&](const Section& r) {
      check_keys(r, {"op", "ranks", "ranks_per_node", "latency_s", "busbw_Bps", "algorithm", "protocol"});
      costmodel::CollectiveFit c;
      c.op = get_choice(r, "op", true, kCollectiveOps);
      c.ranks = static_cast<int>(get_int(r, "ranks", true));
      c.ranks_per_node = static_cast<int>(get_int(r, "ranks_per_node", false, c.ranks));
      c.latency_s = get_number(r, "latency_s", true);
      c.busbw_Bps = get_number(r, "busbw_Bps", true, 0, true);
      c.algorithm = get_string(r, "algorithm", false);
      c.protocol = get_string(r, "protocol", false);
      f.collectives.push_back(c);
    });
    for_each_row(doc, *t, "memory_bound", "fit.memory_bound", [&](const Section& r) {
      check_keys(r, {"kernel", "launch_s", "Bps"});
      costmodel::MemoryBoundFit m;
      m.kernel = get_choice(r, "kernel", true, kMemoryKernels);
      m.launch_s = get_number(r, "launch_s", true);
      m.Bps = get_number(r, "Bps", true, 0, true);
      f.memory_bound.push_back(m);
    });
  }
}

costmodel::Profile load(const Doc& doc, const toml::table& root) {
  costmodel::Profile p;
  for (const auto& [k, node] : root) {
    const std::string_view key = k.str();
    if (key != "meta" && key != "gemm" && key != "attention" && key != "memory_bound" &&
        key != "collective" && key != "fit") {
      fail(doc, k.source(), std::string(key),
           "unknown table (expected meta, gemm, attention, memory_bound, collective, fit)");
    }
  }
  load_meta(doc, root, p);
  load_rows(doc, root, p);
  load_fit(doc, root, p);
  return p;
}

// ---- writing ----

std::string num(double v) {
  if (!std::isfinite(v)) v = 0;
  char buf[40];
  // The shortest text that reads back as the same double.
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  std::string s(buf, end);
  // Keep floats floats in TOML (an integral double prints without a dot).
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

constexpr std::array<std::string_view, 4> kStatuses = {"fitted", "at_bound", "unconstrained", "not_fitted"};

/// A factor's key with the unit of its value: step_overhead's are seconds ("value_s").
std::string factor_key(costmodel::Factor f, std::string_view key) {
  return std::string(key) + (f == costmodel::Factor::step_overhead ? "_s" : "");
}

/// A signed error: finite and above -1 (a step predicted in no time is no prediction).
double get_error(const Section& s, std::string_view k) {
  const toml::node* n = get(s, k, true);
  const double v = number_of(s, *n, k);
  if (!std::isfinite(v) || v <= -1.0) fail(s.doc, n->source(), s.key(k), "expected a signed error above -1");
  return v;
}

/// The keys of a band table (a fitted file's [band], a bands file's [band.GENERATION]): rows,
/// the two quantiles and, when rows reach the minimum, the two errors.
costmodel::ErrorBand load_band(const Section& s, std::initializer_list<std::string_view> extra_keys) {
  std::vector<std::string_view> allowed{"rows", "low_quantile", "high_quantile", "low_error", "high_error"};
  allowed.insert(allowed.end(), extra_keys.begin(), extra_keys.end());
  for (const auto& [k, node] : s.table) {
    (void)node;
    if (std::find(allowed.begin(), allowed.end(), k.str()) == allowed.end()) {
      std::string list;
      for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      fail(s.doc, k.source(), s.key(k.str()), "unknown key (expected one of: " + list + ")");
    }
  }
  costmodel::ErrorBand b;
  b.rows = static_cast<std::size_t>(get_int(s, "rows", true, 0, false));
  b.low_quantile = get_number(s, "low_quantile", true);
  b.high_quantile = get_number(s, "high_quantile", true);
  if (b.high_quantile > 1.0 || b.low_quantile >= b.high_quantile) {
    fail(s.doc, s.table.get("high_quantile")->source(), s.key("high_quantile"),
         "expected low_quantile < high_quantile <= 1");
  }
  if (b.available()) {
    b.low_error = get_error(s, "low_error");
    b.high_error = get_error(s, "high_error");
    if (b.high_error < b.low_error) {
      fail(s.doc, s.table.get("high_error")->source(), s.key("high_error"), "is below low_error");
    }
  } else if (const toml::node* n = s.table.get("low_error")) {
    fail(s.doc, n->source(), s.key("low_error"),
         "a band of fewer than " + std::to_string(costmodel::kMinBandRows) + " rows has no errors");
  }
  return b;
}

std::string format_band(const costmodel::ErrorBand& b) {
  std::ostringstream os;
  os << "rows = " << b.rows << "\nlow_quantile = " << num(b.low_quantile) << "\nhigh_quantile = "
     << num(b.high_quantile) << "\n";
  if (b.available()) os << "low_error = " << num(b.low_error) << "\nhigh_error = " << num(b.high_error) << "\n";
  return os.str();
}

fit::FitSummary load_fitted(const Doc& doc, const toml::table& root) {
  for (const auto& [k, node] : root) {
    (void)node;
    if (k.str() != "fitted" && k.str() != "factors" && k.str() != "band") {
      fail(doc, k.source(), std::string(k.str()), "unknown table (expected fitted, factors, band)");
    }
  }
  fit::FitSummary out;
  if (const toml::node* m = root.get("fitted")) {
    const toml::table* t = m->as_table();
    if (t == nullptr) fail(doc, m->source(), "[fitted]", "expected a table");
    const Section s{doc, "[fitted]", *t};
    check_keys(s, {"csv", "cluster", "rows", "rms_error", "mape", "iterations", "converged"});
    out.csv = get_string(s, "csv", false);
    out.cluster = get_string(s, "cluster", false);
    out.rms_error = get_number(s, "rms_error", false);
    out.mape = get_number(s, "mape", false);
    out.iterations = static_cast<int>(get_int(s, "iterations", false, 0, false));
    out.converged = get_bool(s, "converged", false, false);
    if (const toml::node* rows = t->get("rows")) {
      const toml::array* arr = rows->as_array();
      if (arr == nullptr) fail(doc, rows->source(), s.key("rows"), "expected an array of row ids");
      for (const toml::node& id : *arr) {
        if (!id.is_string()) fail(doc, id.source(), s.key("rows"), "expected a string (a row id)");
        out.rows.emplace_back(id.as_string()->get());
      }
    }
  }
  if (const toml::node* bn = root.get("band")) {
    const toml::table* t = bn->as_table();
    if (t == nullptr) fail(doc, bn->source(), "[band]", "expected a table");
    const Section s{doc, "[band]", *t};
    out.band = load_band(s, {"scheme"});
    out.band_scheme = get_string(s, "scheme", false);
  }
  const toml::table* factors = nullptr;
  if (const toml::node* fn = root.get("factors")) {
    factors = fn->as_table();
    if (factors == nullptr) fail(doc, fn->source(), "[factors]", "expected a table of [factors.NAME] tables");
  }
  for (costmodel::Factor f : costmodel::kFactors) {
    fit::FactorFit ff;
    ff.factor = f;
    ff.lower = fit::bound(f).lower;
    ff.upper = fit::bound(f).upper;
    ff.value = costmodel::Factors::neutral(f);
    out.per_factor.push_back(ff);
  }
  if (factors != nullptr) {
    for (const auto& [k, node] : *factors) {
      const std::string name(k.str());
      const auto f = costmodel::parse_factor(name);
      if (!f) {
        std::string list;
        for (costmodel::Factor x : costmodel::kFactors) list += (list.empty() ? "" : ", ") + std::string(costmodel::to_string(x));
        fail(doc, k.source(), "[factors]." + name, "unknown factor (expected one of: " + list + ")");
      }
      const toml::table* t = node.as_table();
      if (t == nullptr) fail(doc, node.source(), "[factors." + name + "]", "expected a table");
      const Section s{doc, "[factors." + name + "]", *t};
      const std::string value_key = factor_key(*f, "value"), lower_key = factor_key(*f, "lower"),
                        upper_key = factor_key(*f, "upper"), se_key = factor_key(*f, "std_error");
      check_keys(s, {value_key, lower_key, upper_key, se_key, "share", "status"});
      fit::FactorFit& ff = out.per_factor[static_cast<std::size_t>(*f)];
      const fit::FactorBound& b = fit::bound(*f);
      ff.value = get_number(s, value_key, true);
      if (ff.value < b.lower || ff.value > b.upper) {
        fail(doc, t->get(value_key)->source(), s.key(value_key),
             "outside the factor's bound [" + num(b.lower) + ", " + num(b.upper) + "]");
      }
      ff.lower = get_number(s, lower_key, false, b.lower);
      ff.upper = get_number(s, upper_key, false, b.upper);
      ff.std_error = get_number(s, se_key, false, -1.0);
      ff.share = get_number(s, "share", false);
      const std::string status = get_choice(s, "status", false, kStatuses);
      ff.status = fit::FactorStatus::fitted;
      for (std::size_t i = 0; i < kStatuses.size(); ++i) {
        if (status == kStatuses[i]) ff.status = static_cast<fit::FactorStatus>(i);
      }
      out.factors.set(*f, ff.value);
    }
  }
  return out;
}

}  // namespace

costmodel::Profile parse_profile(std::string_view text, const std::string& origin) {
  const toml::table root = detail::parse_toml_text(text, origin);
  const Doc doc{origin, {}, 0, false, ""};
  if (root.empty()) {
    throw UserError(SourceLocation{origin}, "", "empty: a profile holds measured rows or a [fit] (tetrasim calibrate --out)");
  }
  return load(doc, root);
}

costmodel::Profile read_profile(const std::string& path) {
  return parse_profile(read_input_file(path), path);
}

std::string format_profile(const costmodel::Profile& p) {
  std::ostringstream os;
  os << "# tetrasim calibration profile (docs/calibration.md). Times in seconds, sizes in bytes,\n"
        "# rates in FLOP/s or bytes/s as the key names say.\n\n";
  os << "[meta]\n";
  os << "gpu = " << quoted(p.meta.gpu) << "\n";
  os << "driver = " << quoted(p.meta.driver) << "\n";
  os << "cuda = " << quoted(p.meta.cuda) << "\n";
  os << "cublas = " << quoted(p.meta.cublas) << "\n";
  os << "cudnn = " << quoted(p.meta.cudnn) << "\n";
  os << "nccl = " << quoted(p.meta.nccl) << "\n";
  os << "date = " << quoted(p.meta.date) << "\n";
  os << "source = " << quoted(p.meta.source) << "\n";
  os << "hosts = " << p.meta.hosts << "\n";
  os << "gpus_per_node = " << p.meta.gpus_per_node << "\n";
  if (p.meta.sms > 0) os << "sms = " << p.meta.sms << "\n";
  const auto size = [&](const char* key, double bytes) {
    if (!(bytes > 0)) return;
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.17gB", bytes);
    os << key << " = " << quoted(buf) << "\n";
  };
  size("device_memory", p.meta.device_memory_bytes);
  size("l2_cache", p.meta.l2_bytes);
  for (const auto& r : p.gemm) {
    os << "\n[[gemm]]\nm = " << r.m << "\nn = " << r.n << "\nk = " << r.k << "\ndtype = " << quoted(r.dtype)
       << "\nseconds = " << num(r.seconds) << "\n";
  }
  for (const auto& r : p.attention) {
    os << "\n[[attention]]\nbatch = " << r.batch << "\nseq = " << r.seq << "\nheads = " << r.heads
       << "\nkv_heads = " << r.kv_heads << "\nhead_dim = " << r.head_dim
       << "\ncausal = " << (r.causal ? "true" : "false")
       << "\npass = " << quoted(r.pass == costmodel::AttentionPass::bwd ? "bwd" : "fwd")
       << "\nseconds = " << num(r.seconds) << "\n";
  }
  for (const auto& r : p.memory_bound) {
    os << "\n[[memory_bound]]\nkernel = " << quoted(r.kernel) << "\nbytes = " << num(r.bytes)
       << "\nseconds = " << num(r.seconds) << "\n";
  }
  for (const auto& r : p.collective) {
    os << "\n[[collective]]\nop = " << quoted(r.op) << "\nranks = " << r.ranks
       << "\nranks_per_node = " << r.ranks_per_node << "\nbytes = " << num(r.bytes)
       << "\nseconds = " << num(r.seconds) << "\n";
    if (!r.algorithm.empty()) os << "algorithm = " << quoted(r.algorithm) << "\n";
    if (!r.protocol.empty()) os << "protocol = " << quoted(r.protocol) << "\n";
  }
  if (p.fit.valid) {
    const auto& f = p.fit;
    os << "\n[fit]\ngemm_peak_flops = " << num(f.gemm_peak_flops) << "\ngemm_launch_s = " << num(f.gemm_launch_s)
       << "\ngemm_wave_s = " << num(f.gemm_wave_s) << "\ngemm_tile_m = " << f.gemm_tile_m
       << "\ngemm_tile_n = " << f.gemm_tile_n << "\nattention_fwd_flops = " << num(f.attention_fwd_flops)
       << "\nattention_bwd_flops = " << num(f.attention_bwd_flops) << "\nhbm_Bps = " << num(f.hbm_Bps)
       << "\nkernel_launch_s = " << num(f.kernel_launch_s) << "\n";
    for (const auto& c : f.collectives) {
      os << "\n[[fit.collective]]\nop = " << quoted(c.op) << "\nranks = " << c.ranks
         << "\nranks_per_node = " << c.ranks_per_node << "\nlatency_s = " << num(c.latency_s)
         << "\nbusbw_Bps = " << num(c.busbw_Bps) << "\n";
      if (!c.algorithm.empty()) os << "algorithm = " << quoted(c.algorithm) << "\n";
      if (!c.protocol.empty()) os << "protocol = " << quoted(c.protocol) << "\n";
    }
    for (const auto& m : f.memory_bound) {
      os << "\n[[fit.memory_bound]]\nkernel = " << quoted(m.kernel) << "\nlaunch_s = " << num(m.launch_s)
         << "\nBps = " << num(m.Bps) << "\n";
    }
  }
  return os.str();
}


fit::FitSummary parse_fitted(std::string_view text, const std::string& origin) {
  const toml::table root = detail::parse_toml_text(text, origin);
  const Doc doc{origin, {}, 0, false, ""};
  if (root.empty()) {
    throw UserError(SourceLocation{origin}, "", "empty: a fitted file holds [factors.*] tables (tetrasim fit -o)");
  }
  return load_fitted(doc, root);
}

fit::FitSummary read_fitted(const std::string& path) { return parse_fitted(read_input_file(path), path); }

std::string format_fitted(const fit::FitSummary& f) {
  std::ostringstream os;
  os << "# Cluster factors fitted by `tetrasim fit` from measured step times (fit/README.md).\n"
        "# Apply them with --fit FILE on simulate, search and validate.\n\n";
  os << "[fitted]\ncsv = " << quoted(f.csv) << "\ncluster = " << quoted(f.cluster) << "\nrows = [";
  for (std::size_t i = 0; i < f.rows.size(); ++i) os << (i == 0 ? "" : ", ") << quoted(f.rows[i]);
  os << "]\nrms_error = " << num(f.rms_error) << "\nmape = " << num(f.mape) << "\niterations = " << f.iterations
     << "\nconverged = " << (f.converged ? "true" : "false") << "\n";
  for (const fit::FactorFit& ff : f.per_factor) {
    os << "\n[factors." << costmodel::to_string(ff.factor) << "]\n"
       << factor_key(ff.factor, "value") << " = " << num(ff.value) << "\n"
       << factor_key(ff.factor, "lower") << " = " << num(ff.lower) << "\n"
       << factor_key(ff.factor, "upper") << " = " << num(ff.upper) << "\n";
    if (ff.std_error >= 0) os << factor_key(ff.factor, "std_error") << " = " << num(ff.std_error) << "\n";
    os << "share = " << num(ff.share) << "\nstatus = " << quoted(fit::to_string(ff.status)) << "\n";
  }
  if (f.band) {
    os << "\n# Signed step-time errors (predicted / measured - 1) of the rows, each predicted by a fit\n"
          "# that did not see it: the band of steps predicted with these factors.\n"
          "[band]\nscheme = " << quoted(f.band_scheme) << "\n" << format_band(*f.band);
  }
  return os.str();
}

costmodel::RegimeBands parse_error_bands(std::string_view text, const std::string& origin) {
  const toml::table root = detail::parse_toml_text(text, origin);
  const Doc doc{origin, {}, 0, false, ""};
  for (const auto& [k, node] : root) {
    (void)node;
    if (k.str() != "provenance" && k.str() != "band" && k.str() != "coverage") {
      fail(doc, k.source(), std::string(k.str()), "unknown table (expected provenance, band, coverage)");
    }
  }
  costmodel::RegimeBands out;
  if (const toml::table* t = detail::table_or_fail(doc, root, "provenance")) {
    const Section s{doc, "[provenance]", *t};
    check_keys(s, {"command", "commit", "sources"});
    out.command = get_string(s, "command", false);
    out.commit = get_string(s, "commit", false);
    if (const toml::node* src = t->get("sources")) {
      const toml::array* arr = src->as_array();
      if (arr == nullptr) fail(doc, src->source(), s.key("sources"), "expected an array of file names");
      for (const toml::node& f : *arr) {
        if (!f.is_string()) fail(doc, f.source(), s.key("sources"), "expected a string (a file name)");
        out.sources.emplace_back(f.as_string()->get());
      }
    }
  }
  auto regime = [&](const toml::key& k, const std::string& key) {
    const auto f = parallel::parse_framework(k.str());
    if (!f) fail(doc, k.source(), key, "unknown framework (expected megatron, deepspeed, fsdp, all)");
    return *f;
  };
  if (const toml::table* bands = detail::table_or_fail(doc, root, "band")) {
    for (const auto& [k, node] : *bands) {
      const std::string name = "[band." + std::string(k.str()) + "]";
      const toml::table* t = node.as_table();
      if (k.str() == "all") {
        if (t == nullptr) fail(doc, node.source(), name, "expected a table");
        out.pooled = load_band(Section{doc, name, *t}, {});
        continue;
      }
      const parallel::Framework g = regime(k, name);
      if (t == nullptr) fail(doc, node.source(), name, "expected a table");
      out.entries.push_back({g, load_band(Section{doc, name, *t}, {})});
    }
    std::stable_sort(out.entries.begin(), out.entries.end(),
                     [](const auto& a, const auto& b) { return a.framework < b.framework; });
  }
  if (const toml::node* cov = root.get("coverage")) {
    const toml::array* arr = cov->as_array();
    if (arr == nullptr) fail(doc, cov->source(), "[[coverage]]", "expected an array of tables");
    int i = 0;
    for (const toml::node& n : *arr) {
      const std::string name = "[[coverage]] #" + std::to_string(++i);
      const toml::table* t = n.as_table();
      if (t == nullptr) fail(doc, n.source(), name, "expected a table");
      const Section s{doc, name, *t};
      check_keys(s, {"file", "framework", "pooled", "rows", "band_rows", "inside", "low_error", "high_error"});
      costmodel::BandCoverage c;
      c.file = get_string(s, "file", true);
      const std::string fw = get_string(s, "framework", true);
      const auto g = parallel::parse_framework(fw);
      if (!g) fail(doc, t->get("framework")->source(), s.key("framework"), "unknown framework (expected megatron, deepspeed, fsdp)");
      c.framework = *g;
      if (const toml::node* p = t->get("pooled")) {
        if (!p->is_boolean()) fail(doc, p->source(), s.key("pooled"), "expected true or false");
        c.pooled = p->as_boolean()->get();
      }
      c.rows = static_cast<std::size_t>(get_int(s, "rows", true, 0, false));
      c.band.rows = static_cast<std::size_t>(get_int(s, "band_rows", true, 0, false));
      c.inside = static_cast<std::size_t>(get_int(s, "inside", true, 0, false));
      if (c.inside > c.rows) fail(doc, t->get("inside")->source(), s.key("inside"), "exceeds rows");
      if (c.band.available()) {
        c.band.low_error = get_error(s, "low_error");
        c.band.high_error = get_error(s, "high_error");
      }
      out.coverage.push_back(std::move(c));
    }
  }
  return out;
}

std::string format_error_bands(const costmodel::RegimeBands& b) {
  std::ostringstream os;
  os << "# Error bands of predicted step times (docs/accuracy.md, \"Error bands\"): per framework, the "
     << num(costmodel::kBandLowQuantile) << " and " << num(costmodel::kBandHighQuantile) << "\n"
     << "# quantiles of the signed errors (predicted / measured - 1) of the published step-time rows\n"
     << "# the model predicts to fit. Written by `make error-bands`; a test regenerates it and fails\n"
     << "# when it differs, so do not edit it.\n\n";
  os << "[provenance]\ncommand = " << quoted(b.command) << "\ncommit = " << quoted(b.commit) << "\nsources = [";
  for (std::size_t i = 0; i < b.sources.size(); ++i) os << (i == 0 ? "" : ", ") << quoted(b.sources[i]);
  os << "]\n";
  for (const auto& e : b.entries) {
    os << "\n[band." << parallel::to_string(e.framework) << "]\n" << format_band(e.band);
  }
  if (b.pooled.rows > 0) os << "\n[band.all]\n" << format_band(b.pooled);
  os << "\n# Leave one file out: each file's rows against the band of the other files' rows of the\n"
        "# same framework; `inside` of `rows` measured steps lie in it.\n";
  for (const auto& c : b.coverage) {
    os << "\n[[coverage]]\nfile = " << quoted(c.file) << "\nframework = " << quoted(parallel::to_string(c.framework))
       << (c.pooled ? "\npooled = true" : "")
       << "\nrows = " << c.rows << "\nband_rows = " << c.band.rows << "\ninside = " << c.inside << "\n";
    if (c.band.available()) os << "low_error = " << num(c.band.low_error) << "\nhigh_error = " << num(c.band.high_error) << "\n";
  }
  return os.str();
}

const costmodel::RegimeBands& builtin_error_bands() {
  static const costmodel::RegimeBands bands =
      parse_error_bands(detail::builtin_error_bands_text(), "data/error_bands.toml (built in)");
  return bands;
}

}  // namespace tetra::scenarios
