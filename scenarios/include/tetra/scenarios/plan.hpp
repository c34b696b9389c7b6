#pragma once
/// Plan scenarios (`tetrasim plan`): a scenario file whose [plan] table lists the candidate
/// clusters and GPU counts, read into plan::PlanInput values. [model], [training], [search]
/// and [layout] (rank_order only) are read as for `tetrasim search`; [cluster] is optional
/// and not used by the plan (each candidate names its own cluster).

#include <string>
#include <string_view>
#include <vector>

#include "tetra/parallel/layout.hpp"
#include "tetra/model/model.hpp"
#include "tetra/plan/plan.hpp"
#include "tetra/search/space.hpp"

namespace tetra::scenarios {

/// A plan scenario, resolved: one plan::Candidate per (candidate table, GPU count) in file
/// order, each cluster sized to its GPU count (nodes = GPUs / GPUs per node; fewer GPUs than
/// one node: one node of that many; on multi-node NVLink domains the job takes
/// hw::job_domain GPUs of each domain, as a measurement row does).
struct PlanScenario {
  std::string path;
  model::Model model;
  parallel::Training training;
  search::SearchSpace search;
  parallel::Layout base;                       ///< rank_order from [layout], if given
  plan::PlanSettings settings;
  std::vector<plan::Candidate> candidates;
  std::vector<std::string> input_files;     ///< other files read (cluster files, profiles,
                                            ///< hf_config), for a fingerprint of the inputs
};

/// Reads and validates a plan scenario. UserError (file:line:col and key) for: a missing
/// [plan], [model] or [training]; any unknown table or key; [plan] without candidates; a
/// token count, deadline or budget that is not positive; a negative price; prices on some
/// candidates but not on others; a budget without prices; a GPU count that is not whole nodes
/// or not whole NVLink domains; a candidate GPU that cannot train in the precision asked for
/// ([training] or [search].precision); the same name and GPU count twice.
[[nodiscard]] PlanScenario load_plan_scenario(const std::string& path);

/// Same, from TOML text; `origin` names it in errors and is the base for relative paths.
[[nodiscard]] PlanScenario load_plan_scenario_text(std::string_view toml_text, const std::string& origin);

}  // namespace tetra::scenarios
