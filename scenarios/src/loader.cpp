#include "loader.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "tetra/costmodel/collective.hpp"
#include "tetra/hw/presets.hpp"
#include "tetra/hw/units.hpp"
#include "tetra/llama/presets.hpp"

namespace tetra::scenarios::detail {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Locations and errors

std::string key_name(const Doc& doc, std::string_view section, std::string_view key) {
  if (doc.bare_keys) return doc.key_prefix + std::string(key);
  std::string out = "[" + std::string(section) + "]";
  if (!key.empty()) out += "." + std::string(key);
  return out;
}

SourceLocation where(const Doc& doc, const toml::source_region& region) {
  if (region.begin.line > 0) {
    return SourceLocation{doc.file, static_cast<int>(region.begin.line),
                          static_cast<int>(region.begin.column)};
  }
  return SourceLocation{doc.file, doc.fixed_line, 0};
}

void fail(const Doc& doc, const toml::source_region& region, const std::string& key,
          const std::string& message) {
  throw UserError(where(doc, region), key, message);
}

const toml::table* table_or_fail(const Doc& doc, const toml::table& root, std::string_view name) {
  const toml::node* n = root.get(name);
  if (n == nullptr) return nullptr;
  const auto* t = n->as_table();
  if (t == nullptr) {
    fail(doc, n->source(), "[" + std::string(name) + "]",
         "expected a table ([" + std::string(name) + "]), got a value");
  }
  return t;
}

namespace {

constexpr std::uintmax_t kMaxFileBytes = 64ull * 1024 * 1024;

}  // namespace

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw UserError(SourceLocation{path}, "", "no such file");
  if (fs::is_directory(st)) throw UserError(SourceLocation{path}, "", "is a directory, not a file");
  const auto size = fs::file_size(path, ec);
  if (!ec && size > kMaxFileBytes) {
    throw UserError(SourceLocation{path}, "", "file is larger than 64 MiB");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(SourceLocation{path}, "", "cannot open the file for reading");
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) throw UserError(SourceLocation{path}, "", "read error");
  return buf.str();
}

namespace {

/// What a node is, for "expected X, got Y" messages.
std::string type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a number with a fraction";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "nothing";
  }
}

std::string join(const std::vector<std::string>& items, std::string_view sep = ", ") {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    out += items[i];
  }
  return out;
}

/// One table being read: remembers the document and the section name for messages.
struct Section {
  const Doc& doc;
  std::string name;  ///< "model", "cluster.gpu", ...
  const toml::table& table;

  [[nodiscard]] std::string key(std::string_view k) const { return key_name(doc, name, k); }

  [[noreturn]] void fail_at(const toml::node& node, std::string_view k, const std::string& msg) const {
    fail(doc, node.source(), key(k), msg);
  }

  /// Rejects keys not in `known`, reporting the first unknown key in file order.
  void check_keys(const std::vector<std::string_view>& known) const {
    const toml::key* worst = nullptr;
    for (auto&& [k, v] : table) {
      (void)v;
      if (std::find(known.begin(), known.end(), k.str()) != known.end()) continue;
      const auto& pos = k.source().begin;
      if (worst == nullptr || pos.line < worst->source().begin.line ||
          (pos.line == worst->source().begin.line && pos.column < worst->source().begin.column)) {
        worst = &k;
      }
    }
    if (worst == nullptr) return;
    std::vector<std::string> names;
    for (auto n : known) names.emplace_back(n);
    fail(doc, worst->source(), key(worst->str()),
         "unknown key (known keys: " + join(names) + ")");
  }

  [[nodiscard]] const toml::node* get(std::string_view k) const { return table.get(k); }

  [[nodiscard]] long long integer(const toml::node& node, std::string_view k, long long lo,
                                  long long hi) const {
    const auto* v = node.as_integer();
    if (v == nullptr) fail_at(node, k, "expected an integer, got " + type_name(node));
    const long long x = v->get();
    if (x < lo || x > hi) {
      fail_at(node, k, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                           ", got " + std::to_string(x));
    }
    return x;
  }

  [[nodiscard]] int int_value(const toml::node& node, std::string_view k, long long lo,
                              long long hi) const {
    return static_cast<int>(integer(node, k, lo, hi));
  }

  [[nodiscard]] bool boolean(const toml::node& node, std::string_view k) const {
    const auto* v = node.as_boolean();
    if (v == nullptr) fail_at(node, k, "expected true or false, got " + type_name(node));
    return v->get();
  }

  [[nodiscard]] double number(const toml::node& node, std::string_view k, double lo, double hi) const {
    double x = 0;
    if (const auto* f = node.as_floating_point()) {
      x = f->get();
    } else if (const auto* i = node.as_integer()) {
      x = static_cast<double>(i->get());
    } else {
      fail_at(node, k, "expected a number, got " + type_name(node));
    }
    if (!std::isfinite(x) || x < lo || x > hi) {
      std::ostringstream os;
      os << "must be a number between " << lo << " and " << hi << ", got " << x;
      fail_at(node, k, os.str());
    }
    return x;
  }

  [[nodiscard]] std::string string(const toml::node& node, std::string_view k) const {
    const auto* v = node.as_string();
    if (v == nullptr) fail_at(node, k, "expected a string, got " + type_name(node));
    return v->get();
  }

  /// A quantity with a unit ("80GiB"), parsed by one of the hw unit parsers; must be positive
  /// (or zero when allowed) and between `lo` and `hi` in base units.
  template <class Parser>
  [[nodiscard]] double quantity(const toml::node& node, std::string_view k, Parser parse,
                                std::string_view example, double hi, bool allow_zero = false,
                                double lo = 0) const {
    const auto* v = node.as_string();
    if (v == nullptr) {
      fail_at(node, k, "expected a string with a unit such as \"" + std::string(example) +
                           "\", got " + type_name(node));
    }
    double x = 0;
    try {
      x = parse(v->get());
    } catch (const std::exception& e) {
      fail_at(node, k, e.what());
    }
    if (!std::isfinite(x) || x < 0 || (x == 0 && !allow_zero)) {
      fail_at(node, k, std::string(allow_zero ? "must not be negative" : "must be greater than zero") +
                           ", got \"" + v->get() + "\"");
    }
    if (x > hi) fail_at(node, k, "\"" + v->get() + "\" is beyond any real hardware");
    if (x < lo) fail_at(node, k, "\"" + v->get() + "\" is too small for any real hardware");
    return x;
  }

  [[nodiscard]] const toml::table& subtable(const toml::node& node, std::string_view k) const {
    const auto* t = node.as_table();
    if (t == nullptr) fail_at(node, k, "expected a table, got " + type_name(node));
    return *t;
  }
};

// ---------------------------------------------------------------------------------------------
// Enumerations: names come from the owning library's to_string/parse_* pair.

template <class E>
std::vector<std::string> enum_names(std::initializer_list<E> values) {
  std::vector<std::string> out;
  for (E e : values) out.emplace_back(to_string(e));
  return out;
}

template <class E, class Parse>
E enum_value(const Section& s, const toml::node& node, std::string_view k, Parse parse,
             std::initializer_list<E> values) {
  const std::string text = s.string(node, k);
  const std::optional<E> e = parse(text);
  if (!e) {
    s.fail_at(node, k, "unknown value \"" + text + "\" (expected one of: " +
                           join(enum_names(values)) + ")");
  }
  return *e;
}

constexpr std::initializer_list<llama::Recompute> kRecompute{
    llama::Recompute::none, llama::Recompute::selective, llama::Recompute::full,
    llama::Recompute::selective_op, llama::Recompute::selective_layer};
constexpr std::initializer_list<llama::Schedule> kSchedule{
    llama::Schedule::gpipe, llama::Schedule::one_f_one_b, llama::Schedule::interleaved,
    llama::Schedule::zb_h1, llama::Schedule::layered};
