// Megatron-LM arguments -> LaunchConfig. Flag names and defaults are those of
// NVIDIA/Megatron-LM megatron/training/arguments.py; torchrun's of torch/distributed/run.py.

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "readers.hpp"
#include "tetra/parallel/layout.hpp"
#include "shell_words.hpp"
#include "tetra/base/error.hpp"

namespace tetra::interop::detail {
namespace {

// One `--flag value...` of the command.
struct Flag {
  std::string name;
  std::vector<ShellWord> values;
  int line = 0;
};

std::vector<Flag> flags_of(const std::vector<ShellWord>& words) {
  std::vector<Flag> out;
  for (const ShellWord& w : words) {
    if (w.text.rfind("--", 0) == 0 && w.text.size() > 2) {
      const std::size_t eq = w.text.find('=');
      Flag f{w.text.substr(0, eq), {}, w.line};
      if (eq != std::string::npos) f.values.push_back({w.text.substr(eq + 1), w.line, w.unresolved});
      out.push_back(std::move(f));
    } else if (!out.empty()) {
      out.back().values.push_back(w);
    }
  }
  return out;
}

std::string written(const Flag& f) {
  std::string s = f.name;
  for (const auto& v : f.values) s += " " + v.text;
  return s;
}

// The one value of a flag, resolved.
const ShellWord& value_of(const Flag& f, const std::string& path) {
  const SourceLocation at{path, f.line};
  if (f.values.empty()) throw UserError(at, f.name, "needs a value");
  if (f.values.size() > 1) {
    throw UserError(at, f.name, "takes one value, not " + std::to_string(f.values.size()) + " ('" + written(f) + "')");
  }
  const ShellWord& v = f.values.front();
  if (!v.unresolved.empty()) {
    throw UserError(at, f.name, v.unresolved + " is not set in the file, so its value is unknown (write the number)");
  }
  return v;
}

Number number_of(const Flag& f, const std::string& path) {
  return parse_number(value_of(f, path).text, f.name, SourceLocation{path, f.line});
}

// Megatron-LM flags whose value is a positive integer, by the LaunchConfig member they set.
using NumberField = std::optional<Number> LaunchConfig::*;
const std::map<std::string, NumberField, std::less<>>& number_flags() {
  static const std::map<std::string, NumberField, std::less<>> flags{
      {"--tensor-model-parallel-size", &LaunchConfig::tp},
      {"--pipeline-model-parallel-size", &LaunchConfig::pp},
      {"--context-parallel-size", &LaunchConfig::cp},
      {"--expert-model-parallel-size", &LaunchConfig::ep},
      {"--expert-tensor-parallel-size", &LaunchConfig::etp},
      {"--virtual-pipeline-model-parallel-size", &LaunchConfig::vp},
      {"--num-layers-per-virtual-pipeline-stage", &LaunchConfig::layers_per_virtual_stage},
      {"--micro-batch-size", &LaunchConfig::mbs},
      {"--global-batch-size", &LaunchConfig::global_batch},
      {"--seq-length", &LaunchConfig::seq_len},
      {"--num-layers", &LaunchConfig::layers},
      {"--hidden-size", &LaunchConfig::hidden},
      {"--ffn-hidden-size", &LaunchConfig::ffn_hidden},
      {"--num-attention-heads", &LaunchConfig::heads},
      {"--num-query-groups", &LaunchConfig::kv_heads},
      {"--vocab-size", &LaunchConfig::vocab},
      {"--num-experts", &LaunchConfig::experts},
      {"--moe-router-topk", &LaunchConfig::top_k},
      {"--moe-ffn-hidden-size", &LaunchConfig::moe_ffn_hidden},
  };
  return flags;
}

// A flag with a name value; returns whether it was one of them.
bool name_flag(const Flag& f, const std::string& path, LaunchConfig& c, bool& gqa, std::string& granularity,
               std::string& method, std::string& normalization) {
  if (f.name == "--recompute-granularity") {
    granularity = value_of(f, path).text;
    if (granularity != "full" && granularity != "selective") {
      throw UserError(SourceLocation{path, f.line}, f.name, "'" + granularity + "' is not full or selective");
    }
  } else if (f.name == "--recompute-method") {
    method = value_of(f, path).text;
  } else if (f.name == "--fp8-format") {
    c.precision = "fp8";  // e4m3 or hybrid: FP8 linears either way
  } else if (f.name == "--fp8-recipe") {
    // Megatron-LM's tensorwise is Transformer Engine's Float8CurrentScaling.
    static const std::map<std::string, std::string, std::less<>> recipes{
        {"delayed", "delayed"}, {"tensorwise", "current"}, {"mxfp8", "mxfp8"}, {"blockwise", "blockwise"}};
    const auto it = recipes.find(value_of(f, path).text);
    if (it == recipes.end()) return false;
    c.fp8_recipe = it->second;
  } else if (f.name == "--attention-backend") {
    // AttnBackend (megatron/core/transformer/enums.py): flash -> FlashAttention, fused -> cuDNN
    // fused attention, unfused / local -> the softmax between two GEMMs, auto -> TE's choice.
    static const std::map<std::string, std::string, std::less<>> kernels{
        {"flash", "flash2"}, {"fused", "cudnn"}, {"unfused", "fused"}, {"local", "fused"}};
    const std::string v = value_of(f, path).text;
    const auto it = kernels.find(v);
    if (it == kernels.end()) return v == "auto";
    c.attention = it->second;
  } else if (f.name == "--normalization") {
    normalization = value_of(f, path).text;
  } else if (f.name == "--group-query-attention") {
    gqa = true;
  } else {
    return false;
  }
  return true;
}

// A flag that takes no value; returns whether it was one of them.
bool switch_flag(const Flag& f, LaunchConfig& c, bool& swiglu, bool& untied) {
  static const std::map<std::string, std::optional<bool> LaunchConfig::*, std::less<>> toggles{
      {"--overlap-grad-reduce", &LaunchConfig::overlap_grad_reduce},
      {"--overlap-param-gather", &LaunchConfig::overlap_param_gather},
      {"--tp-comm-overlap", &LaunchConfig::tp_comm_overlap},
      {"--fp8-param-gather", &LaunchConfig::fp8_param_gather},
  };
  if (const auto it = toggles.find(f.name); it != toggles.end()) {
    c.*(it->second) = true;
  } else if (f.name == "--sequence-parallel") {
    c.sp = true;
  } else if (f.name == "--use-distributed-optimizer") {
    c.zero_stage = 1;
  } else if (f.name == "--bf16") {
    if (c.precision != "fp8") c.precision = "bf16";
  } else if (f.name == "--fp16") {
    if (c.precision != "fp8") c.precision = "fp16";
  } else if (f.name == "--grad-reduce-in-bf16") {
    c.grad_dtype = "bf16";
  } else if (f.name == "--use-flash-attn") {
    c.attention = "flash2";
  } else if (f.name == "--swiglu") {
    swiglu = true;
  } else if (f.name == "--untie-embeddings-and-output-weights") {
    untied = true;
  } else {
    return false;
  }
  return true;
}

// torchrun's --nnodes x --nproc_per_node, when both are plain integers or needed.
void read_world(const std::vector<Flag>& launcher, const std::string& path, const ImportOptions& options,
                LaunchConfig& c) {
  const Flag* nodes = nullptr;
  const Flag* per_node = nullptr;
  for (const Flag& f : launcher) {
    if (f.name == "--nnodes") nodes = &f;
    if (f.name == "--nproc_per_node" || f.name == "--nproc-per-node") per_node = &f;
  }
  if (nodes == nullptr || per_node == nullptr) return;
  if (options.gpus > 0) {  // the user's size: the file's is not needed
    c.not_mapped.push_back(written(*nodes));
    c.not_mapped.push_back(written(*per_node));
    return;
  }
  const Number n = number_of(*nodes, path);
  const Number g = number_of(*per_node, path);
  c.world = Number{n.value * g.value, "--nnodes", n.where};
}

}  // namespace

LaunchConfig read_megatron(std::string_view text, const std::string& path, const ImportOptions& options) {
  LaunchConfig c;
  c.launcher = Launcher::megatron;
  c.path = path;
  const std::vector<ShellWord> words = launch_command(text, path);
  if (words.empty()) {
    throw UserError(SourceLocation{path, 1}, "--from", "no Megatron-LM command in the file (no --num-layers, "
                                              "--tensor-model-parallel-size, ... flag)");
  }
  // torchrun's arguments come before the program, Megatron-LM's after it.
  std::ptrdiff_t program = -1;
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (words[i].text.size() > 3 && words[i].text.ends_with(".py")) {
      program = static_cast<std::ptrdiff_t>(i);
      break;
    }
  }
  const std::vector<ShellWord> before(words.begin(), words.begin() + std::max<std::ptrdiff_t>(program, 0));
  const std::vector<ShellWord> after(words.begin() + program + 1, words.end());
  read_world(flags_of(before), path, options, c);

