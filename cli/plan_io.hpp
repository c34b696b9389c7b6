#pragma once
// `tetrasim plan --shard` / `--merge`: the shard file (docs/cli.md, `tetrasim plan`), the
// fingerprint of a plan's inputs, and the reading back of shards into evaluations.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tetra/plan/plan.hpp"
#include "tetra/scenarios/plan.hpp"

namespace tetra::cli {

/// "fnv1a64:<16 hex digits>" over the bytes of the scenario file, of every file it names
/// (PlanScenario::input_files, in order) and of the --fit file: shards of the same inputs
/// carry the same fingerprint, wherever the files lie.
[[nodiscard]] std::string plan_fingerprint(const scenarios::PlanScenario& sc, const std::string& fit_path);

/// Shard `shard` of `shards`: the evaluations of its candidates (`indices`, each with its
/// evaluation in `evals`, same order), the fingerprint and the wall time it took.
[[nodiscard]] nlohmann::json shard_json(const scenarios::PlanScenario& sc, const std::string& fingerprint,
                                        int shard, int shards, const std::vector<std::size_t>& indices,
                                        const std::vector<plan::Evaluation>& evals, double seconds);

/// What the shards of a plan gave back.
struct MergedShards {
  std::vector<plan::Evaluation> evals;  ///< one per candidate, in candidate order
  double seconds = 0;                   ///< the shards' wall times added up
  int shards = 0;
};

/// Reads shard files back. UserError naming the file for: an unreadable file, text that is not
/// a shard, a fingerprint other than `fingerprint` (another scenario, other files, another
/// --fit), shard counts that differ, a shard given twice, a candidate that is not the
/// scenario's; and naming the shard for one that is missing.
[[nodiscard]] MergedShards merge_shards(const scenarios::PlanScenario& sc, const std::string& fingerprint,
                                        const std::vector<std::string>& files);

}  // namespace tetra::cli