constexpr std::initializer_list<llama::AttentionKernel> kAttention{
    llama::AttentionKernel::flash2, llama::AttentionKernel::flash3, llama::AttentionKernel::flash1,
    llama::AttentionKernel::cudnn, llama::AttentionKernel::fused, llama::AttentionKernel::torch};
constexpr std::initializer_list<llama::Precision> kPrecision{
    llama::Precision::bf16, llama::Precision::fp16, llama::Precision::fp32};
constexpr std::initializer_list<llama::Fp8Recipe> kFp8Recipe{
    llama::Fp8Recipe::delayed, llama::Fp8Recipe::current, llama::Fp8Recipe::blockwise,
    llama::Fp8Recipe::mxfp8, llama::Fp8Recipe::nvfp4, llama::Fp8Recipe::tensorwise,
    llama::Fp8Recipe::rowwise};
constexpr std::initializer_list<llama::Framework> kFramework{
    llama::Framework::megatron, llama::Framework::deepspeed, llama::Framework::fsdp};
constexpr std::initializer_list<llama::Optimizer> kOptimizer{llama::Optimizer::adam};
constexpr std::initializer_list<llama::MoeDispatcher> kDispatcher{
    llama::MoeDispatcher::alltoall, llama::MoeDispatcher::allgather, llama::MoeDispatcher::flex};
constexpr std::initializer_list<llama::FlexBackend> kFlexBackend{llama::FlexBackend::deepep,
                                                                  llama::FlexBackend::hybridep};
constexpr std::initializer_list<llama::Arch> kArch{llama::Arch::llama, llama::Arch::gpt, llama::Arch::gpt_oss};
constexpr std::initializer_list<hw::IntraKind> kIntraKind{
    hw::IntraKind::nvswitch, hw::IntraKind::nvlink_mesh, hw::IntraKind::pcie};

// Sanity bounds: far beyond any real model or cluster, small enough that products stay exact.
constexpr long long kMaxLayers = 100000;
constexpr long long kMaxWidth = 10'000'000;      // hidden, ffn_hidden
constexpr long long kMaxHeads = 100000;
constexpr long long kMaxVocab = 100'000'000;
constexpr long long kMaxNodes = 1'000'000;
constexpr long long kMaxGpusPerNode = 1024;
constexpr long long kMaxSms = 100000;
constexpr long long kMaxParallel = 1'000'000;    // tp, cp, pp, dp, vp
constexpr long long kMaxMbs = 1'000'000;
constexpr long long kMaxSeq = 100'000'000;
constexpr long long kMaxBatch = 1'000'000'000;
constexpr double kMaxBytes = 1e15;               // 1 PB of memory on one GPU
constexpr double kMinGpuBytes = 1024.0 * 1024.0; // 1 MiB: less cannot hold one layer
constexpr double kMaxBandwidth = 1e16;           // 10 PB/s
constexpr double kMaxPowerW = 1e5;
constexpr double kMaxFlops = 1e19;               // 10 EFLOP/s
constexpr double kMaxLatency = 10.0;             // seconds

std::string preset_names_models() {
  std::vector<std::string> names;
  for (const auto& m : llama::model_presets()) names.push_back(m.name);
  return join(names);
}
std::string preset_names_clusters() {
  std::vector<std::string> names;
  for (const auto& c : hw::cluster_presets()) names.push_back(c.name);
  return join(names);
}
std::string preset_names_gpus() {
  std::vector<std::string> names;
  for (const auto& g : hw::gpu_presets()) names.push_back(g.name);
  return join(names);
}

void record(KeyOrigins& origins, const Section& s, std::string_view k, const toml::node& node) {
  origins.insert_or_assign(std::string(k), KeyOrigin{where(s.doc, node.source()), s.key(k)});
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Parsing

toml::table parse_toml_text(std::string_view text, const std::string& origin) {
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    const auto& pos = e.source().begin;
    throw UserError(SourceLocation{origin, static_cast<int>(pos.line), static_cast<int>(pos.column)},
                    "", std::string(e.description()));
  }
}

toml::table parse_toml_file(const std::string& path) {
  return parse_toml_text(read_text_file(path), path);
}

