// tetrasim presets (to be written)
#include "commands.hpp"

namespace tetra::cli {

void register_presets(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("presets", "(not yet available)");
  cmd->callback([&action] { action = [] { return 2; }; });
}

}  // namespace tetra::cli
