// tetrasim: the one executable. Parses the command line, runs the chosen subcommand, and is
// the only place that turns errors into exit codes (docs/cli.md: 0 ok, 1 user error with one
// line on stderr, 2 usage error).

#include <exception>
#include <iostream>
#include <new>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "tetra/base/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "tetrasim: predict the memory and step time of LLM training under 4D parallelism on GPU "
      "clusters, A100 to GB300 NVL72 (documentation: README.md and docs/)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tetrasim " TETRASIM_VERSION);  // CMake project(VERSION)
  tetra::cli::Action action;
  tetra::cli::register_memory(app, action);
  tetra::cli::register_simulate(app, action);
  tetra::cli::register_search(app, action);
  tetra::cli::register_plan(app, action);
  tetra::cli::register_validate(app, action);
  tetra::cli::register_fit(app, action);
  tetra::cli::register_bands(app, action);
  tetra::cli::register_calibrate(app, action);
  tetra::cli::register_presets(app, action);
  tetra::cli::register_keys(app, action);
  tetra::cli::register_import(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  try {
    return action ? action() : 2;
  } catch (const tetra::UserError& e) {
    std::cerr << "tetrasim: " << e.what() << '\n';
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "tetrasim: out of memory (the input asks for more than this machine has)\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "tetrasim: internal error: " << e.what() << '\n';
    return 1;
  }
}
