// tetrasim calibrate (to be written)
#include "commands.hpp"

namespace tetra::cli {

void register_calibrate(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("calibrate", "(not yet available)");
  cmd->callback([&action] { action = [] { return 2; }; });
}

}  // namespace tetra::cli
