#pragma once
// Each subcommand registers its options on the app and sets `action` when it was chosen.
// Actions return the process exit code (0 ok); user errors are thrown as tetra::UserError
// and turned into one stderr line and exit code 1 by main.

#include <functional>

#include <CLI/CLI.hpp>

namespace tetra::cli {

using Action = std::function<int()>;

void register_memory(CLI::App& app, Action& action);
void register_presets(CLI::App& app, Action& action);
void register_validate(CLI::App& app, Action& action);
void register_simulate(CLI::App& app, Action& action);
void register_search(CLI::App& app, Action& action);
void register_calibrate(CLI::App& app, Action& action);
void register_fit(CLI::App& app, Action& action);
void register_plan(CLI::App& app, Action& action);
void register_bands(CLI::App& app, Action& action);
void register_keys(CLI::App& app, Action& action);
void register_import(CLI::App& app, Action& action);

}  // namespace tetra::cli
