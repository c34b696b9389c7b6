#include "plan_io.hpp"

#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <sstream>

#include "output.hpp"
#include "tetra/base/text_file.hpp"
#include "tetra/base/error.hpp"
#include "tetra/parallel/fp8.hpp"
#include "tetra/scenarios/scenario.hpp"

namespace tetra::cli {

namespace {

constexpr const char* kFormat = "tetrasim-plan-shard";
constexpr int kVersion = 1;

/// FNV-1a, 64 bits (Fowler, Noll, Vo): a checksum, not a cryptographic hash.
struct Fnv1a {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  void add(const std::string& bytes) {
    for (const unsigned char c : bytes) {
      h ^= c;
      h *= 0x100000001b3ULL;
    }
    // A separator between files, so that moving bytes from one file to the next changes it.
    add_u64(bytes.size());
  }
  void add_u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ULL;
    }
  }
};

std::string read_all(const std::string& path) { return read_input_file(path); }

nlohmann::json evaluation_json(const scenarios::PlanScenario& sc, std::size_t index, const plan::Evaluation& e) {
  const plan::Candidate& c = sc.candidates.at(index);
  nlohmann::json j;
  j["index"] = index;
  j["name"] = c.name;
  j["gpus"] = c.cluster.total_gpus();
  if (e.best) {
    const search::RankedLayout& b = *e.best;
    nlohmann::json bj;
    bj["layout"] = scenarios::format_layout(b.layout);
    bj["fp8_recipe"] = to_string(b.fp8.recipe);
    bj["compile"] = b.compile;
    bj["fp8_param_gather"] = b.fp8.param_gather;
    bj["micro_batches"] = b.micro_batches;
    bj["step_time_s"] = b.step_time_s;
    bj["tokens_per_s"] = b.tokens_per_s;
    bj["tflops_per_gpu"] = b.tflops_per_gpu;
    bj["mfu"] = b.mfu;
    bj["bubble_fraction"] = b.bubble_fraction;
    bj["peak_bytes"] = b.peak_bytes;
    bj["estimate_peak_bytes"] = b.estimate_peak_bytes;
    bj["headroom_bytes"] = b.headroom_bytes;
    j["best"] = std::move(bj);
  } else {
    j["best"] = nullptr;
  }
  const search::SearchSummary& s = e.summary;
  nlohmann::json sj = search_counts_json(s);
  sj["capacity_bytes"] = s.capacity_bytes;
  sj["budget_bytes"] = s.budget_bytes;
  j["summary"] = std::move(sj);
  j["skipped_by_bound"] = e.skipped_by_bound;
  return j;
}

plan::Evaluation evaluation_from(const nlohmann::json& j) {
  plan::Evaluation e;
  const nlohmann::json& bj = j.at("best");
  if (!bj.is_null()) {
    search::RankedLayout b;
    scenarios::apply_layout_string(b.layout, bj.at("layout").get<std::string>(), "shard layout");
    const std::string recipe = bj.at("fp8_recipe").get<std::string>();
    if (recipe != "none") {
      const auto r = parallel::parse_fp8_recipe(recipe);
      if (!r) throw std::invalid_argument("unknown fp8_recipe \"" + recipe + "\"");
      b.fp8.recipe = *r;
    }
    b.fp8.param_gather = bj.at("fp8_param_gather").get<bool>();
    b.compile = bj.at("compile").get<bool>();
    b.micro_batches = bj.at("micro_batches").get<int>();
    b.step_time_s = bj.at("step_time_s").get<double>();
    b.tokens_per_s = bj.at("tokens_per_s").get<double>();
    b.tflops_per_gpu = bj.at("tflops_per_gpu").get<double>();
    b.mfu = bj.at("mfu").get<double>();
    b.bubble_fraction = bj.at("bubble_fraction").get<double>();
    b.peak_bytes = bj.at("peak_bytes").get<double>();
    b.estimate_peak_bytes = bj.at("estimate_peak_bytes").get<double>();
    b.headroom_bytes = bj.at("headroom_bytes").get<double>();
    e.best = b;
  }
  const nlohmann::json& sj = j.at("summary");
  search::SearchSummary& s = e.summary;
  s.enumerated = sj.at("enumerated").get<std::uint64_t>();
  s.invalid = sj.at("invalid").get<std::uint64_t>();
  for (const auto& [rule, n] : sj.at("invalid_by_rule").items()) s.invalid_by_rule[rule] = n.get<std::uint64_t>();
  s.valid = sj.at("valid").get<std::uint64_t>();
  s.pruned_by_memory = sj.at("pruned_by_memory").get<std::uint64_t>();
  s.simulated = sj.at("simulated").get<std::uint64_t>();
  s.over_budget_simulated = sj.at("over_budget_simulated").get<std::uint64_t>();
  s.feasible = sj.at("feasible").get<std::uint64_t>();
  s.layer_shapes = sj.at("layer_shapes").get<std::uint64_t>();
  s.capacity_bytes = sj.at("capacity_bytes").get<double>();
  s.budget_bytes = sj.at("budget_bytes").get<double>();
  e.skipped_by_bound = j.at("skipped_by_bound").get<std::uint64_t>();
  return e;
}

}  // namespace