toml::table parse_key_values(std::string_view text, char separator, const Doc& doc) {
  toml::table out;
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  const SourceLocation loc{doc.file, doc.fixed_line, 0};
  if (trim(text).empty()) return out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(separator, start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = trim(text.substr(start, end - start));
    start = end + 1;
    if (item.empty()) {
      throw UserError(loc, doc.key_prefix.empty() ? "" : doc.key_prefix.substr(0, doc.key_prefix.find(':')),
                      std::string("empty entry (expected key=value") + separator + "key=value)");
    }
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      throw UserError(loc, doc.key_prefix + std::string(item), "expected key=value");
    }
    const std::string key(trim(item.substr(0, eq)));
    const std::string value(trim(item.substr(eq + 1)));
    if (key.empty()) throw UserError(loc, "", "empty key in \"" + std::string(item) + "\"");
    if (out.contains(key)) throw UserError(loc, doc.key_prefix + key, "given twice");
    if (value.empty()) throw UserError(loc, doc.key_prefix + key, "empty value");
    if (value == "true" || value == "false") {
      out.insert(key, value == "true");
      continue;
    }
    long long i = 0;
    const char* b = value.data();
    const char* e = value.data() + value.size();
    const char* ib = (*b == '+') ? b + 1 : b;
    if (auto r = std::from_chars(ib, e, i); r.ptr == e) {
      if (r.ec != std::errc{}) {
        throw UserError(loc, doc.key_prefix + key, "integer " + value + " is out of range");
      }
      out.insert(key, static_cast<std::int64_t>(i));
      continue;
    }
    double d = 0;
    if (auto r = std::from_chars(ib, e, d); r.ec == std::errc{} && r.ptr == e && std::isfinite(d)) {
      out.insert(key, d);
      continue;
    }
    out.insert(key, value);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// [model]

namespace {

/// The MoE, MLA, head_dim and mtp_layers keys of [model] (llama/moe.hpp), over what a preset
/// or hf_config gave. num_experts makes a model MoE; the other MoE keys need it.
template <class Blame>
void load_moe_keys(const Section& s, llama::Model& m, Blame blame) {
  if (const auto* n = s.get("head_dim")) m.head_dim_override = s.int_value(*n, "head_dim", 1, kMaxWidth);
  if (const auto* n = s.get("mtp_layers")) m.mtp_layers = s.int_value(*n, "mtp_layers", 0, kMaxLayers);

  static constexpr std::string_view kMoeKeys[] = {
      "experts_per_token", "moe_ffn_hidden",  "shared_experts", "shared_ffn_hidden",
      "first_k_dense",     "moe_layer_freq",  "interleave_moe_layer_step", "moe_router"};
  if (const auto* n = s.get("num_experts")) {
    if (!m.moe) m.moe = llama::Moe{};
    m.moe->num_experts = s.int_value(*n, "num_experts", 1, kMaxWidth);
  }
  for (std::string_view k : kMoeKeys) {
    const toml::node* n = s.get(k);
    if (n == nullptr) continue;
    if (!m.moe) s.fail_at(*n, k, "needs num_experts (a MoE model)");
    llama::Moe& e = *m.moe;
    if (k == "experts_per_token") e.experts_per_token = s.int_value(*n, k, 1, kMaxWidth);
    else if (k == "moe_ffn_hidden") e.moe_ffn_hidden = s.int_value(*n, k, 1, kMaxWidth);
    else if (k == "shared_experts") e.shared_experts = s.int_value(*n, k, 0, kMaxWidth);
    else if (k == "shared_ffn_hidden") e.shared_ffn_hidden = s.int_value(*n, k, 0, kMaxWidth);
    else if (k == "first_k_dense") e.first_k_dense = s.int_value(*n, k, 0, kMaxLayers);
    else if (k == "moe_layer_freq") e.moe_layer_freq = s.int_value(*n, k, 1, kMaxLayers);
    else if (k == "interleave_moe_layer_step") e.interleave_step = s.int_value(*n, k, 1, kMaxLayers);
    else if (k == "moe_router") {
      const std::string name = s.string(*n, k);
      const auto r = llama::parse_router(name);
      if (!r) {
        s.fail_at(*n, k, "unknown value \"" + name +
                             "\" (expected one of: softmax_topk, topk_softmax, sigmoid_topk)");
      }
      e.router = *r;
    }
  }
  if (m.moe) {
    const llama::Moe& e = *m.moe;
    if (e.experts_per_token < 1) {
      s.fail_at(blame("num_experts"), "experts_per_token", "missing (required with num_experts)");
    }
    if (e.moe_ffn_hidden < 1) {
      s.fail_at(blame("num_experts"), "moe_ffn_hidden", "missing (required with num_experts)");
    }
    if (e.experts_per_token > e.num_experts) {
      s.fail_at(blame("experts_per_token"), "experts_per_token",
                "experts_per_token (" + std::to_string(e.experts_per_token) +
                    ") must not exceed num_experts (" + std::to_string(e.num_experts) + ")");
    }
    if (e.first_k_dense >= m.layers) {
      s.fail_at(blame("first_k_dense"), "first_k_dense",
                "first_k_dense (" + std::to_string(e.first_k_dense) +
                    ") leaves no MoE layer among the " + std::to_string(m.layers) + " layers");
    }
  }

  static constexpr std::string_view kMlaKeys[] = {"kv_lora_rank", "qk_nope_head_dim",
                                                  "qk_rope_head_dim", "v_head_dim"};
  const bool any_mla = s.get("q_lora_rank") != nullptr ||
                       std::any_of(std::begin(kMlaKeys), std::end(kMlaKeys),
                                   [&](std::string_view k) { return s.get(k) != nullptr; });
  if (any_mla) {
    llama::Mla a = m.mla.value_or(llama::Mla{});
    if (const auto* n = s.get("q_lora_rank")) a.q_lora_rank = s.int_value(*n, "q_lora_rank", 0, kMaxWidth);
    if (const auto* n = s.get("kv_lora_rank")) a.kv_lora_rank = s.int_value(*n, "kv_lora_rank", 1, kMaxWidth);
    if (const auto* n = s.get("qk_nope_head_dim")) a.qk_nope_head_dim = s.int_value(*n, "qk_nope_head_dim", 1, kMaxWidth);
    if (const auto* n = s.get("qk_rope_head_dim")) a.qk_rope_head_dim = s.int_value(*n, "qk_rope_head_dim", 1, kMaxWidth);
    if (const auto* n = s.get("v_head_dim")) a.v_head_dim = s.int_value(*n, "v_head_dim", 1, kMaxWidth);
    const int widths[] = {a.kv_lora_rank, a.qk_nope_head_dim, a.qk_rope_head_dim, a.v_head_dim};
    for (std::size_t i = 0; i < std::size(kMlaKeys); ++i) {
      if (widths[i] < 1) {
        const std::string_view given = s.get("q_lora_rank") ? "q_lora_rank" : "kv_lora_rank";
        s.fail_at(blame(given), kMlaKeys[i],
                  "missing (MLA needs kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim)");
      }
    }
    m.mla = a;
  }
}

}  // namespace

llama::Model load_model(const Doc& doc, const toml::table& table) {
  const Section s{doc, "model", table};
  s.check_keys({"preset", "hf_config", "arch", "layers", "hidden", "ffn_hidden", "heads",
                "kv_heads", "vocab", "tied_embeddings", "head_dim", "mtp_layers",
                // MoE (llama/moe.hpp)
                "num_experts", "experts_per_token", "moe_ffn_hidden", "shared_experts",
                "shared_ffn_hidden", "first_k_dense", "moe_layer_freq",
                "interleave_moe_layer_step", "moe_router",
                // MLA (llama/moe.hpp)
                "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                "v_head_dim"});
  llama::Model m;
  m.name = "custom";
  bool base = false;
  const toml::node* preset = s.get("preset");
  const toml::node* hf = s.get("hf_config");
  if (preset != nullptr && hf != nullptr) {
    s.fail_at(*hf, "hf_config", "give either preset or hf_config, not both");
  }
  if (preset != nullptr) {
    const std::string name = s.string(*preset, "preset");
    const auto found = llama::find_model_preset(name);
    if (!found) {
      s.fail_at(*preset, "preset",
                "unknown model preset \"" + name + "\" (built-ins: " + preset_names_models() + ")");
    }
    m = *found;
    base = true;
  }
  if (hf != nullptr) {
    const std::string rel = s.string(*hf, "hf_config");
    if (rel.empty()) s.fail_at(*hf, "hf_config", "empty path");
    const fs::path p = fs::path(rel).is_absolute() ? fs::path(rel) : doc.dir / rel;
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) {
      s.fail_at(*hf, "hf_config", "cannot read \"" + p.generic_string() + "\": no such file");
    }
    m = llama::model_from_hf_config(p.generic_string());
    base = true;
  }
  // Explicit keys, beside a preset or alone.
  if (const auto* n = s.get("arch")) {
    m.arch = enum_value(s, *n, "arch", llama::parse_arch, kArch);
  }
  struct IntKey {
    std::string_view key;
    int* field;
    long long hi;
  };
  const IntKey ints[] = {{"layers", &m.layers, kMaxLayers},   {"hidden", &m.hidden, kMaxWidth},
                         {"ffn_hidden", &m.ffn_hidden, kMaxWidth}, {"heads", &m.heads, kMaxHeads},
                         {"kv_heads", &m.kv_heads, kMaxHeads}, {"vocab", &m.vocab, kMaxVocab}};
  for (const auto& ik : ints) {
    if (const auto* n = s.get(ik.key)) *ik.field = s.int_value(*n, ik.key, 1, ik.hi);
  }
  if (const auto* n = s.get("tied_embeddings")) m.tied_embeddings = s.boolean(*n, "tied_embeddings");
  if (!base) {
    for (const auto& ik : ints) {
      if (ik.key == "kv_heads") continue;
      if (s.get(ik.key) == nullptr) {
        fail(doc, table.source(), s.key(""),
             "missing key '" + std::string(ik.key) +
                 "' (give preset = \"name\", hf_config = \"config.json\", or every shape key)");
      }
    }
    if (s.get("kv_heads") == nullptr) m.kv_heads = m.heads;
  }
  // Shape consistency.
  auto blame = [&](std::string_view k) -> const toml::node& {
    if (const auto* n = s.get(k)) return *n;
    return table;
  };
  load_moe_keys(s, m, blame);
  // An explicit head_dim (Qwen3) or MLA's own head widths free hidden from heads * head_dim.
  if (m.head_dim_override == 0 && !m.mla && m.hidden % m.heads != 0) {
    s.fail_at(blame("heads"), "heads",
              "hidden (" + std::to_string(m.hidden) + ") must be divisible by heads (" +
                  std::to_string(m.heads) + ")");
  }
  if (m.kv_heads > m.heads || m.heads % m.kv_heads != 0) {
    s.fail_at(blame("kv_heads"), "kv_heads",
              "heads (" + std::to_string(m.heads) + ") must be a multiple of kv_heads (" +
                  std::to_string(m.kv_heads) + ")");
  }
  return m;
}

// ---------------------------------------------------------------------------------------------
// [cluster]

hw::Cluster load_cluster(const Doc& doc, const toml::table& table) {
  const Section s{doc, "cluster", table};
  s.check_keys({"preset", "gpus_per_node", "nodes", "profile", "gpu", "intra_node", "inter_node"});
  hw::Cluster c;
  c.name = "custom";
  c.gpu = hw::Gpu{};
  c.intra = hw::IntraNode{};
  c.inter = hw::InterNode{};
  bool base = false;
  if (const auto* n = s.get("preset")) {
    const std::string name = s.string(*n, "preset");
    const auto found = hw::find_cluster_preset(name);
    if (!found) {
      s.fail_at(*n, "preset",
                "unknown cluster preset \"" + name + "\" (built-ins: " + preset_names_clusters() + ")");
    }
    c = *found;
    base = true;
  }
  if (const auto* n = s.get("gpus_per_node")) {
    c.gpus_per_node = s.int_value(*n, "gpus_per_node", 1, kMaxGpusPerNode);
  }
  if (const auto* n = s.get("nodes")) c.nodes = s.int_value(*n, "nodes", 1, kMaxNodes);
  if (const auto* n = s.get("profile")) {
    const std::string rel = s.string(*n, "profile");
    if (rel.empty()) s.fail_at(*n, "profile", "empty path");
    c.profile_path = (fs::path(rel).is_absolute() ? fs::path(rel) : doc.dir / rel).generic_string();
  }

  // [cluster.gpu]
  const toml::source_region* gpu_region = &table.source();
  if (const auto* n = s.get("gpu")) {
    const Section g{doc, "cluster.gpu", s.subtable(*n, "gpu")};
    gpu_region = &g.table.source();
    g.check_keys({"preset", "memory", "bf16_peak", "fp8_peak", "fp4_peak", "hbm_bandwidth", "sms",
                  "rated_power", "power_limit"});
    if (const auto* p = g.get("preset")) {
      const std::string name = g.string(*p, "preset");
      const auto found = hw::find_gpu_preset(name);
      if (!found) {
        g.fail_at(*p, "preset",
                  "unknown GPU preset \"" + name + "\" (built-ins: " + preset_names_gpus() + ")");
      }
      c.gpu = *found;
    }
    if (const auto* v = g.get("memory")) {
      c.gpu.memory_bytes =
          g.quantity(*v, "memory", hw::parse_bytes, "80GiB", kMaxBytes, false, kMinGpuBytes);
    }
    if (const auto* v = g.get("bf16_peak")) {
      c.gpu.bf16_peak_flops = g.quantity(*v, "bf16_peak", hw::parse_flop_rate, "989TFLOP/s", kMaxFlops);
    }
    if (const auto* v = g.get("fp8_peak")) {
      c.gpu.fp8_peak_flops = g.quantity(*v, "fp8_peak", hw::parse_flop_rate, "1979TFLOP/s", kMaxFlops);
    }
    if (const auto* v = g.get("fp4_peak")) {
      c.gpu.fp4_peak_flops = g.quantity(*v, "fp4_peak", hw::parse_flop_rate, "9000TFLOP/s", kMaxFlops);
    }
    if (const auto* v = g.get("hbm_bandwidth")) {
      c.gpu.hbm_bandwidth_Bps =
          g.quantity(*v, "hbm_bandwidth", hw::parse_bandwidth, "3.35TB/s", kMaxBandwidth);
    }
    if (const auto* v = g.get("sms")) c.gpu.sms = g.int_value(*v, "sms", 1, kMaxSms);
    if (const auto* v = g.get("rated_power")) {
      c.gpu.rated_power_w = g.quantity(*v, "rated_power", hw::parse_power, "700W", kMaxPowerW);
    }
    if (const auto* v = g.get("power_limit")) {
      c.gpu.power_limit_w = g.quantity(*v, "power_limit", hw::parse_power, "500W", kMaxPowerW);
      if (c.gpu.rated_power_w <= 0) {
        g.fail_at(*v, "power_limit", "needs the GPU's rated_power (a preset GPU has one)");
      }
    }
  }
  if (c.gpu.name.empty()) c.gpu.name = "custom";

  // [cluster.intra_node]
  const toml::source_region* intra_region = &table.source();
  const toml::node* domain_node = nullptr;
  if (const auto* n = s.get("intra_node")) {
    const Section g{doc, "cluster.intra_node", s.subtable(*n, "intra_node")};
    intra_region = &g.table.source();
    g.check_keys({"kind", "bandwidth", "latency", "nvls", "domain"});
    if (const auto* v = g.get("kind")) c.intra.kind = enum_value(g, *v, "kind", hw::parse_intra_kind, kIntraKind);
    if (const auto* v = g.get("bandwidth")) {
      c.intra.bandwidth_Bps = g.quantity(*v, "bandwidth", hw::parse_bandwidth, "450GB/s", kMaxBandwidth);
    }
    if (const auto* v = g.get("latency")) {
      c.intra.latency_s = g.quantity(*v, "latency", hw::parse_duration, "1us", kMaxLatency, true);
    }
    if (const auto* v = g.get("nvls")) c.intra.nvls = g.boolean(*v, "nvls");
    if (const auto* v = g.get("domain")) {
      domain_node = v;
      c.intra.domain_gpus = g.int_value(*v, "domain", 1, kMaxGpusPerNode);
    }
  }

  // [cluster.inter_node]
  const toml::source_region* inter_region = &table.source();
  if (const auto* n = s.get("inter_node")) {
    const Section g{doc, "cluster.inter_node", s.subtable(*n, "inter_node")};
    inter_region = &g.table.source();
    g.check_keys({"nics_per_node", "nic_bandwidth", "latency"});
    if (const auto* v = g.get("nics_per_node")) {
      c.inter.nics_per_node = g.int_value(*v, "nics_per_node", 1, kMaxGpusPerNode);
    }
    if (const auto* v = g.get("nic_bandwidth")) {
      c.inter.nic_bandwidth_Bps =
          g.quantity(*v, "nic_bandwidth", hw::parse_bandwidth, "400Gb/s", kMaxBandwidth);
    }
    if (const auto* v = g.get("latency")) {
      c.inter.latency_s = g.quantity(*v, "latency", hw::parse_duration, "5us", kMaxLatency, true);
    }
  }

  // Without presets every number must be given.
  auto need = [&](bool ok, const toml::source_region& region, std::string_view section,
                  std::string_view key, std::string_view example) {
    if (ok) return;
    fail(doc, region, key_name(doc, section, key),
         "missing (give a preset or the value, e.g. " + std::string(key) + " = " +
             std::string(example) + ")");
  };
  need(c.gpu.memory_bytes > 0, *gpu_region, "cluster.gpu", "memory", "\"80GiB\"");
  need(c.gpu.bf16_peak_flops > 0, *gpu_region, "cluster.gpu", "bf16_peak", "\"989TFLOP/s\"");
  need(c.gpu.hbm_bandwidth_Bps > 0, *gpu_region, "cluster.gpu", "hbm_bandwidth", "\"3.35TB/s\"");
  need(c.gpu.sms > 0, *gpu_region, "cluster.gpu", "sms", "132");
  if (c.gpus_per_node > 1) {
    need(c.intra.bandwidth_Bps > 0, *intra_region, "cluster.intra_node", "bandwidth", "\"450GB/s\"");
  }
  if (c.nodes > 1) {
    need(c.inter.nics_per_node > 0, *inter_region, "cluster.inter_node", "nics_per_node", "8");
    need(c.inter.nic_bandwidth_Bps > 0, *inter_region, "cluster.inter_node", "nic_bandwidth",
         "\"400Gb/s\"");
  }
  if (auto bad = hw::domain_problem(c)) {
    // A preset's domain with the user's node count: the line of `nodes` (or of the table).
    const toml::source_region& at = domain_node != nullptr   ? domain_node->source()
                                    : s.get("nodes") != nullptr ? s.get("nodes")->source()
                                                                : table.source();
    fail(doc, at, domain_node != nullptr ? key_name(doc, "cluster.intra_node", "domain") : key_name(doc, "cluster", "nodes"),
         *bad);
  }
  (void)base;
  return c;
}

// ---------------------------------------------------------------------------------------------
// [training], [layout]

const std::vector<std::string_view>& training_keys() {
  static const std::vector<std::string_view> keys{
      "seq_len",   "global_batch",  "precision",      "grad_dtype",          "optimizer", "zero_stage",
      "attention", "fused_rmsnorm", "overlap_grad_reduce", "overlap_param_gather", "framework",
      "fp8_recipe", "fp8_param_gather", "tp_comm_overlap", "expandable_segments", "compile", "async_tp",
      "compile_loss", "reshard_after_forward", "moe_capacity_factor", "moe_pad_to_capacity", "moe_routing_imbalance",
      "moe_a2a_overlap", "cuda_graph", "adam_moments_dtype",
      "avoid_record_streams", "fused_cross_entropy"};
  return keys;
}

const std::vector<std::string_view>& layout_keys() {
  static const std::vector<std::string_view> keys{
      "tp",        "cp",       "pp",         "dp",         "vp",
      "mbs",       "sp",       "recompute",  "schedule",   "rank_order",
      "first_stage_layers", "last_stage_layers",
      "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split",
      "dp_shard", "dp_replicate", "ac_freq", "ep", "etp", "moe_token_dispatcher", "moe_flex_backend",
      "recompute_modules", "offload_layers"};
  return keys;
}

namespace {

/// A TOML array of names, or one string of them joined by '+' (the form of --layout and of a
/// measurement row's options), as the '+'-joined string.
std::string plus_joined(const Section& s, const toml::node& n, std::string_view k) {
  const auto* arr = n.as_array();
  if (arr == nullptr) return s.string(n, k);
  std::string text;
  for (const toml::node& el : *arr) {
    if (!text.empty()) text += '+';
    text += s.string(el, k);
  }
  return text;
}

void set_training_key(const Section& s, std::string_view k, const toml::node& n, llama::Training& t) {
  if (k == "seq_len") {
    t.seq_len = s.int_value(n, k, 1, kMaxSeq);
  } else if (k == "global_batch") {
    t.global_batch = s.int_value(n, k, 1, kMaxBatch);
  } else if (k == "precision") {
    // "fp8": bf16 weights and activations with FP8 linears (llama/fp8.hpp), delayed scaling
    // unless fp8_recipe names another recipe.
    if (s.string(n, k) == "fp8") {
      t.precision = llama::Precision::bf16;
      if (!t.fp8.enabled()) t.fp8.recipe = llama::Fp8Recipe::delayed;
    } else {
      const auto p = llama::parse_precision(s.string(n, k));
      if (!p) {
        s.fail_at(n, k, "unknown value \"" + s.string(n, k) + "\" (expected one of: " +
                            join(enum_names(kPrecision)) + ", fp8)");
      }
      t.precision = *p;
      t.fp8.recipe = llama::Fp8Recipe::none;
    }
  } else if (k == "fp8_recipe") {
    const toml::node* p = s.get("precision");
    if (p != nullptr && p->value<std::string>() != std::optional<std::string>("fp8")) {
      s.fail_at(n, k, "needs precision = \"fp8\" in the same table");
    }
    t.fp8.recipe = enum_value(s, n, k, llama::parse_fp8_recipe, kFp8Recipe);
  } else if (k == "fp8_param_gather") {
    t.fp8.param_gather = s.boolean(n, k);
  } else if (k == "tp_comm_overlap") {
    t.tp_comm_overlap = s.boolean(n, k);
  } else if (k == "expandable_segments") {
    t.expandable_segments = s.boolean(n, k);
  } else if (k == "fused_cross_entropy") {
    t.fused_cross_entropy = s.boolean(n, k);
  } else if (k == "avoid_record_streams") {
    t.avoid_record_streams = s.boolean(n, k);
  } else if (k == "compile") {
    t.torch.compile = s.boolean(n, k);
  } else if (k == "async_tp") {
    t.torch.async_tp = s.boolean(n, k);
  } else if (k == "compile_loss") {
    t.torch.compile_loss = s.boolean(n, k);
  } else if (k == "reshard_after_forward") {
    // FSDP2 spelling: true, false or the size of the groups the parameters reshard over.
    if (n.is_boolean()) {
      t.torch.reshard_after_forward = s.boolean(n, k) ? llama::TorchNative::kReshardFull : 1;
    } else {
      t.torch.reshard_after_forward = s.int_value(n, k, 1, kMaxParallel);
    }
  } else if (k == "grad_dtype") {
    t.grad_dtype = enum_value(s, n, k, llama::parse_precision, kPrecision);
  } else if (k == "adam_moments_dtype") {
    t.adam_moments_dtype = enum_value(s, n, k, llama::parse_precision, kPrecision);
    if (t.adam_moments_dtype == llama::Precision::fp16) {
      s.fail_at(n, k, "Megatron-Core keeps Adam's moments in fp32 or bf16 (got \"fp16\")");
    }
  } else if (k == "optimizer") {
    t.optimizer = enum_value(s, n, k, llama::parse_optimizer, kOptimizer);
  } else if (k == "zero_stage") {
    t.zero_stage = s.int_value(n, k, 0, 3);
  } else if (k == "attention") {
    t.attention = enum_value(s, n, k, llama::parse_attention, kAttention);
  } else if (k == "fused_rmsnorm") {
    t.fused_rmsnorm = s.boolean(n, k);
  } else if (k == "overlap_grad_reduce") {
    t.overlap_grad_reduce = s.boolean(n, k);
  } else if (k == "overlap_param_gather") {
    t.overlap_param_gather = s.boolean(n, k);
  } else if (k == "framework") {
    t.framework = enum_value(s, n, k, llama::parse_framework, kFramework);
  } else if (k == "moe_capacity_factor") {
    // Megatron-Core `moe_expert_capacity_factor`: > 0; absent = dropless.
    t.moe_capacity_factor = s.number(n, k, 1e-3, 1e3);
  } else if (k == "moe_pad_to_capacity") {
    // Megatron-Core `moe_pad_expert_input_to_capacity`.
    t.moe_pad_to_capacity = s.boolean(n, k);
  } else if (k == "moe_routing_imbalance") {
    t.moe_imbalance = s.number(n, k, 1.0, 1e3);
  } else if (k == "moe_a2a_overlap") {
    t.moe_a2a_overlap = s.boolean(n, k);
  } else if (k == "cuda_graph") {
    const llama::CudaGraphsParse parsed = llama::parse_cuda_graphs(plus_joined(s, n, k));
    if (!parsed.unknown.empty()) {
      s.fail_at(n, k, "unknown scope \"" + parsed.unknown + "\" (expected none or some of: " +
                          llama::cuda_graph_scope_names() + ", joined by '+')");
    }
    t.cuda_graphs = parsed.graphs;
  }
}

void set_layout_key(const Section& s, std::string_view k, const toml::node& n, llama::Layout& l) {
  if (k == "tp") {
    l.tp = s.int_value(n, k, 1, kMaxParallel);
  } else if (k == "cp") {
    l.cp = s.int_value(n, k, 1, kMaxParallel);
  } else if (k == "pp") {
    l.pp = s.int_value(n, k, 1, kMaxParallel);
  } else if (k == "dp") {
    l.dp = s.int_value(n, k, 1, kMaxParallel);
  } else if (k == "dp_shard") {
    l.dp_shard = s.int_value(n, k, 1, kMaxParallel);
  } else if (k == "dp_replicate") {
    l.dp_replicate = s.int_value(n, k, 1, kMaxParallel);
  } else if (k == "vp") {
    l.vp = s.int_value(n, k, 1, kMaxParallel);
  } else if (k == "mbs") {
    l.mbs = s.int_value(n, k, 1, kMaxMbs);
  } else if (k == "sp") {
    l.sp = s.boolean(n, k);
  } else if (k == "recompute") {
    l.recompute = enum_value(s, n, k, llama::parse_recompute, kRecompute);
  } else if (k == "ac_freq") {
    l.ac_freq = s.int_value(n, k, 1, kMaxLayers);
  } else if (k == "offload_layers") {
    l.offload_layers = s.int_value(n, k, 0, kMaxLayers);
  } else if (k == "schedule") {
    l.schedule = enum_value(s, n, k, llama::parse_schedule, kSchedule);
  } else if (k == "rank_order") {
    const std::string order = s.string(n, k);
    if (const std::string why = rank_order_problem(order); !why.empty()) s.fail_at(n, k, why);
    l.rank_order = order;
  } else if (k == "first_stage_layers") {
    l.first_stage_layers = s.int_value(n, k, 1, kMaxLayers);
  } else if (k == "last_stage_layers") {
    l.last_stage_layers = s.int_value(n, k, 1, kMaxLayers);
  } else if (k == "account_for_embedding_in_pipeline_split") {
    l.embedding_in_split = s.boolean(n, k);
  } else if (k == "account_for_loss_in_pipeline_split") {
    l.loss_in_split = s.boolean(n, k);
  } else if (k == "ep") {
    l.ep = s.int_value(n, k, 1, kMaxParallel);
  } else if (k == "etp") {
    l.etp = s.int_value(n, k, 1, kMaxParallel);
  } else if (k == "moe_token_dispatcher") {
    l.moe_dispatcher = enum_value(s, n, k, llama::parse_moe_dispatcher, kDispatcher);
  } else if (k == "moe_flex_backend") {
    l.moe_flex_backend = enum_value(s, n, k, llama::parse_flex_backend, kFlexBackend);
  } else if (k == "recompute_modules") {
    // An empty array is Megatron-Core's default list, core attention.
    const std::string text = plus_joined(s, n, k);
    l.recompute_modules = {};
    if (text.empty()) return;
    const llama::RecomputeModulesParse parsed = llama::parse_recompute_modules(text);
    if (!parsed.unknown.empty()) {
      s.fail_at(n, k, "unknown module \"" + parsed.unknown + "\" (expected some of: " +
                          llama::recompute_module_names() + ", joined by '+')");
    }
    l.recompute_modules = parsed.modules;
  }
}

bool is_in(const std::vector<std::string_view>& keys, std::string_view k) {
  return std::find(keys.begin(), keys.end(), k) != keys.end();
}

}  // namespace

void apply_training(const Doc& doc, const toml::table& table, llama::Training& training,
                    KeyOrigins& origins) {
  const Section s{doc, "training", table};
  s.check_keys(training_keys());
  for (auto k : training_keys()) {
    if (const auto* n = s.get(k)) {
      set_training_key(s, k, *n, training);
      record(origins, s, k, *n);
    }
  }
}

void apply_layout(const Doc& doc, const toml::table& table, llama::Layout& layout,
                  KeyOrigins& origins) {
  const Section s{doc, "layout", table};
  s.check_keys(layout_keys());
  for (auto k : layout_keys()) {
    if (const auto* n = s.get(k)) {
      set_layout_key(s, k, *n, layout);
      record(origins, s, k, *n);
    }
  }
}

void apply_option(const Doc& doc, const toml::table& table, llama::Training& training,
                  llama::Layout& layout, KeyOrigins& origins) {
  std::vector<std::string_view> known = training_keys();
  known.insert(known.end(), layout_keys().begin(), layout_keys().end());
  const Section s{doc, "options", table};
  s.check_keys(known);
  for (auto&& [key, node] : table) {
    const std::string_view k = key.str();
    if (is_in(training_keys(), k)) {
      set_training_key(s, k, node, training);
    } else {
      set_layout_key(s, k, node, layout);
    }
    record(origins, s, k, node);
  }
}

std::optional<llama::LayoutIssue> check_precision(const hw::Gpu& gpu, const llama::Training& training,
                                                 const KeyOrigins& origins) {
  const bool recipe_given = origins.find("fp8_recipe") != origins.end();
  if (training.fp8.param_gather && !training.fp8.enabled()) {
    return llama::LayoutIssue{"fp8_param_gather", "fp8-needs-fp8", "needs precision = \"fp8\""};
  }
  if (std::string why = llama::recipe_problem(training.fp8.recipe, gpu); !why.empty()) {
    return llama::LayoutIssue{recipe_given ? "fp8_recipe" : "precision", "fp8-recipe-gpu", std::move(why)};
  }
  return std::nullopt;
}

std::string rank_order_problem(std::string_view order) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t dash = order.find('-', start);
    parts.emplace_back(order.substr(start, dash == std::string_view::npos ? dash : dash - start));
    if (dash == std::string_view::npos) break;
    start = dash + 1;
  }
  std::set<std::string> seen(parts.begin(), parts.end());
  const std::set<std::string> want{"cp", "dp", "pp", "tp"};
  if (parts.size() != 4 || seen != want) {
    return "\"" + std::string(order) +
           "\" must name tp, cp, dp and pp once each, joined by '-', innermost first (e.g. "
           "\"tp-cp-dp-pp\")";
  }
  return {};
}

