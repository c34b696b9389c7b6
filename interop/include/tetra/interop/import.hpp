#pragma once
/// `tetrasim import`: a launcher's configuration file turned into a scenario TOML.

#include <optional>
#include <string>
#include <string_view>

#include "tetra/interop/launch_config.hpp"

namespace tetra::interop {

/// What the file does not say.
struct ImportOptions {
  std::optional<Launcher> from;       ///< the launcher; nothing = told from the content
  std::string cluster = "dgx-h100";   ///< the [cluster] preset (launch files name no hardware)
  long long gpus = 0;                 ///< the run's GPUs, over the file's; 0 = the file's
  /// A model preset for a file that names none, or the one of several presets that fit the
  /// file's shape (it gives no vocabulary).
  std::string model;
};

/// The launcher that wrote `text`: a TOML document with a [parallelism], [training] or [job]
/// table is torchtitan's; text holding Megatron-LM flags (`--tensor-model-parallel-size`,
/// `--num-layers`, `pretrain_*.py`) is Megatron-LM's. Nothing when neither.
[[nodiscard]] std::optional<Launcher> detect_launcher(std::string_view text);

/// Reads the file's text into a LaunchConfig: Megatron-LM arguments, a torchtitan job TOML,
/// or NeMo-family YAML for a `.yaml` / `.yml` path (options.from overrides; detect_launcher
/// tells the others). UserError at FILE:LINE: KEY for a flag without a value, a degree that
/// is not a positive integer, an unresolvable $VAR behind a needed flag (torchrun's --nnodes
/// only when options.gpus is 0), a YAML syntax error, a YAML document that is not a mapping,
/// a YAML file with no GPU count under options.gpus 0, an unknown file type.
[[nodiscard]] LaunchConfig read_launch_config(std::string_view text, const std::string& path,
                                              const ImportOptions& options);

/// The scenario TOML of a read configuration: [model] (a preset when the architecture flags
/// match one, else its keys), [cluster] (options.cluster sized to the run's GPUs),
/// [training], [layout], then one `# not mapped: ...` comment per setting it has no key for.
/// UserError at the file's key when the degrees do not divide the GPUs, or when the model is
/// not known (no preset and no vocabulary size) or fits several presets and options.model
/// names none of them.
[[nodiscard]] std::string scenario_toml(const LaunchConfig& config, const ImportOptions& options);

/// read_launch_config then scenario_toml.
[[nodiscard]] std::string import_scenario(std::string_view text, const std::string& path,
                                          const ImportOptions& options);

}  // namespace tetra::interop