std::string plan_fingerprint(const scenarios::PlanScenario& sc, const std::string& fit_path) {
  Fnv1a f;
  f.add(read_all(sc.path));
  for (const std::string& p : sc.input_files) f.add(read_all(p));
  f.add(fit_path.empty() ? std::string() : read_all(fit_path));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(f.h));
  return std::string("fnv1a64:") + buf;
}

nlohmann::json shard_json(const scenarios::PlanScenario& sc, const std::string& fingerprint, int shard,
                          int shards, const std::vector<std::size_t>& indices,
                          const std::vector<plan::Evaluation>& evals, double seconds) {
  nlohmann::json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["scenario"] = sc.path;
  j["fingerprint"] = fingerprint;
  j["shard"] = shard;
  j["shards"] = shards;
  j["candidates_total"] = sc.candidates.size();
  j["seconds"] = seconds;
  nlohmann::json list = nlohmann::json::array();
  for (std::size_t k = 0; k < indices.size(); ++k) list.push_back(evaluation_json(sc, indices[k], evals[k]));
  j["evaluations"] = std::move(list);
  return j;
}

MergedShards merge_shards(const scenarios::PlanScenario& sc, const std::string& fingerprint,
                          const std::vector<std::string>& files) {
  MergedShards out;
  const std::size_t total = sc.candidates.size();
  std::vector<std::optional<plan::Evaluation>> evals(total);
  std::map<int, std::string> seen;  // shard -> file
  std::string shards_file;
  for (const std::string& file : files) {
    const SourceLocation at{file};
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_all(file));
    } catch (const nlohmann::json::parse_error& e) {
      throw UserError(at, "", "not a tetrasim plan shard (JSON error at byte " + std::to_string(e.byte) + ")");
    }
    try {
      if (!j.is_object() || j.value("format", std::string()) != kFormat) {
        throw UserError(at, "", "not a tetrasim plan shard (written by tetrasim plan --shard I/N)");
      }
      if (j.at("version").get<int>() != kVersion) {
        throw UserError(at, "version", "shard format version " + j.at("version").dump() + ", this tetrasim reads " +
                                           std::to_string(kVersion));
      }
      const std::string fp = j.at("fingerprint").get<std::string>();
      if (fp != fingerprint) {
        throw UserError(at, "fingerprint",
                        "this shard was computed from other inputs (" + fp + ", while " + sc.path +
                            " with the files it names and --fit gives " + fingerprint + ")");
      }
      const int shard = j.at("shard").get<int>();
      const int shards = j.at("shards").get<int>();
      if (shards < 1 || shard < 1 || shard > shards) {
        throw UserError(at, "shard", "shard " + std::to_string(shard) + "/" + std::to_string(shards) + " is not a valid share");
      }
      if (out.shards == 0) {
        out.shards = shards;
        shards_file = file;
      } else if (shards != out.shards) {
        throw UserError(at, "shards", "shard " + std::to_string(shard) + "/" + std::to_string(shards) +
                                          " does not add up with " + shards_file + ", a share of " +
                                          std::to_string(out.shards));
      }
      if (auto it = seen.find(shard); it != seen.end()) {
        throw UserError(at, "shard", "shard " + std::to_string(shard) + "/" + std::to_string(shards) +
                                         " given twice (also " + it->second + ")");
      }
      seen.emplace(shard, file);
      if (j.at("candidates_total").get<std::size_t>() != total) {
        throw UserError(at, "candidates_total", "shard of " + j.at("candidates_total").dump() +
                                                    " candidates, the scenario has " + std::to_string(total));
      }
      const std::vector<std::size_t> want = plan::shard_indices(total, shard, shards);
      const nlohmann::json& list = j.at("evaluations");
      if (!list.is_array() || list.size() != want.size()) {
        throw UserError(at, "evaluations", "expected " + std::to_string(want.size()) + " candidates in shard " +
                                               std::to_string(shard) + "/" + std::to_string(shards));
      }
      for (std::size_t k = 0; k < want.size(); ++k) {
        const nlohmann::json& e = list[k];
        const std::size_t index = e.at("index").get<std::size_t>();
        const plan::Candidate& c = sc.candidates[want[k]];
        if (index != want[k] || e.at("name").get<std::string>() != c.name ||
            e.at("gpus").get<long long>() != c.cluster.total_gpus()) {
          throw UserError(at, "evaluations", "entry " + std::to_string(k) + " is not candidate " +
                                                 std::to_string(want[k]) + " (" + c.name + " at " +
                                                 std::to_string(c.cluster.total_gpus()) + " GPUs)");
        }
        try {
          evals[index] = evaluation_from(e);
        } catch (const std::exception& ex) {
          throw UserError(at, "", std::string("malformed plan shard: ") + ex.what());
        }
      }
      out.seconds += j.value("seconds", 0.0);
    } catch (const UserError&) {
      throw;
    } catch (const std::exception& e) {
      throw UserError(at, "", std::string("malformed plan shard: ") + e.what());
    }
  }
  if (out.shards == 0) throw UserError(SourceLocation{"--merge"}, "", "no shard files given");
  for (int s = 1; s <= out.shards; ++s) {
    if (seen.find(s) == seen.end()) {
      throw UserError(SourceLocation{"--merge"}, "",
                      "shard " + std::to_string(s) + "/" + std::to_string(out.shards) +
                          " is missing (the shares do not add up)");
    }
  }
  out.evals.reserve(total);
  for (auto& e : evals) out.evals.push_back(std::move(*e));
  return out;
}

}  // namespace tetra::cli