namespace {

/// Megatron-Core's pipeline split with the embedding and / or the loss counted as a layer
/// (`megatron/core/transformer/transformer_block.py` get_num_layers_to_build): the
/// layers plus one per counted end split evenly into pp·vp virtual stages of k, and the first
/// (last) virtual stage builds k − 1 transformer layers. As first/last_stage_layers: the end
/// rank holds vp·k − 1 layers, k in each chunk but the outermost.
std::optional<llama::LayoutIssue> resolve_split_accounting(const llama::Model& model,
                                                           llama::Layout& layout) {
  const int ends = (layout.embedding_in_split ? 1 : 0) + (layout.loss_in_split ? 1 : 0);
  if (ends == 0 || layout.pp < 2) return std::nullopt;
  const std::string key = layout.embedding_in_split ? "account_for_embedding_in_pipeline_split"
                                                    : "account_for_loss_in_pipeline_split";
  if (layout.first_stage_layers > 0 || layout.last_stage_layers > 0) {
    return llama::LayoutIssue{key, "split-accounting",
                              "cannot be combined with first_stage_layers/last_stage_layers"};
  }
  const long long chunks = static_cast<long long>(layout.pp) * std::max(layout.vp, 1);
  const long long total = static_cast<long long>(model.layers) + ends;
  if (total % chunks != 0) {
    return llama::LayoutIssue{
        key, "split-accounting",
        "layers=" + std::to_string(model.layers) + " plus " + std::to_string(ends) +
            " counted end(s) = " + std::to_string(total) + " must split evenly into pp*vp = " +
            std::to_string(chunks) + " virtual stages"};
  }
  const long long rank_layers = (total / chunks) * std::max(layout.vp, 1) - 1;
  if (layout.embedding_in_split) layout.first_stage_layers = static_cast<int>(rank_layers);
  if (layout.loss_in_split) layout.last_stage_layers = static_cast<int>(rank_layers);
  layout.embedding_in_split = layout.loss_in_split = false;
  return std::nullopt;
}

}  // namespace

