// tetrasim validate (to be written)
#include "commands.hpp"

namespace tetra::cli {

void register_validate(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("validate", "(not yet available)");
  cmd->callback([&action] { action = [] { return 2; }; });
}

}  // namespace tetra::cli