  bool gqa = false, swiglu = false, untied = false;
  bool mask_per_sample = false, no_mask = false;  // the data loader's attention mask
  std::optional<Number> workers;                  // the last --num-workers, as argparse keeps it
  std::string granularity, method, normalization;
  std::optional<Number> recompute_layers;
  for (const Flag& f : flags_of(after)) {
    if (const auto it = number_flags().find(f.name); it != number_flags().end()) {
      c.*(it->second) = number_of(f, path);
    } else if (f.name == "--recompute-num-layers") {
      recompute_layers = number_of(f, path);
    } else if (f.name == "--reset-attention-mask" || f.name == "--reset-position-ids" || f.name == "--eod-mask-loss") {
      // GPTDataset cannot cache the mask: it is built for every sample (parallel/data_loader.hpp).
      mask_per_sample = true;
    } else if (f.name == "--no-create-attention-mask-in-dataloader") {
      no_mask = true;
    } else if (f.name == "--num-workers") {
      workers = parse_number(value_of(f, path).text, f.name, SourceLocation{path, f.line}, 0);
    } else if (f.name == "--cp-comm-type") {
      // One type for every layer maps; a per-layer list does not.
      const auto comm = f.values.size() == 1 ? parallel::parse_cp_comm(f.values.front().text) : std::nullopt;
      if (comm) {
        c.layout_keys.emplace_back("cp_comm_type", std::string("\"") + parallel::to_string(*comm) + "\"");
      } else {
        c.not_mapped.push_back(written(f));
      }
    } else if (f.name == "--hierarchical-context-parallel-sizes") {
      // [all-to-all level, ring level] of a2a+p2p: the first is cp_a2a; other depths do not map.
      if (f.values.size() == 2) {
        c.cp_a2a = parse_number(f.values.front().text, f.name, SourceLocation{path, f.line});
        c.cp_ring = parse_number(f.values.back().text, f.name, SourceLocation{path, f.line});
      } else {
        c.not_mapped.push_back(written(f));
      }
    } else if (!switch_flag(f, c, swiglu, untied) &&
               !name_flag(f, path, c, gqa, granularity, method, normalization)) {
      c.not_mapped.push_back(written(f));
    }
  }
  if (workers) c.training_keys.emplace_back("dataloader_workers", std::to_string(workers->value));
  if (no_mask) {
    c.training_keys.emplace_back("dataloader_mask", "\"none\"");
  } else if (mask_per_sample) {
    c.training_keys.emplace_back("dataloader_mask", "\"per_sample\"");
  }
  if (!gqa) c.kv_heads.reset();  // --num-query-groups counts only with --group-query-attention
  c.arch = swiglu || normalization == "RMSNorm" ? "llama" : "gpt";
  c.tied = !untied;
  if (granularity == "selective") c.recompute = "selective";
  if (granularity == "full") {
    c.recompute = "full";
    // recompute = "full" prices every layer recomputed from its own input: uniform groups of
    // one layer. Groups of several layers, or only some layers (block), are priced the same.
    const long long n = recompute_layers ? recompute_layers->value : 1;
    if (method == "block" || n != 1) {
      c.not_mapped.push_back("--recompute-method " + (method.empty() ? std::string("uniform") : method) +
                             " --recompute-num-layers " + std::to_string(n) +
                             " (priced as recompute = \"full\", every layer from its input)");
    }
  }
  if (!c.zero_stage) c.zero_stage = 0;
  // Megatron-LM turns sequence parallelism off without tensor parallelism (arguments.py).
  if (!c.tp || c.tp->value == 1) c.sp = false;
  return c;
}

}  // namespace tetra::interop::detail