std::optional<llama::LayoutIssue> resolve_layout(const llama::Model& model, long long world,
                                                 int nvlink_domain, const llama::Training& training,
                                                 llama::Layout& layout, bool dp_given) {
  if (!dp_given) {
    const long long inner = static_cast<long long>(layout.tp) * layout.cp * layout.pp;
    if (inner <= 0 || world % inner != 0) {
      return llama::LayoutIssue{
          "", "world-size",
          "tp*cp*pp = " + std::to_string(layout.tp) + "*" + std::to_string(layout.cp) + "*" +
              std::to_string(layout.pp) + " = " + std::to_string(inner) + " does not divide the " +
              std::to_string(world) + " GPUs of the cluster (dp is derived as GPUs / (tp*cp*pp))"};
    }
    layout.dp = static_cast<int>(world / inner);
  }
  if (std::string why = rank_order_problem(layout.rank_order); !why.empty()) {
    return llama::LayoutIssue{"rank_order", "rank-order", why};
  }
  if (auto issue = resolve_split_accounting(model, layout)) return issue;
  if (auto issue = llama::check_layout(model, world, training, layout)) return issue;
  return costmodel::domain_issue(layout, nvlink_domain);
}

// ---------------------------------------------------------------------------------------------
// [search]

namespace {

template <class T, class Read>
std::vector<T> list_of(const Section& s, const toml::node& node, std::string_view k, Read read) {
  std::vector<T> out;
  if (const auto* arr = node.as_array()) {
    if (arr->empty()) s.fail_at(node, k, "empty list");
    for (const auto& el : *arr) {
      T v = read(el);
      if (std::find(out.begin(), out.end(), v) != out.end()) {
        s.fail_at(el, k, "value listed twice");
      }
      out.push_back(v);
    }
  } else {
    out.push_back(read(node));
  }
  return out;
}

}  // namespace

