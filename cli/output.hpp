#pragma once
// Output helpers shared by the subcommands: aligned text tables, JSON to stdout, and files
// written whole or not at all.

#include <functional>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tetra/parallel/layout.hpp"
#include "tetra/search/search.hpp"

namespace tetra::cli {

/// Left-aligned first column, right-aligned others, two spaces between columns.
[[nodiscard]] std::string format_table(const std::vector<std::string>& header,
                                       const std::vector<std::vector<std::string>>& rows);

/// Fixed-point number with `digits` decimals ("12.34").
[[nodiscard]] std::string fixed(double value, int digits);

/// A fraction as a percentage with one decimal ("12.3%").
[[nodiscard]] std::string percent(double fraction);

/// `value` rounded to `decimals` decimals, so JSON carries no float noise.
[[nodiscard]] double round_to(double value, int decimals);

/// Bytes as GiB.
[[nodiscard]] double gib(double bytes);

/// "bf16", or "fp8-<recipe>" for FP8 linears.
[[nodiscard]] std::string precision_name(const parallel::Fp8Training& fp8);

/// Bytes as GiB rounded to 1/1000 GiB (about 1 MB).
[[nodiscard]] double gib3(double bytes);

/// A search's counts (enumerated, invalid and by rule, valid, pruned, simulated, feasible,
/// layer shapes): the part of a summary that `search --json` and plan shards share.
[[nodiscard]] nlohmann::json search_counts_json(const search::SearchSummary& s);

/// The [layout] keys of a layout as a JSON object (first/last stage layers when uneven).
[[nodiscard]] nlohmann::json layout_json(const parallel::Layout& layout);

/// Exit codes of a search or plan that ran but ranked nothing, told apart from success (0), a
/// user error (1) and a usage error (2): every layout broke a rule, or the valid ones all need
/// more memory than the budget.
inline constexpr int kExitNothingValid = 3;
inline constexpr int kExitNothingFits = 4;

/// What a search's counts say: "ranked", "nothing_valid" or "nothing_fits", with its exit code.
struct SearchVerdict {
  const char* name;
  int exit_code;
};
[[nodiscard]] SearchVerdict search_verdict(const search::SearchSummary& s);

/// Prints `j` to stdout, indented by two spaces, with a trailing newline.
void print_json(const nlohmann::json& j);

/// One "skipped   N  reason" line per reason on stdout, the most frequent first (then by text),
/// for (id, reason) pairs.
void print_skip_reasons(const std::vector<std::pair<std::string, std::string>>& skipped);

/// Threads a command may run: 0 (all cores) up to this many; more is a mistake, not a machine.
inline constexpr int kMaxThreads = 4096;

/// Refuses a --threads value outside 0..kMaxThreads (UserError naming --threads).
void check_threads(int threads);

/// One output file of a command: its path and its whole content, or, where `write` is set,
/// what writes the content to a stream piece by piece (large files never held whole).
struct OutputFile {
  std::string path;
  std::string content;
  std::function<void(std::ostream&)> write = {};
};

/// Writes every file or none: each goes to a uniquely named temporary beside its target, and
/// the targets are replaced only once every temporary is complete. Refuses (UserError naming
/// the output) a path that is an input this command read (base/text_file.hpp) or that two
/// outputs share; write errors give the OS reason.
void write_outputs(const std::vector<OutputFile>& files);

/// write_outputs of one file.
void write_file_atomic(const std::string& path, const std::string& content);

}  // namespace tetra::cli
