// tetrasim import FILE [-o SCENARIO.toml] [--from megatron|torchtitan|nemo] [--cluster PRESET]
// [--gpus N] [--model PRESET]: a launcher's configuration as a scenario (docs/cli.md).

#include <iostream>
#include <memory>
#include <string>

#include "commands.hpp"
#include "output.hpp"
#include "tetra/base/error.hpp"
#include "tetra/base/text_file.hpp"
#include "tetra/interop/import.hpp"
#include "tetra/scenarios/scenario.hpp"

namespace tetra::cli {
namespace {

struct ImportArgs {
  std::string file;
  std::string out;
  std::string from;
  interop::ImportOptions options;
};

int run_import(ImportArgs args) {
  if (!args.from.empty()) args.options.from = interop::parse_launcher(args.from);
  const std::string text = read_input_file(args.file);
  const std::string scenario = interop::import_scenario(text, args.file, args.options);
  // The scenario must load as written: a layout tetrasim refuses is reported against the file.
  try {
    (void)scenarios::load_scenario_text(scenario, args.file);
  } catch (const UserError& e) {
    throw UserError(SourceLocation{args.file}, e.key(), "the imported scenario does not load: " + e.detail());
  }
  if (args.out.empty()) {
    std::cout << scenario;
  } else {
    write_file_atomic(args.out, scenario);
  }
  return 0;
}

}  // namespace

void register_import(CLI::App& app, Action& action) {
  auto args = std::make_shared<ImportArgs>();
  auto* cmd = app.add_subcommand(
      "import",
      "turn a launcher configuration (Megatron-LM arguments, a torchtitan job TOML, a Megatron-Bridge / NeMo YAML) "
      "into a scenario");
  cmd->add_option("file", args->file, "the launch script, argument file, job TOML or YAML configuration")->required();
  cmd->add_option("-o,--output", args->out, "write the scenario to this file instead of stdout");
  cmd->add_option("--from", args->from, "the launcher, when the content or a .yaml name does not tell")
      ->check(CLI::IsMember({"megatron", "torchtitan", "nemo"}));
  cmd->add_option("--cluster", args->options.cluster, "the [cluster] preset (default dgx-h100)");
  cmd->add_option("--gpus", args->options.gpus, "the run's GPUs, over what the file says")
      ->check(CLI::Range(1, 100000000));
  cmd->add_option("--model", args->options.model,
                  "a model preset, for a file that names no model or whose shape fits several presets");
  cmd->callback([&action, args] { action = [args] { return run_import(*args); }; });
}

}  // namespace tetra::cli
