// tetrasim search (to be written)
#include "commands.hpp"

namespace tetra::cli {

void register_search(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("search", "(not yet available)");
  cmd->callback([&action] { action = [] { return 2; }; });
}

}  // namespace tetra::cli
