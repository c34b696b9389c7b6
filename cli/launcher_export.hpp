#pragma once
// `search --export` and `plan --export`: the chosen layout as a launcher's configuration.

#include <string>

#include <CLI/CLI.hpp>

#include "tetra/hw/cluster.hpp"
#include "tetra/model/model.hpp"
#include "tetra/parallel/layout.hpp"
#include "tetra/search/search.hpp"

namespace tetra::cli {

/// Adds `--export megatron|torchtitan|nemo` (stored in `launcher`) to a subcommand.
CLI::Option* add_export_option(CLI::App* cmd, std::string& launcher);

/// The ranked layout `r` of a model trained as `training` on `cluster`, as the launcher's
/// configuration (interop/export.hpp), in the precision, compile and gradient dtype it was
/// ranked in.
[[nodiscard]] std::string export_ranked(const std::string& launcher, const model::Model& model,
                                        const parallel::Training& training, const hw::Cluster& cluster,
                                        const search::RankedLayout& r);

}  // namespace tetra::cli
