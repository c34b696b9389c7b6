#pragma once
// Private to the scenarios library: reading one TOML table with messages that name the file,
// line and key (Section), the enumerations and the sanity bounds every loader shares.

#include <cmath>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "loader.hpp"
#include "tetra/hw/presets.hpp"
#include "tetra/model/presets.hpp"

namespace tetra::scenarios::detail {


/// What a node is, for "expected X, got Y" messages.
inline std::string type_name(const toml::node& node) {
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

inline std::string join(const std::vector<std::string>& items, std::string_view sep = ", ") {
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
    const std::string near = closest_name(worst->str(), known);
    fail(doc, worst->source(), key(worst->str()),
         "unknown key (" + (near.empty() ? std::string() : "did you mean " + near + "? ") + "known keys: " +
             join(names) + ")");
  }

  /// The known name within edit distance 2 of `typed` (ties: the first), or "".
  static std::string closest_name(std::string_view typed, const std::vector<std::string_view>& known) {
    std::string best;
    std::size_t best_d = 3;
    for (std::string_view k : known) {
      // Levenshtein distance, one row at a time.
      std::vector<std::size_t> row(k.size() + 1);
      for (std::size_t j = 0; j <= k.size(); ++j) row[j] = j;
      for (std::size_t i = 1; i <= typed.size(); ++i) {
        std::size_t diag = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= k.size(); ++j) {
          const std::size_t up = row[j];
          row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (typed[i - 1] == k[j - 1] ? 0 : 1)});
          diag = up;
        }
      }
      if (row[k.size()] < best_d) {
        best_d = row[k.size()];
        best = std::string(k);
      }
    }
    return best;
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

inline constexpr std::initializer_list<parallel::Recompute> kRecompute{
    parallel::Recompute::none, parallel::Recompute::selective, parallel::Recompute::full,
    parallel::Recompute::selective_op, parallel::Recompute::selective_layer};
inline constexpr std::initializer_list<parallel::Schedule> kSchedule{
    parallel::Schedule::gpipe, parallel::Schedule::one_f_one_b, parallel::Schedule::interleaved,
    parallel::Schedule::zb_h1, parallel::Schedule::layered};
inline constexpr std::initializer_list<parallel::AttentionKernel> kAttention{
    parallel::AttentionKernel::flash2, parallel::AttentionKernel::flash3, parallel::AttentionKernel::flash1,
    parallel::AttentionKernel::cudnn, parallel::AttentionKernel::fused, parallel::AttentionKernel::torch,
    parallel::AttentionKernel::triton};
inline constexpr std::initializer_list<parallel::Precision> kPrecision{
    parallel::Precision::bf16, parallel::Precision::fp16, parallel::Precision::fp32};
inline constexpr std::initializer_list<parallel::Fp8Recipe> kFp8Recipe{
    parallel::Fp8Recipe::delayed, parallel::Fp8Recipe::current, parallel::Fp8Recipe::blockwise,
    parallel::Fp8Recipe::mxfp8, parallel::Fp8Recipe::nvfp4, parallel::Fp8Recipe::tensorwise,
    parallel::Fp8Recipe::rowwise};
inline constexpr std::initializer_list<parallel::Framework> kFramework{
    parallel::Framework::megatron, parallel::Framework::deepspeed, parallel::Framework::fsdp};
inline constexpr std::initializer_list<parallel::Optimizer> kOptimizer{parallel::Optimizer::adam};
inline constexpr std::initializer_list<parallel::MoeDispatcher> kDispatcher{
    parallel::MoeDispatcher::alltoall, parallel::MoeDispatcher::allgather, parallel::MoeDispatcher::flex};
inline constexpr std::initializer_list<parallel::FlexBackend> kFlexBackend{parallel::FlexBackend::deepep,
                                                                  parallel::FlexBackend::hybridep};
inline constexpr std::initializer_list<parallel::CpComm> kCpComm{
    parallel::CpComm::p2p, parallel::CpComm::all_gather, parallel::CpComm::a2a, parallel::CpComm::a2a_p2p};
inline constexpr std::initializer_list<parallel::LoaderMask> kLoaderMask{
    parallel::LoaderMask::none, parallel::LoaderMask::cached, parallel::LoaderMask::per_sample};
inline constexpr std::initializer_list<model::Arch> kArch{model::Arch::llama, model::Arch::gpt, model::Arch::gpt_oss};
inline constexpr std::initializer_list<hw::IntraKind> kIntraKind{
    hw::IntraKind::nvswitch, hw::IntraKind::nvlink_mesh, hw::IntraKind::pcie};

// Sanity bounds: far beyond any real model or cluster, small enough that products stay exact.
inline constexpr long long kMaxLayers = 100000;
inline constexpr long long kMaxWidth = 10'000'000;      // hidden, ffn_hidden
inline constexpr long long kMaxHeads = 100000;
inline constexpr long long kMaxVocab = 100'000'000;
inline constexpr long long kMaxNodes = 1'000'000;
inline constexpr long long kMaxGpusPerNode = 1024;
inline constexpr long long kMaxPodGpus = 1'000'000;
inline constexpr long long kMaxSms = 100000;
inline constexpr long long kMaxParallel = 1'000'000;    // tp, cp, pp, dp, vp
inline constexpr long long kMaxMbs = 1'000'000;
inline constexpr double kMaxBytes = 1e15;               // 1 PB of memory on one GPU
inline constexpr double kMinGpuBytes = 1024.0 * 1024.0; // 1 MiB: less cannot hold one layer
inline constexpr double kMaxBandwidth = 1e16;           // 10 PB/s
inline constexpr double kMaxPowerW = 1e5;
inline constexpr double kMaxFlops = 1e19;               // 10 EFLOP/s
inline constexpr double kMaxLatency = 10.0;             // seconds

inline std::string preset_names_models() {
  std::vector<std::string> names;
  for (const auto& m : model::model_presets()) names.push_back(m.name);
  return join(names);
}
inline std::string preset_names_clusters() {
  std::vector<std::string> names;
  for (const auto& c : hw::cluster_presets()) names.push_back(c.name);
  return join(names);
}
inline std::string preset_names_gpus() {
  std::vector<std::string> names;
  for (const auto& g : hw::gpu_presets()) names.push_back(g.name);
  return join(names);
}

inline void record(KeyOrigins& origins, const Section& s, std::string_view k, const toml::node& node) {
  origins.insert_or_assign(std::string(k), KeyOrigin{where(s.doc, node.source()), s.key(k)});
}


}  // namespace tetra::scenarios::detail
