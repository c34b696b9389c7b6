// LaunchConfig -> scenario TOML (docs/scenario-format.md): the GPUs and the degrees that divide
// them, the batch, the model (a preset when one matches), the cluster sized to the GPUs.

#include <algorithm>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "readers.hpp"
#include "tetra/base/error.hpp"
#include "tetra/hw/presets.hpp"
#include "tetra/interop/import.hpp"
#include "tetra/model/presets.hpp"

namespace tetra::interop {
namespace {

long long value_or(const std::optional<Number>& n, long long fallback) { return n ? n->value : fallback; }

// The error's place: the key's line when the file has it, else the file.
UserError error_at(const LaunchConfig& c, const std::optional<Number>& n, const std::string& key,
                   const std::string& message) {
  if (n) return UserError(n->where, n->key, message);
  return UserError(SourceLocation{c.path}, key, message);
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

std::string boolean(bool b) { return b ? "true" : "false"; }

// The degrees, the data-parallel size and the GPUs of the run.
struct Sizes {
  long long tp = 1, cp = 1, pp = 1, dp = 1, world = 1, dp_replicate = 1;
};

Sizes resolve_sizes(const LaunchConfig& c, const ImportOptions& o, int gpus_per_node) {
  Sizes s;
  s.tp = value_or(c.tp, 1);
  s.cp = value_or(c.cp, 1);
  s.pp = value_or(c.pp, 1);
  s.dp_replicate = value_or(c.dp_replicate, 1);
  const long long model_parallel = s.tp * s.cp * s.pp;
  const std::string degrees = "tp " + std::to_string(s.tp) + " x cp " + std::to_string(s.cp) + " x pp " +
                              std::to_string(s.pp) + " = " + std::to_string(model_parallel) + " GPUs";
  const bool shard_given = c.dp_shard && c.dp_shard->value > 0;
  // The GPUs: --gpus, else what the file says, else the fewest whole nodes the degrees fill.
  std::optional<Number> world_key = c.world;
  std::string hint = " (the file's node count may be a placeholder: --gpus gives the run's size)";
  if (o.gpus > 0) {
    s.world = o.gpus;
    // Sizes that do not divide --gpus are the file's: blame the first of pp, tp, cp it writes.
    world_key = Number{o.gpus, "--gpus", SourceLocation{c.path}};
    for (const auto* n : {&c.pp, &c.tp, &c.cp}) {
      if (*n && (*n)->value > 1 && world_key->key == "--gpus") world_key = **n;
    }
    hint = " (--gpus " + std::to_string(o.gpus) + ")";
  } else if (c.world) {
    s.world = c.world->value;
  } else if (shard_given) {
    s.world = model_parallel * s.dp_replicate * c.dp_shard->value;
  } else {
    s.world = std::lcm(model_parallel * s.dp_replicate, static_cast<long long>(gpus_per_node));
  }
  if (s.world % model_parallel != 0) {
    throw error_at(c, world_key, "--gpus",
                   degrees + " do not divide the run's " + std::to_string(s.world) + " GPUs" + hint);
  }
  s.dp = s.world / model_parallel;
  if (s.dp % s.dp_replicate != 0) {
    throw error_at(c, c.dp_replicate, "", std::to_string(s.dp_replicate) + " replicas do not divide the " +
                                              std::to_string(s.dp) + " data-parallel ranks");
  }
  if (shard_given && c.dp_shard->value * s.dp_replicate != s.dp) {
    throw error_at(c, c.dp_shard, "", degrees + " x " + std::to_string(c.dp_shard->value * s.dp_replicate) +
                                          " data-parallel ranks do not make the run's " + std::to_string(s.world) +
                                          " GPUs");
  }
  // Megatron-Core's parallel_state refuses hierarchical CP sizes whose product is not cp (checked
  // by division, which stays exact whatever bound parse_number puts on each level).
  if (c.cp_a2a && c.cp_ring &&
      (s.cp % c.cp_a2a->value != 0 || s.cp / c.cp_a2a->value != c.cp_ring->value)) {
    throw error_at(c, c.cp_ring, "", "hierarchical context-parallel sizes " + std::to_string(c.cp_a2a->value) +
                                         " x " + std::to_string(c.cp_ring->value) + " do not make cp " +
                                         std::to_string(s.cp));
  }
  return s;
}

// The built-in model whose shape the file's architecture flags describe, or "". A file
// without the vocabulary can fit several (llama2-70b and llama3.1-70b differ only there):
// --model picks one of them, else the import stops.
std::string matching_preset(const LaunchConfig& c, const ImportOptions& o) {
  if (!c.layers || !c.hidden || !c.heads) return "";
  std::vector<std::string> found;
  for (const model::Model& m : model::model_presets()) {
    const bool same = (c.arch.empty() || c.arch == model::to_string(m.arch)) && c.layers->value == m.layers &&
                      c.hidden->value == m.hidden && (!c.ffn_hidden || c.ffn_hidden->value == m.ffn_hidden) &&
                      c.heads->value == m.heads && value_or(c.kv_heads, c.heads->value) == m.kv_heads &&
                      (!c.vocab || c.vocab->value == m.vocab) && c.tied == m.tied_embeddings &&
                      value_or(c.experts, 0) == (m.moe ? m.moe->num_experts : 0) &&
                      (!c.top_k || (m.moe && c.top_k->value == m.moe->experts_per_token)) &&
                      (!c.moe_ffn_hidden || (m.moe && c.moe_ffn_hidden->value == m.moe->moe_ffn_hidden));
    if (same) found.push_back(m.name);
  }
  if (found.size() <= 1) return found.empty() ? "" : found.front();
  if (std::find(found.begin(), found.end(), o.model) != found.end()) return o.model;
  std::string names;
  for (const std::string& n : found) names += (names.empty() ? "" : " and ") + n;
  throw error_at(c, c.layers, "--model",
                 "the model's shape is that of " + names + ", which differ in vocabulary (the file does not give "
                 "it); --model names one");
}

// [model]: a preset, or the keys; whether the model has experts.
bool write_model(std::ostream& out, const LaunchConfig& c, const ImportOptions& o) {
  std::string preset = c.model_preset;
  if (preset.empty()) preset = matching_preset(c, o);
  if (preset.empty() && !c.layers && !o.model.empty()) preset = o.model;
  out << "[model]\n";
  if (!preset.empty()) {
    const auto m = model::find_model_preset(preset);
    if (!m) throw UserError(SourceLocation{c.path}, "--model", "'" + preset + "' is not a built-in model (tetrasim presets)");
    out << "preset = " << quoted(preset) << '\n';
    return m->is_moe();
  }
  if (!c.layers || !c.hidden || !c.heads) {
    throw error_at(c, c.model_name, "--model",
                   "the file does not give the model's shape and names no built-in model; --model PRESET names one");
  }
  if (!c.vocab) {
    throw error_at(c, c.layers, "--vocab-size",
                   "the model matches no built-in preset and the file does not give its vocabulary (the tokenizer "
                   "sets it); add --vocab-size or name a preset with --model");
  }
  const long long h = c.hidden->value;
  // Megatron-LM's default FFN width: 4h, or 2/3 of it rounded down to a multiple of 64 under
  // SwiGLU (arguments.py).
  const long long ffn = c.ffn_hidden ? c.ffn_hidden->value : (c.arch == "llama" ? (8 * h / 3) / 64 * 64 : 4 * h);
  out << "arch = " << quoted(c.arch.empty() ? "llama" : c.arch) << '\n'
      << "layers = " << c.layers->value << '\n'
      << "hidden = " << h << '\n'
      << "ffn_hidden = " << ffn << '\n'
      << "heads = " << c.heads->value << '\n'
      << "kv_heads = " << value_or(c.kv_heads, c.heads->value) << '\n'
      << "vocab = " << c.vocab->value << '\n'
      << "tied_embeddings = " << boolean(c.tied) << '\n';
  if (!c.experts) return false;
  out << "num_experts = " << c.experts->value << '\n'
      << "experts_per_token = " << value_or(c.top_k, 2) << '\n'  // Megatron-LM's --moe-router-topk default
      << "moe_ffn_hidden = " << value_or(c.moe_ffn_hidden, ffn) << '\n';
  return true;
}

void write_cluster(std::ostream& out, const ImportOptions& o, const hw::Cluster& cluster, const Sizes& s,
                   const LaunchConfig& c) {
  out << "\n[cluster]\npreset = " << quoted(o.cluster) << '\n';
  const long long per_node = cluster.gpus_per_node;
  if (s.world < per_node) {
    out << "gpus_per_node = " << s.world << '\n' << "nodes = 1\n";
  } else if (s.world % per_node == 0) {
    out << "nodes = " << s.world / per_node << '\n';
  } else {
    throw UserError(SourceLocation{c.path}, "--gpus", std::to_string(s.world) + " GPUs are not whole " + o.cluster +
                                                          " nodes of " + std::to_string(per_node));
  }
}

}  // namespace

std::string scenario_toml(const LaunchConfig& c, const ImportOptions& o) {
  const auto cluster = hw::find_cluster_preset(o.cluster);
  if (!cluster) throw UserError(SourceLocation{c.path}, "--cluster", "'" + o.cluster + "' is not a built-in cluster (tetrasim presets)");
  const Sizes s = resolve_sizes(c, o, cluster->gpus_per_node);
  std::ostringstream out;
  out << "# Imported by `tetrasim import` from " << detail::ascii_escaped(c.path) << " (" << to_string(c.launcher) << ").\n\n";
  const bool moe = write_model(out, c, o);
  write_cluster(out, o, *cluster, s, c);

  // The batch: torchtitan's is per data-parallel rank, one micro-batch without pipelining.
  const bool titan = c.launcher == Launcher::torchtitan;
  long long mbs = value_or(c.mbs, 1);
  if (titan && s.pp == 1) mbs = value_or(c.local_batch, 8);
  const long long global = c.global_batch ? c.global_batch->value
                                          : (titan ? value_or(c.local_batch, 8) : mbs) * s.dp;
  if (global % (mbs * s.dp) != 0) {
    throw error_at(c, c.global_batch, "global batch",
                   std::to_string(global) + " sequences do not split into micro-batches of " + std::to_string(mbs) +
                       " over " + std::to_string(s.dp) + " data-parallel ranks");
  }
  long long vp = value_or(c.vp, 1);
  if (c.layers_per_virtual_stage && c.layers) {
    const long long per_rank = c.layers->value / s.pp;
    if (c.layers->value % s.pp != 0 || per_rank % c.layers_per_virtual_stage->value != 0) {
      throw error_at(c, c.layers_per_virtual_stage, "", "does not divide the " + std::to_string(per_rank) +
                                                            " layers of a pipeline rank");
    }
    vp = per_rank / c.layers_per_virtual_stage->value;
  }
  std::string schedule = c.schedule;
  if (schedule.empty() && vp > 1) schedule = "interleaved";
  if (schedule == "interleaved" && vp == 1) vp = 2;  // torchtitan's looped schedules: two stages per rank

  out << "\n[training]\n"
      << "seq_len = " << value_or(c.seq_len, titan ? 2048 : 1024) << '\n'  // the launchers' defaults
      << "global_batch = " << global << '\n'
      << "precision = " << quoted(c.precision) << '\n';
  if (!c.fp8_recipe.empty() && c.precision == "fp8") out << "fp8_recipe = " << quoted(c.fp8_recipe) << '\n';
  if (!c.grad_dtype.empty()) out << "grad_dtype = " << quoted(c.grad_dtype) << '\n';
  out << "zero_stage = " << c.zero_stage.value_or(1) << '\n' << "framework = " << quoted(c.framework) << '\n';
  if (!c.attention.empty()) out << "attention = " << quoted(c.attention) << '\n';
  // Megatron-LM's overlaps are off unless asked for; the scenario's default is on.
  if (!titan) {
    out << "overlap_grad_reduce = " << boolean(c.overlap_grad_reduce.value_or(false)) << '\n'
        << "overlap_param_gather = " << boolean(c.overlap_param_gather.value_or(false)) << '\n';
  }
  if (c.tp_comm_overlap) out << "tp_comm_overlap = " << boolean(*c.tp_comm_overlap) << '\n';
  if (c.fp8_param_gather) out << "fp8_param_gather = " << boolean(*c.fp8_param_gather) << '\n';
  if (titan) {
    out << "compile = " << boolean(c.compile.value_or(false)) << '\n';
    if (c.compile.value_or(false)) out << "compile_loss = " << boolean(c.compile_loss.value_or(true)) << '\n';
    if (c.async_tp.value_or(false) && c.compile.value_or(false) && s.tp > 1) out << "async_tp = true\n";
  }
  for (const auto& [key, value] : c.training_keys) out << key << " = " << value << '\n';

  out << "\n[layout]\n"
      << "tp = " << s.tp << "\ncp = " << s.cp << "\npp = " << s.pp << "\ndp = " << s.dp << '\n'
      << "vp = " << vp << "\nmbs = " << mbs << "\nsp = " << boolean(c.sp) << '\n'
      << "recompute = " << quoted(c.recompute) << '\n';
  if (c.ac_freq) out << "ac_freq = " << c.ac_freq->value << '\n';
  if (!schedule.empty()) out << "schedule = " << quoted(schedule) << '\n';
  if (titan && s.dp_replicate > 1) out << "dp_replicate = " << s.dp_replicate << '\n';
  if (moe) {
    out << "ep = " << value_or(c.ep, 1) << '\n'
        << "etp = " << value_or(c.etp, titan ? 1 : s.tp) << '\n';  // Megatron-LM's default: tp
  }
  if (c.cp_a2a) out << "cp_a2a = " << c.cp_a2a->value << '\n';
  for (const auto& [key, value] : c.layout_keys) out << key << " = " << value << '\n';
  if (!c.not_mapped.empty()) out << '\n';
  for (const std::string& line : c.not_mapped) out << "# not mapped: " << detail::ascii_escaped(line) << '\n';
  return out.str();
}

}  // namespace tetra::interop
