#pragma once
/// What a launcher's configuration says about one training run, in the launcher's own terms,
/// before it becomes a scenario: each value remembers where in the file it was written, so a
/// value the scenario cannot take is reported at its file:line and flag.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tetra/base/error.hpp"

namespace tetra::interop {

/// The launchers whose configurations tetrasim reads and writes.
/// megatron: Megatron-LM command-line arguments (`pretrain_gpt.py --tensor-model-parallel-size
/// ...`, in a shell script or a text file). torchtitan: a torchtitan job TOML file. nemo: a
/// Megatron-Bridge ConfigContainer YAML (a recipe's dump or overrides) or a NeMo launcher
/// training YAML (`trainer:` and `model:`).
enum class Launcher { megatron, torchtitan, nemo };

/// "megatron" | "torchtitan" | "nemo".
[[nodiscard]] const char* to_string(Launcher launcher) noexcept;
/// Inverse of to_string; nothing for an unknown name.
[[nodiscard]] std::optional<Launcher> parse_launcher(std::string_view name) noexcept;

/// An integer from the file, with the key (flag) and place it was written.
struct Number {
  long long value = 0;
  std::string key;      ///< "--tensor-model-parallel-size", "[parallelism].tensor_parallel_degree"
  SourceLocation where;
};

/// The run, as the file describes it. Unset optionals were not in the file; names are already
/// in the scenario's spelling (docs/scenario-format.md).
struct LaunchConfig {
  Launcher launcher = Launcher::megatron;
  std::string path;  ///< the file as given

  // Layout: parallel degrees and batch.
  std::optional<Number> tp, pp, cp, ep, etp;
  std::optional<Number> dp_shard, dp_replicate;  ///< torchtitan; -1 = what the others leave
  std::optional<Number> vp;                      ///< model chunks per pipeline rank
  /// Hierarchical CP (`a2a+p2p`): the all-to-all level and the ring level, whose product is cp.
  std::optional<Number> cp_a2a, cp_ring;
  std::optional<Number> layers_per_virtual_stage;
  std::optional<Number> mbs, global_batch;
  std::optional<Number> local_batch;  ///< torchtitan: sequences per data-parallel rank per step
  std::optional<Number> seq_len;
  std::optional<Number> world;        ///< GPUs of the run (torchrun --nnodes x --nproc_per_node)
  bool sp = false;
  std::string recompute = "none";
  std::optional<Number> ac_freq;  ///< torchtitan selective_ac_option as a number
  std::string schedule;           ///< "" = the launcher's default

  // Training.
  std::string framework = "megatron";
  std::optional<int> zero_stage;
  std::string precision = "bf16";
  std::string fp8_recipe;  ///< "" = the scenario default for precision fp8
  std::string grad_dtype;  ///< "" = fp32
  std::string attention;   ///< "" = the scenario default
  std::optional<bool> overlap_grad_reduce, overlap_param_gather, tp_comm_overlap, fp8_param_gather;
  std::optional<bool> compile, compile_loss, async_tp;

  // Model: a preset the file names (torchtitan), or the architecture flags (Megatron-LM).
  std::string model_preset;
  std::optional<Number> model_name;  ///< where the preset was named (value unused)
  std::string arch;                  ///< "llama" or "gpt"; "" = not told
  bool tied = false;                 ///< the output layer shares the input embedding
  std::optional<Number> layers, hidden, ffn_hidden, heads, kv_heads, vocab, experts, top_k,
      moe_ffn_hidden;

  /// Scenario keys the file sets under Megatron-Core's names (first_stage_layers,
  /// recompute_modules, cuda_graph, ...), each as a key and its TOML value text, written after
  /// the [layout] / [training] keys above.
  std::vector<std::pair<std::string, std::string>> layout_keys, training_keys;

  /// Settings with no scenario key, as written ("--lr 1e-4", "[optimizer].lr = 0.0003"): the
  /// scenario lists them as comments.
  std::vector<std::string> not_mapped;
};

}  // namespace tetra::interop
