#pragma once
/// `search --export` / `plan --export`: a layout written as the launcher's own configuration,
/// the inverse of import (import of the text gives back the same layout, batch and precision).

#include <string>

#include "tetra/interop/launch_config.hpp"
#include "tetra/model/model.hpp"
#include "tetra/parallel/layout.hpp"

namespace tetra::interop {

/// One run to export: the model, how it trains (with the precision, compile and gradient dtype
/// the layout was ranked in) and the layout, on `gpus` GPUs of `gpus_per_node` each.
struct ExportInput {
  const model::Model& model;
  const parallel::Training& training;
  const parallel::Layout& layout;
  long long gpus = 0;
  int gpus_per_node = 8;
};

/// A torchrun command line running Megatron-LM's pretrain_gpt.py with the layout's flags
/// (parallel degrees, batch, recomputation, precision, overlaps, the architecture), one flag
/// per line joined by `\`. What Megatron-LM has no flag for (a schedule other than 1F1B or
/// interleaved, ZeRO stages 2 and 3, torchao recipes) is a `#` comment line above the command.
[[nodiscard]] std::string megatron_arguments(const ExportInput& in);

/// The [model], [training], [parallelism], [activation_checkpoint] and [compile] tables of a
/// torchtitan job file for the layout; settings torchtitan does not have are `#` comments.
[[nodiscard]] std::string torchtitan_job(const ExportInput& in);

/// Megatron-Bridge ConfigContainer overrides (YAML sections model, train, dataset, ddp,
/// optimizer, mixed_precision) for the layout; a first `#` line names the GPUs, which the file
/// cannot hold (import reads it back with --gpus). Settings Megatron-Core does not have are `#`
/// comments.
[[nodiscard]] std::string nemo_overrides(const ExportInput& in);

/// megatron_arguments, torchtitan_job or nemo_overrides.
[[nodiscard]] std::string export_layout(Launcher launcher, const ExportInput& in);

}  // namespace tetra::interop
