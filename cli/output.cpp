#include "output.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <system_error>

#include "tetra/base/error.hpp"
#include "tetra/base/text_file.hpp"
#include "tetra/base/units.hpp"

namespace tetra::cli {

std::string format_table(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width(header.size(), 0);
  auto grow = [&](const std::vector<std::string>& row) {
    for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  };
  grow(header);
  for (const auto& r : rows) grow(r);
  std::ostringstream out;
  auto emit = [&](const std::vector<std::string>& row) {
    std::string line;
    for (std::size_t i = 0; i < width.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      const std::string pad(width[i] - cell.size(), ' ');
      if (i > 0) line += "  ";
      line += i == 0 ? cell + pad : pad + cell;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << '\n';
  };
  emit(header);
  for (const auto& r : rows) emit(r);
  return out.str();
}

std::string fixed(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, value);
  return buf;
}

std::string percent(double fraction) { return fixed(fraction * 100.0, 1) + "%"; }

double round_to(double value, int decimals) {
  const double k = std::pow(10.0, decimals);
  return static_cast<double>(std::llround(value * k)) / k;
}

double gib(double bytes) { return bytes / units::kGiB; }

std::string precision_name(const parallel::Fp8Training& fp8) {
  return fp8.enabled() ? std::string("fp8-") + to_string(fp8.recipe) : "bf16";
}

double gib3(double bytes) { return round_to(bytes / units::kGiB, 3); }

SearchVerdict search_verdict(const search::SearchSummary& s) {
  if (s.feasible > 0) return {"ranked", 0};
  if (s.valid == 0) return {"nothing_valid", kExitNothingValid};
  return {"nothing_fits", kExitNothingFits};
}

nlohmann::json search_counts_json(const search::SearchSummary& s) {
  nlohmann::json j;
  j["enumerated"] = s.enumerated;
  j["invalid"] = s.invalid;
  nlohmann::json by_rule = nlohmann::json::object();
  for (const auto& [rule, count] : s.invalid_by_rule) by_rule[rule] = count;
  j["invalid_by_rule"] = std::move(by_rule);
  j["valid"] = s.valid;
  j["pruned_by_memory"] = s.pruned_by_memory;
  j["simulated"] = s.simulated;
  j["over_budget_simulated"] = s.over_budget_simulated;
  j["feasible"] = s.feasible;
  j["layer_shapes"] = s.layer_shapes;
  return j;
}

nlohmann::json layout_json(const parallel::Layout& l) {
  nlohmann::json j;
  j["tp"] = l.tp;
  j["cp"] = l.cp;
  j["pp"] = l.pp;
  j["dp"] = l.dp;
  j["vp"] = l.vp;
  j["mbs"] = l.mbs;
  j["sp"] = l.sp;
  j["recompute"] = to_string(l.recompute);
  if (l.recompute == parallel::Recompute::selective_layer) j["ac_freq"] = l.ac_freq;
  if (l.offload_layers > 0) j["offload_layers"] = l.offload_layers;
  if (l.dp_replicate > 1) {
    j["dp_shard"] = l.shard_dp();
    j["dp_replicate"] = l.dp_replicate;
  }
  j["schedule"] = to_string(l.schedule);
  j["rank_order"] = l.rank_order;
  if (l.cp > 1) j["cp_comm_type"] = to_string(l.cp_comm);
  if (l.cp > 1 && l.cp_comm == parallel::CpComm::a2a_p2p) j["cp_a2a"] = l.cp_a2a;
  if (l.first_stage_layers > 0) j["first_stage_layers"] = l.first_stage_layers;
  if (l.last_stage_layers > 0) j["last_stage_layers"] = l.last_stage_layers;
  if (l.ep > 1 || l.etp > 1) {
    j["ep"] = l.ep;
    j["etp"] = l.etp;
    j["moe_token_dispatcher"] = to_string(l.moe_dispatcher);
    if (l.moe_dispatcher == parallel::MoeDispatcher::flex) j["moe_flex_backend"] = to_string(l.moe_flex_backend);
  }
  return j;
}

void print_json(const nlohmann::json& j) { std::cout << j.dump(2) << '\n'; }

void print_skip_reasons(const std::vector<std::pair<std::string, std::string>>& skipped) {
  std::map<std::string, int> reasons;
  for (const auto& s : skipped) ++reasons[s.second];
  std::vector<std::pair<int, std::string>> by_count;
  for (const auto& [reason, n] : reasons) by_count.emplace_back(-n, reason);
  std::sort(by_count.begin(), by_count.end());
  for (const auto& [neg, reason] : by_count) std::cout << "skipped   " << -neg << "  " << reason << '\n';
}

namespace {

/// A new, uniquely named empty file beside `target`, or the OS reason it cannot be made.
std::string make_temporary(const std::filesystem::path& target) {
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : ".";
  std::string name = (dir / ("." + target.filename().string() + ".XXXXXX")).string();
  const int fd = mkstemp(name.data());
  if (fd < 0) {
    throw UserError(SourceLocation{target.string()}, "", std::string("cannot write: ") + std::strerror(errno));
  }
  close(fd);
  return name;
}

}  // namespace

void write_outputs(const std::vector<OutputFile>& files) {
  namespace fs = std::filesystem;
  std::vector<fs::path> targets;
  for (const OutputFile& f : files) {
    const fs::path target(f.path);
    if (read_as_input(f.path)) {
      throw UserError(SourceLocation{f.path}, "", "is an input of this command; write the output elsewhere");
    }
    for (const fs::path& t : targets) {
      std::error_code ec;
      if (t == target || fs::equivalent(t, target, ec)) {
        throw UserError(SourceLocation{f.path}, "", "named for two outputs of this command");
      }
    }
    targets.push_back(target);
  }
  std::vector<std::string> temps;
  auto discard = [&] {
    std::error_code ec;
    for (const auto& t : temps) fs::remove(t, ec);
  };
  try {
    for (const OutputFile& f : files) {
      temps.push_back(make_temporary(f.path));
      std::ofstream out(temps.back(), std::ios::binary | std::ios::trunc);
      errno = 0;
      if (f.write) {
        f.write(out);
      } else {
        out << f.content;
      }
      out.flush();
      if (!out) {
        throw UserError(SourceLocation{f.path}, "",
                        std::string("write failed: ") + (errno != 0 ? std::strerror(errno) : "stream error"));
      }
    }
    for (std::size_t i = 0; i < files.size(); ++i) {
      std::error_code ec;
      fs::rename(temps[i], targets[i], ec);
      if (ec) throw UserError(SourceLocation{files[i].path}, "", "cannot replace the file: " + ec.message());
      temps[i].clear();
    }
  } catch (...) {
    discard();
    throw;
  }
}

void check_threads(int threads) {
  if (threads < 0 || threads > kMaxThreads) {
    throw UserError(SourceLocation{"--threads"}, "threads",
                    "must be 0 (all cores) to " + std::to_string(kMaxThreads) + " (got " + std::to_string(threads) + ")");
  }
}

void write_file_atomic(const std::string& path, const std::string& content) { write_outputs({{path, content}}); }

}  // namespace tetra::cli
