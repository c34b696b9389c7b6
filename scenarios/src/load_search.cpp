// The [search] table of a scenario.

#include "loader.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <stdexcept>
#include <cmath>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "section.hpp"
#include "tetra/costmodel/collective.hpp"
#include "tetra/hw/presets.hpp"
#include "tetra/base/units.hpp"
#include "tetra/model/presets.hpp"
#include "tetra/scenarios/keys.hpp"

namespace tetra::scenarios::detail {

namespace fs = std::filesystem;

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
                                const parallel::Training& training, const hw::Gpu& gpu) {
  const Section s{doc, "search", table};
  s.check_keys(key_names("search"));
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
    space.recompute = list_of<parallel::Recompute>(s, *n, "recompute", [&](const toml::node& el) {
      return enum_value(s, el, "recompute", parallel::parse_recompute, kRecompute);
    });
  }
  if (const auto* n = s.get("schedule")) {
    space.schedule = list_of<parallel::Schedule>(s, *n, "schedule", [&](const toml::node& el) {
      return enum_value(s, el, "schedule", parallel::parse_schedule, kSchedule);
    });
  }
  if (const auto* n = s.get("sp")) {
    space.sp = list_of<bool>(s, *n, "sp", [&](const toml::node& el) { return s.boolean(el, "sp"); });
  }
  if (const auto* n = s.get("rank_order")) {
    space.rank_order = list_of<std::string>(s, *n, "rank_order", [&](const toml::node& el) {
      std::string order = s.string(el, "rank_order");
      if (const std::string why = rank_order_problem(order); !why.empty()) s.fail_at(el, "rank_order", why);
      return order;
    });
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
    space.grad_dtype = list_of<parallel::Precision>(s, *n, "grad_dtype", [&](const toml::node& el) {
      return enum_value(s, el, "grad_dtype", parallel::parse_precision, kPrecision);
    });
  }
  if (const auto* n = s.get("cp_comm_type")) {
    space.cp_comm = list_of<parallel::CpComm>(s, *n, "cp_comm_type", [&](const toml::node& el) {
      return enum_value(s, el, "cp_comm_type", parallel::parse_cp_comm, kCpComm);
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
  parallel::Fp8Recipe fp8 = training.fp8.enabled() ? training.fp8.recipe : parallel::Fp8Recipe::delayed;
  if (const auto* n = s.get("fp8_recipe")) {
    fp8 = enum_value(s, *n, "fp8_recipe", parallel::parse_fp8_recipe, kFp8Recipe);
  }
  if (const auto* n = s.get("precision")) {
    space.precision = list_of<parallel::Fp8Recipe>(s, *n, "precision", [&](const toml::node& el) {
      const std::string v = s.string(el, "precision");
      if (v != "bf16" && v != "fp8") {
        s.fail_at(el, "precision", "unknown value \"" + v + "\" (expected one of: bf16, fp8)");
      }
      if (v == "bf16") return parallel::Fp8Recipe::none;
      if (std::string why = parallel::recipe_problem(fp8, gpu); !why.empty()) s.fail_at(el, "precision", why);
      return fp8;
    });
  }
  return space;
}

}  // namespace tetra::scenarios::detail