search::SearchSpace load_search(const Doc& doc, const toml::table& table,
                                const llama::Training& training, const hw::Gpu& gpu) {
  const Section s{doc, "search", table};
  s.check_keys({"tp", "cp", "pp", "mbs", "vp", "recompute", "schedule", "sp", "memory_fraction",
                "precision", "fp8_recipe", "dp_replicate", "ac_freq", "compile", "ep", "etp",
                "offload_layers", "fp8_param_gather", "grad_dtype"});
  search::SearchSpace space;
  auto ints = [&](std::string_view k, long long hi) {
    return list_of<int>(s, *s.get(k), k,
                        [&](const toml::node& n) { return s.int_value(n, k, 1, hi); });
  };
  if (s.get("tp")) space.tp = ints("tp", kMaxParallel);
  if (s.get("cp")) space.cp = ints("cp", kMaxParallel);
  if (const auto* n = s.get("pp")) {
    if (const auto* str = n->as_string()) {
      if (str->get() != "divisors") {
        s.fail_at(*n, "pp", "expected \"divisors\" or a list of integers, got \"" + str->get() + "\"");
      }
      space.pp.clear();
      space.pp_divisors = true;
    } else {
      space.pp = ints("pp", kMaxParallel);
      space.pp_divisors = false;
    }
  }
  if (s.get("mbs")) space.mbs = ints("mbs", kMaxMbs);
  if (s.get("vp")) space.vp = ints("vp", kMaxParallel);
  if (const auto* n = s.get("recompute")) {
    space.recompute = list_of<llama::Recompute>(s, *n, "recompute", [&](const toml::node& el) {
      return enum_value(s, el, "recompute", llama::parse_recompute, kRecompute);
    });
  }
  if (const auto* n = s.get("schedule")) {
    space.schedule = list_of<llama::Schedule>(s, *n, "schedule", [&](const toml::node& el) {
      return enum_value(s, el, "schedule", llama::parse_schedule, kSchedule);
    });
  }
  if (const auto* n = s.get("sp")) {
    space.sp = list_of<bool>(s, *n, "sp", [&](const toml::node& el) { return s.boolean(el, "sp"); });
  }
  if (s.get("dp_replicate")) space.dp_replicate = ints("dp_replicate", kMaxParallel);
  if (s.get("ac_freq")) space.ac_freq = ints("ac_freq", kMaxLayers);
  if (s.get("ep")) space.ep = ints("ep", kMaxParallel);
  if (s.get("etp")) space.etp = ints("etp", kMaxParallel);
  if (const auto* n = s.get("offload_layers")) {
    space.offload_layers = list_of<int>(s, *n, "offload_layers",
                                        [&](const toml::node& el) { return s.int_value(el, "offload_layers", 0, kMaxLayers); });
  }
  if (const auto* n = s.get("fp8_param_gather")) {
    space.fp8_param_gather = list_of<bool>(s, *n, "fp8_param_gather",
                                           [&](const toml::node& el) { return s.boolean(el, "fp8_param_gather"); });
  }
  if (const auto* n = s.get("grad_dtype")) {
    space.grad_dtype = list_of<llama::Precision>(s, *n, "grad_dtype", [&](const toml::node& el) {
      return enum_value(s, el, "grad_dtype", llama::parse_precision, kPrecision);
    });
  }
  if (const auto* n = s.get("compile")) {
    space.compile = list_of<bool>(s, *n, "compile", [&](const toml::node& el) { return s.boolean(el, "compile"); });
  }
  if (const auto* n = s.get("memory_fraction")) {
    space.memory_fraction = s.number(*n, "memory_fraction", 0.01, 1.0);
  }
  // precision = ["bf16", "fp8"]: "fp8" under [search] fp8_recipe, else the [training] recipe
  // when it trains in FP8, else delayed scaling (TE's default recipe).
  llama::Fp8Recipe fp8 = training.fp8.enabled() ? training.fp8.recipe : llama::Fp8Recipe::delayed;
  if (const auto* n = s.get("fp8_recipe")) {
    fp8 = enum_value(s, *n, "fp8_recipe", llama::parse_fp8_recipe, kFp8Recipe);
  }
  if (const auto* n = s.get("precision")) {
    space.precision = list_of<llama::Fp8Recipe>(s, *n, "precision", [&](const toml::node& el) {
      const std::string v = s.string(el, "precision");
      if (v != "bf16" && v != "fp8") {
        s.fail_at(el, "precision", "unknown value \"" + v + "\" (expected one of: bf16, fp8)");
      }
      if (v == "bf16") return llama::Fp8Recipe::none;
      if (std::string why = llama::recipe_problem(fp8, gpu); !why.empty()) s.fail_at(el, "precision", why);
      return fp8;
    });
  }
  return space;
}

