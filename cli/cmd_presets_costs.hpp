#pragma once
// `tetrasim presets --costs CLUSTER`: the cost-model numbers of a cluster preset (per-op times
// of one transformer layer, collective busbw against message size).

#include <string>

namespace tetra::cli {

struct PresetCostOptions {
  std::string cluster;                  ///< cluster preset name (required)
  std::string model = "llama3.1-70b";   ///< model preset
  std::string layout = "tp=8,sp=true";  ///< --layout syntax; dp defaults to 1
  int seq = 8192;                       ///< sequence length
  int nodes = 1;                        ///< nodes of the cluster (affects nothing in one layer
                                        ///< unless the layout spans nodes)
  bool json = false;
};

/// Prints the tables (or JSON with --json); returns the exit code. Unknown presets and bad
/// layouts are tetra::UserError.
int print_preset_costs(const PresetCostOptions& options);

}  // namespace tetra::cli