// ---------------------------------------------------------------------------------------------
// [plan]

namespace {

/// A positive (or, with allow_zero, non-negative) finite number.
double positive_number(const Section& s, const toml::node& node, std::string_view k, bool allow_zero) {
  const double x = s.number(node, k, -std::numeric_limits<double>::max(), std::numeric_limits<double>::max());
  if (x < 0 || (x == 0 && !allow_zero)) {
    std::ostringstream os;
    os << (allow_zero ? "must not be negative" : "must be greater than zero") << ", got " << x;
    s.fail_at(node, k, os.str());
  }
  return x;
}

constexpr long long kMaxGpuCounts = 4096;  // values of one `gpus` range

/// "A..B" (A, 2A, 4A, ... up to B) or "A..B step S" (A, A+S, ... up to B).
std::vector<long long> gpu_range(const Section& s, const toml::node& node, std::string_view k,
                                 const std::string& text) {
  const auto bad = [&](const std::string& why) -> void {
    s.fail_at(node, k, "\"" + text + "\": " + why +
                           " (expected \"A..B\", doubling from A up to B, or \"A..B step S\")");
  };
  auto integer = [&](std::string_view part) {
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    long long v = 0;
    const auto r = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || r.ec != std::errc{} || r.ptr != part.data() + part.size()) {
      bad("\"" + std::string(part) + "\" is not a whole number");
    }
    if (v < 1 || v > kMaxNodes * kMaxGpusPerNode) bad("GPU counts must be between 1 and " +
                                                      std::to_string(kMaxNodes * kMaxGpusPerNode));
    return v;
  };
  const std::size_t dots = text.find("..");
  if (dots == std::string::npos) bad("no \"..\"");
  std::string_view rest = std::string_view(text).substr(dots + 2);
  std::optional<long long> step;
  if (const std::size_t st = rest.find("step"); st != std::string_view::npos) {
    step = integer(rest.substr(st + 4));
    rest = rest.substr(0, st);
  }
  const long long lo = integer(std::string_view(text).substr(0, dots));
  const long long hi = integer(rest);
  if (lo > hi) bad("the first count is larger than the last");
  std::vector<long long> out;
  for (long long v = lo; v <= hi; v = step ? v + *step : v * 2) {
    out.push_back(v);
    if (static_cast<long long>(out.size()) > kMaxGpuCounts) bad("more than " + std::to_string(kMaxGpuCounts) + " GPU counts");
  }
  return out;
}

CandidateEntry load_candidate(const Doc& doc, const toml::table& table) {
  const Section s{doc, "plan.candidate", table};
  s.check_keys({"name", "cluster", "cluster_file", "gpus", "price_per_gpu_hour"});
  CandidateEntry e;
  e.at = where(doc, table.source());
  const toml::node* preset = s.get("cluster");
  const toml::node* file = s.get("cluster_file");
  if (preset != nullptr && file != nullptr) s.fail_at(*file, "cluster_file", "give either cluster or cluster_file, not both");
  if (preset == nullptr && file == nullptr) {
    fail(doc, table.source(), s.key(""),
         "candidate without a cluster (give cluster = \"preset\" or cluster_file = \"file.toml\")");
  }
  if (preset != nullptr) {
    const std::string name = s.string(*preset, "cluster");
    const auto found = hw::find_cluster_preset(name);
    if (!found) {
      s.fail_at(*preset, "cluster",
                "unknown cluster preset \"" + name + "\" (built-ins: " + preset_names_clusters() +
                    "; a TOML file goes in cluster_file)");
    }
    e.cluster = *found;
    e.name = name;
    e.cluster_at = where(doc, preset->source());
    e.cluster_key = s.key("cluster");
  } else {
    const std::string rel = s.string(*file, "cluster_file");
    if (rel.empty()) s.fail_at(*file, "cluster_file", "empty path");
    const fs::path path = fs::path(rel).is_absolute() ? fs::path(rel) : doc.dir / rel;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      s.fail_at(*file, "cluster_file", "cannot read \"" + path.generic_string() + "\": no such file");
    }
    const std::string f = path.generic_string();
    const toml::table root = parse_toml_file(f);
    const Doc fdoc{f, path.parent_path(), 0, false, ""};
    for (auto&& [k, v] : root) {
      if (k.str() != "cluster") {
        fail(fdoc, k.source(), std::string(k.str()), "unknown table or key (a cluster file holds only [cluster])");
      }
      if (!v.is_table()) fail(fdoc, v.source(), "[cluster]", "expected a table");
    }
    const toml::node* c = root.get("cluster");
    if (c == nullptr) throw UserError(SourceLocation{f}, "[cluster]", "missing table");
    e.cluster = load_cluster(fdoc, *c->as_table());
    if (!e.cluster.profile_path.empty() && !fs::is_regular_file(e.cluster.profile_path, ec)) {
      const toml::node* pn = c->as_table()->get("profile");
      fail(fdoc, pn != nullptr ? pn->source() : c->source(), "[cluster].profile",
           "cannot read \"" + e.cluster.profile_path + "\": no such file");
    }
    e.cluster_file = f;
    e.name = rel;
    e.cluster_at = where(doc, file->source());
    e.cluster_key = s.key("cluster_file");
  }
  if (const auto* n = s.get("name")) {
    e.name = s.string(*n, "name");
    if (e.name.empty()) s.fail_at(*n, "name", "empty name");
  }
  const toml::node* gpus = s.get("gpus");
  if (gpus == nullptr) {
    fail(doc, table.source(), s.key("gpus"),
         "missing (give a GPU count, a list, or a range such as \"1024..16384\")");
  }
  e.gpus_key = s.key("gpus");
  const long long max_gpus = kMaxNodes * kMaxGpusPerNode;
  if (const auto* str = gpus->as_string()) {
    e.gpus = gpu_range(s, *gpus, "gpus", str->get());
    e.gpus_at.assign(e.gpus.size(), where(doc, gpus->source()));
  } else if (const auto* arr = gpus->as_array()) {
    if (arr->empty()) s.fail_at(*gpus, "gpus", "empty list");
    for (const auto& el : *arr) {
      const long long v = s.integer(el, "gpus", 1, max_gpus);
      if (std::find(e.gpus.begin(), e.gpus.end(), v) != e.gpus.end()) s.fail_at(el, "gpus", "value listed twice");
      e.gpus.push_back(v);
      e.gpus_at.push_back(where(doc, el.source()));
    }
  } else {
    e.gpus.push_back(s.integer(*gpus, "gpus", 1, max_gpus));
    e.gpus_at.push_back(where(doc, gpus->source()));
  }
  if (const auto* n = s.get("price_per_gpu_hour")) {
    e.price_per_gpu_hour = positive_number(s, *n, "price_per_gpu_hour", true);
  }
  return e;
}

}  // namespace

PlanTable load_plan(const Doc& doc, const toml::table& table) {
  const Section s{doc, "plan", table};
  s.check_keys({"tokens", "deadline_days", "budget", "failures_per_gpu_hour", "checkpoint_bandwidth",
                "restart_time", "candidate"});
  PlanTable out;
  out.at = where(doc, table.source());
  plan::PlanSettings& set = out.settings;
  if (const auto* n = s.get("tokens")) {
    set.tokens = positive_number(s, *n, "tokens", false);
  } else {
    fail(doc, table.source(), s.key("tokens"), "missing (the tokens to train, e.g. 15.6e12)");
  }
  if (const auto* n = s.get("deadline_days")) set.deadline_days = positive_number(s, *n, "deadline_days", false);
  if (const auto* n = s.get("budget")) {
    set.budget = positive_number(s, *n, "budget", false);
    out.budget_at = where(doc, n->source());
  }
  if (const auto* n = s.get("failures_per_gpu_hour")) {
    set.goodput.failures_per_gpu_hour = positive_number(s, *n, "failures_per_gpu_hour", true);
  }
  if (const auto* n = s.get("checkpoint_bandwidth")) {
    set.goodput.checkpoint_bandwidth_Bps =
        s.quantity(*n, "checkpoint_bandwidth", hw::parse_bandwidth, "2TB/s", kMaxBandwidth);
  }
  if (const auto* n = s.get("restart_time")) {
    set.goodput.restart_s = s.quantity(*n, "restart_time", hw::parse_duration, "10min", 1e9, true);
  }
  const toml::node* cands = s.get("candidate");
  const toml::array* arr = cands != nullptr ? cands->as_array() : nullptr;
  if (cands != nullptr && (arr == nullptr || !arr->is_array_of_tables())) {
    s.fail_at(*cands, "candidate", "expected [[plan.candidate]] tables");
  }
  if (arr == nullptr || arr->empty()) {
    fail(doc, table.source(), s.key("candidate"),
         "no candidates (add [[plan.candidate]] tables with cluster and gpus)");
  }
  for (const auto& el : *arr) out.candidates.push_back(load_candidate(doc, *el.as_table()));
  return out;
}

}  // namespace tetra::scenarios::detail
