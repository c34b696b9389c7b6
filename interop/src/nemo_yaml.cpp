// NeMo-family YAML -> LaunchConfig. Two dialects share the `model:` names of Megatron-Core's
// TransformerConfig:
// - Megatron-Bridge's ConfigContainer (NVIDIA-NeMo/Megatron-Bridge
//   src/megatron/bridge/training/config.py): sections model, train, dataset, ddp, optimizer,
//   mixed_precision, comm_overlap. At run time mixed_precision.py overrides the precision keys
//   of model, optimizer and ddp, and comm_overlap.py decides tp_comm_overlap and, under the
//   distributed optimizer, the data-parallel overlaps (its nulls: on when dp > 1).
// - NeMo 1's launcher (NVIDIA/NeMo-Framework-Launcher launcher_scripts/conf/training/):
//   trainer.num_nodes x trainer.devices, model.micro_batch_size, model.encoder_seq_length,
//   model.activations_checkpoint_*, model.optim.*.

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <string>

#include "readers.hpp"
#include "tetra/parallel/layout.hpp"
#include "tetra/base/error.hpp"
#include "tetra/parallel/cuda_graph.hpp"
#include "tetra/parallel/recompute_modules.hpp"
#include "yaml_tree.hpp"

namespace tetra::interop::detail {
namespace {

using Kind = YamlNode::Kind;

// The whole text as a finite double; nothing when it is not one.
std::optional<double> finite_double(const std::string& text) {
  double v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

bool unset(const YamlNode& n) {
  return n.is_null() || (n.kind == Kind::sequence && n.items.empty()) ||
         (n.kind == Kind::mapping && n.entries.empty());
}

// A value as the file writes it, on one line: sequences and mappings in flow style, cut at
// 160 characters.
std::string written(const YamlNode& n) {
  std::string out;
  if (n.kind == Kind::scalar) {
    out = n.plain ? n.value : "\"" + n.value + "\"";
  } else if (n.kind == Kind::sequence) {
    for (const YamlNode& item : n.items) out += (out.empty() ? "" : ", ") + written(item);
    out = "[" + out + "]";
  } else {
    for (const YamlEntry& e : n.entries) out += (out.empty() ? "" : ", ") + e.key + ": " + written(e.value);
    out = "{" + out + "}";
  }
  return out.size() > 160 ? out.substr(0, 157) + "..." : out;
}

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// The precision keys of one section: mixed_precision, or model with ddp (unset: "" / nothing).
struct PrecisionKeys {
  std::optional<bool> bf16, fp16, fp8_param_gather, grad_in_fp32;
  std::string fp8, fp8_recipe, fp4;
  bool seen = false;
};

// Megatron-Bridge's named mixed-precision recipes (mixed_precision.py), by what they set.
bool named_recipe(std::string name, PrecisionKeys& p) {
  std::replace(name.begin(), name.end(), '-', '_');
  const bool fp16 = name.rfind("fp16", 0) == 0;
  if (!fp16 && name.rfind("bf16", 0) != 0) return false;
  p.bf16 = !fp16;
  p.fp16 = fp16;
  p.grad_in_fp32 = !fp16;
  p.fp8_param_gather = false;
  const std::string rest = name.substr(4);
  if (rest == "_mixed") return true;
  p.fp8 = "hybrid";
  p.fp8_param_gather = true;
  if (rest == "_with_fp8_delayed_scaling_mixed") {
    p.fp8_recipe = "delayed";
  } else if (rest == "_with_mxfp8_mixed") {
    p.fp8_recipe = "mxfp8";
  } else if (rest == "_with_fp8_current_scaling_mixed") {
    p.fp8_recipe = "tensorwise";
  } else if (rest == "_with_fp8_subchannel_scaling_mixed") {
    p.fp8_recipe = "blockwise";
    p.fp8_param_gather = false;
  } else if (rest == "_with_nvfp4_mixed") {
    p.fp8.clear();
    p.fp4 = "e2m1";
    p.fp8_param_gather = false;
  } else {
    return false;
  }
  return true;
}

// Megatron-Core's fp8_recipe as the scenario's (tensorwise is Transformer Engine's current
// scaling); "" when it has none.
std::string scenario_recipe(const std::string& r) {
  if (r == "tensorwise") return "current";
  if (r == "delayed" || r == "mxfp8" || r == "blockwise") return r;
  return "";
}

class NemoReader {
 public:
  NemoReader(const std::string& path, LaunchConfig& c) : path_(path), c_(c) {}

  void walk(const std::string& prefix, const YamlNode& map) {
    for (const YamlEntry& e : map.entries) {
      const std::string full = prefix + e.key;
      if (read_key(full, e.value)) continue;
      if (e.value.kind == Kind::mapping) {
        if (full == "comm_overlap") comm_overlap_ = true;
        if (full == "mixed_precision") mixed_.seen = true;
        walk(full + ".", e.value);
      } else if (!unset(e.value)) {
        c_.not_mapped.push_back(full + " = " + written(e.value));
      }
    }
  }

  void finish(const ImportOptions& options);

 private:
  SourceLocation where(const YamlNode& n) const { return SourceLocation{path_, n.line, n.column}; }

  // One value a mapped key needs: a scalar, not a Hydra interpolation.
  const std::string& scalar(const std::string& key, const YamlNode& n) const {
    if (n.kind != Kind::scalar) throw UserError(where(n), key, "is not a single value");
    if (n.value.find("${") != std::string::npos) {
      throw UserError(where(n), key, "'" + printable(n.value) + "' is an interpolation, so its value is unknown "
                                                               "(write the value)");
    }
    return n.value;
  }
  std::optional<Number> integer(const std::string& key, const YamlNode& n) const {
    if (n.is_null()) return std::nullopt;
    const std::string& text = scalar(key, n);
    const bool shown = std::all_of(text.begin(), text.end(), [](char ch) { return ch >= 0x20 && ch < 0x7F; });
    if (!shown || text.size() > 40) throw UserError(where(n), key, "is not an integer");
    return parse_number(text, key, where(n));
  }
  std::optional<bool> flag(const std::string& key, const YamlNode& n) const {
    if (n.is_null()) return std::nullopt;
    const int b = n.boolean();
    if (b < 0) throw UserError(where(n), key, "'" + printable(scalar(key, n)) + "' is not true or false");
    return b == 1;
  }
  std::string name(const std::string& key, const YamlNode& n) const { return n.is_null() ? "" : scalar(key, n); }

  bool read_key(const std::string& key, const YamlNode& n);
  bool read_layout_key(const std::string& key, const YamlNode& n);
  bool read_model_key(const std::string& key, const YamlNode& n);
  bool read_precision_key(const std::string& key, const YamlNode& n);
  bool read_training_key(const std::string& key, const YamlNode& n);
  bool read_nemo1_key(const std::string& key, const YamlNode& n);
  void finish_precision();
  void finish_layout();
  void finish_training();
  void cuda_graphs();

  std::string path_;
  LaunchConfig& c_;
  // What only the whole file decides.
  PrecisionKeys mixed_, model_;
  bool comm_overlap_ = false;
  std::optional<bool> dist_opt_, ddp_grad_overlap_, ddp_param_overlap_, comm_tp_, comm_grad_, comm_param_;
  std::optional<bool> model_tp_comm_, megatron_fsdp_, glu_, tied_, flash_, pad_, a2a_, loss_fusion_;
  std::optional<bool> router_fusion_;
  std::string balancing_ = "aux_loss";  // Megatron-Core's moe_router_load_balancing_type default
  bool aux_loss_ = false;               // a moe_aux_loss_coeff above 0 (default 0)
  std::optional<bool> embedding_split_, loss_split_, enable_graphs_;
  std::string granularity_, method_, sharding_, norm_, activation_, dispatcher_, flex_, graph_impl_, optim_name_,
      cp_comm_;
  std::string capacity_, grad_sync_dtype_;
  const YamlNode* modules_ = nullptr;
  const YamlNode* graph_scope_ = nullptr;
  const YamlNode* hierarchical_cp_ = nullptr;
  std::optional<Number> recompute_layers_, model_seq_, nodes_, devices_, first_layers_, last_layers_;
};

bool NemoReader::read_key(const std::string& key, const YamlNode& n) {
  using Field = std::optional<Number> LaunchConfig::*;
  static const std::map<std::string, Field, std::less<>> numbers{
      {"model.tensor_model_parallel_size", &LaunchConfig::tp},
      {"model.pipeline_model_parallel_size", &LaunchConfig::pp},
      {"model.context_parallel_size", &LaunchConfig::cp},
      {"model.expert_model_parallel_size", &LaunchConfig::ep},
      {"model.expert_tensor_parallel_size", &LaunchConfig::etp},
      {"model.virtual_pipeline_model_parallel_size", &LaunchConfig::vp},
      {"model.num_layers", &LaunchConfig::layers},
      {"model.hidden_size", &LaunchConfig::hidden},
      {"model.ffn_hidden_size", &LaunchConfig::ffn_hidden},
      {"model.num_attention_heads", &LaunchConfig::heads},
      {"model.num_query_groups", &LaunchConfig::kv_heads},
      {"model.vocab_size", &LaunchConfig::vocab},
      {"model.num_moe_experts", &LaunchConfig::experts},
      {"model.moe_router_topk", &LaunchConfig::top_k},
      {"model.moe_ffn_hidden_size", &LaunchConfig::moe_ffn_hidden},
      {"train.global_batch_size", &LaunchConfig::global_batch},
      {"train.micro_batch_size", &LaunchConfig::mbs},
      {"model.global_batch_size", &LaunchConfig::global_batch},  // NeMo 1
      {"model.micro_batch_size", &LaunchConfig::mbs},
      {"dataset.seq_length", &LaunchConfig::seq_len},
      {"dataset.sequence_length", &LaunchConfig::seq_len},
      {"model.data.seq_length", &LaunchConfig::seq_len},
  };
  if (const auto it = numbers.find(key); it != numbers.end()) {
    if (auto v = integer(key, n)) c_.*(it->second) = v;
    return true;
  }
  return read_layout_key(key, n) || read_model_key(key, n) || read_precision_key(key, n) ||
         read_training_key(key, n) || read_nemo1_key(key, n);
}

bool NemoReader::read_layout_key(const std::string& key, const YamlNode& n) {
  if (key == "model.sequence_parallel") {
    c_.sp = flag(key, n).value_or(false);
  } else if (key == "model.recompute_granularity" || key == "model.activations_checkpoint_granularity") {
    granularity_ = name(key, n);
    if (!granularity_.empty() && granularity_ != "full" && granularity_ != "selective") {
      throw UserError(where(n), key, "'" + printable(granularity_) + "' is not full, selective or null");
    }
  } else if (key == "model.recompute_method" || key == "model.activations_checkpoint_method") {
    method_ = name(key, n);
  } else if (key == "model.recompute_num_layers" || key == "model.activations_checkpoint_num_layers") {
    recompute_layers_ = integer(key, n);
  } else if (key == "model.recompute_modules") {
    if (n.kind == Kind::mapping) throw UserError(where(n), key, "is not a list of module names");
    modules_ = &n;
  } else if (key == "model.num_layers_in_first_pipeline_stage") {
    first_layers_ = integer(key, n);
  } else if (key == "model.num_layers_in_last_pipeline_stage") {
    last_layers_ = integer(key, n);
  } else if (key == "model.account_for_embedding_in_pipeline_split") {
    embedding_split_ = flag(key, n);
  } else if (key == "model.account_for_loss_in_pipeline_split") {
    loss_split_ = flag(key, n);
  } else if (key == "model.moe_token_dispatcher_type") {
    dispatcher_ = name(key, n);
  } else if (key == "model.moe_flex_dispatcher_backend") {
    flex_ = name(key, n);
  } else if (key == "model.hierarchical_context_parallel_sizes") {
    hierarchical_cp_ = &n;
  } else if (key == "model.cp_comm_type") {
    // One type for every layer maps; a per-layer list does not.
    if (n.kind == Kind::scalar) {
      cp_comm_ = name(key, n);
    } else {
      c_.not_mapped.push_back("model.cp_comm_type (a per-layer list)");
    }
  } else {
    return false;
  }
  return true;
}

bool NemoReader::read_model_key(const std::string& key, const YamlNode& n) {
  if (key == "model.gated_linear_unit") {
    glu_ = flag(key, n);
  } else if (key == "model.normalization") {
    norm_ = lower(name(key, n));
  } else if (key == "model.share_embeddings_and_output_weights") {
    tied_ = flag(key, n);
  } else if (key == "model.seq_length" || key == "model.encoder_seq_length") {
    model_seq_ = integer(key, n);
  } else if (key == "model.attention_backend") {
    // AttnBackend (megatron/core/transformer/enums.py), by name; auto and null: TE chooses.
    std::string v = name(key, n);
    if (v.rfind("AttnBackend.", 0) == 0) v = v.substr(12);
    static const std::map<std::string, std::string, std::less<>> kernels{
        {"flash", "flash2"}, {"fused", "cudnn"}, {"unfused", "fused"}, {"local", "fused"}};
    const auto it = kernels.find(v);
    if (it != kernels.end()) c_.attention = it->second;
    return it != kernels.end() || v.empty() || v == "auto";
  } else if (key == "model.cross_entropy_loss_fusion") {
    loss_fusion_ = flag(key, n);
  } else if (key == "model.cuda_graph_impl") {
    graph_impl_ = name(key, n);
  } else if (key == "model.cuda_graph_scope") {
    graph_scope_ = &n;
  } else if (key == "model.enable_cuda_graph") {
    enable_graphs_ = flag(key, n);
  } else if (key == "model.moe_expert_capacity_factor") {
    // Written back in the shortest form that reads as the same double: always valid TOML.
    const std::string text = name(key, n);
    capacity_.clear();
    if (!text.empty()) {
      const std::optional<double> v = finite_double(text);
      if (!v || *v <= 0) throw UserError(where(n), key, "is not a positive number");
      char buf[64];
      capacity_.assign(buf, std::to_chars(buf, buf + sizeof buf, *v).ptr);
    }
  } else if (key == "model.moe_pad_expert_input_to_capacity") {
    pad_ = flag(key, n);
  } else if (key == "model.overlap_moe_expert_parallel_comm") {
    a2a_ = flag(key, n);
  } else if (key == "model.moe_router_fusion") {
    router_fusion_ = flag(key, n);
  } else if (key == "model.moe_router_load_balancing_type") {
    balancing_ = name(key, n);
  } else if (key == "model.moe_aux_loss_coeff") {
    // A list gives one coefficient per balancing type (Megatron-Core get_aux_loss_coeff); the
    // loss runs when any is above 0.
    aux_loss_ = false;
    const auto read = [&](const YamlNode& v) {
      const std::optional<double> x = finite_double(scalar(key, v));
      if (!x || *x < 0) throw UserError(where(v), key, "is not a number >= 0");
      aux_loss_ = aux_loss_ || *x > 0;
    };
    if (n.kind == Kind::sequence) {
      for (const YamlNode& v : n.items) read(v);
    } else if (!n.is_null()) {
      read(n);
    }
  } else {
    return false;
  }
  return true;
}

bool NemoReader::read_precision_key(const std::string& key, const YamlNode& n) {
  const bool mixed = key.rfind("mixed_precision.", 0) == 0;
  if (key == "mixed_precision") {
    if (n.kind != Kind::scalar || n.is_null()) return false;
    mixed_.seen = named_recipe(scalar(key, n), mixed_);
    return mixed_.seen;
  }
  if (!mixed && key.rfind("model.", 0) != 0 && key != "ddp.grad_reduce_in_fp32" && key != "ddp.fp8_param_gather") {
    return false;
  }
  PrecisionKeys& p = mixed ? mixed_ : model_;
  const std::string leaf = key.substr(key.find('.') + 1);
  if (leaf == "bf16") {
    p.bf16 = flag(key, n);
  } else if (leaf == "fp16") {
    p.fp16 = flag(key, n);
  } else if (leaf == "fp8") {
    // Megatron-Core: a format name or null; NeMo 1: true / false.
    const int b = n.boolean();
    p.fp8 = b == 1 ? "hybrid" : b == 0 ? "" : name(key, n);
  } else if (leaf == "fp8_recipe") {
    p.fp8_recipe = name(key, n);
  } else if (leaf == "fp8_param_gather" || leaf == "fp8_param" || leaf == "fp8_params") {
    if (const auto v = flag(key, n)) p.fp8_param_gather = *v || p.fp8_param_gather.value_or(false);
  } else if (leaf == "fp4") {
    p.fp4 = name(key, n);
  } else if (leaf == "grad_reduce_in_fp32") {
    p.grad_in_fp32 = flag(key, n);
  } else {
    return false;
  }
  return true;
}

bool NemoReader::read_training_key(const std::string& key, const YamlNode& n) {
  if (key == "ddp.use_distributed_optimizer") {
    dist_opt_ = flag(key, n);
  } else if (key == "ddp.overlap_grad_reduce") {
    ddp_grad_overlap_ = flag(key, n);
  } else if (key == "ddp.overlap_param_gather") {
    ddp_param_overlap_ = flag(key, n);
  } else if (key == "ddp.use_megatron_fsdp") {
    megatron_fsdp_ = flag(key, n);
  } else if (key == "ddp.data_parallel_sharding_strategy") {
    sharding_ = name(key, n);
  } else if (key == "comm_overlap.tp_comm_overlap") {
    comm_tp_ = flag(key, n);
  } else if (key == "comm_overlap.overlap_grad_reduce") {
    comm_grad_ = flag(key, n);
  } else if (key == "comm_overlap.overlap_param_gather") {
    comm_param_ = flag(key, n);
  } else if (key == "model.tp_comm_overlap" || key == "model.ub_tp_comm_overlap") {
    model_tp_comm_ = flag(key, n);
  } else if (key == "optimizer.optimizer") {
    return name(key, n) == "adam";  // the scenario's only optimizer
  } else if (key == "optimizer.use_distributed_optimizer" || key == "optimizer.overlap_param_gather" ||
             key == "optimizer.bf16" || key == "optimizer.fp16") {
    return true;  // copies of the ddp and mixed_precision keys, which decide
  } else {
    return false;
  }
  return true;
}

bool NemoReader::read_nemo1_key(const std::string& key, const YamlNode& n) {
  if (key == "trainer.num_nodes") {
    nodes_ = integer(key, n);
  } else if (key == "trainer.devices") {
    devices_ = integer(key, n);
  } else if (key == "trainer.precision") {
    const std::string v = name(key, n);
    if (v == "bf16" || v == "bf16-mixed") {
      model_.bf16 = true;
    } else if (v == "16" || v == "16-mixed" || v == "fp16") {
      model_.fp16 = true;
    } else {
      return false;
    }
  } else if (key == "model.activation") {
    activation_ = lower(name(key, n));
  } else if (key == "model.use_flash_attention") {
    flash_ = flag(key, n);
  } else if (key == "model.optim.name") {
    optim_name_ = name(key, n);
  } else if (key == "model.optim.overlap_grad_sync") {
    ddp_grad_overlap_ = flag(key, n);
  } else if (key == "model.optim.overlap_param_sync") {
    ddp_param_overlap_ = flag(key, n);
  } else if (key == "model.optim.grad_sync_dtype") {
    grad_sync_dtype_ = name(key, n);
  } else {
    return false;
  }
  return true;
}

void NemoReader::finish_precision() {
  // mixed_precision, when the file has it, overrides the model's and ddp's keys at run time.
  const PrecisionKeys& p = mixed_.seen ? mixed_ : model_;
  const bool fp16 = p.fp16.value_or(false);
  if (!p.fp4.empty()) {
    c_.precision = "fp8";
    c_.fp8_recipe = "nvfp4";  // Megatron-Core's only FP4 recipe
  } else if (!p.fp8.empty()) {
    c_.precision = "fp8";
    // MixedPrecisionConfig's default recipe is tensorwise, TransformerConfig's delayed.
    const std::string recipe = p.fp8_recipe.empty() ? (mixed_.seen ? "tensorwise" : "delayed") : p.fp8_recipe;
    c_.fp8_recipe = scenario_recipe(recipe);
    if (c_.fp8_recipe.empty()) {
      c_.not_mapped.push_back("fp8_recipe " + recipe + " (priced as delayed scaling)");
      c_.fp8_recipe = "delayed";
    }
    c_.fp8_param_gather = p.fp8_param_gather.value_or(false);
  } else {
    c_.precision = fp16 ? "fp16" : "bf16";
  }
  if (p.grad_in_fp32 == false || grad_sync_dtype_ == "bf16") c_.grad_dtype = fp16 ? "fp16" : "bf16";
}

void NemoReader::finish_layout() {
  if (!c_.tp || c_.tp->value == 1) c_.sp = false;  // Megatron-Core runs no SP without TP
  if (granularity_ == "full") {
    c_.recompute = "full";
    // recompute = "full" prices every layer recomputed from its own input, as for Megatron-LM.
    const long long n = recompute_layers_ ? recompute_layers_->value : 1;
    if (method_ == "block" || n != 1) {
      c_.not_mapped.push_back("recompute_method " + (method_.empty() ? std::string("uniform") : method_) +
                              ", recompute_num_layers " + std::to_string(n) +
                              " (priced as recompute = \"full\", every layer from its input)");
    }
  } else if (granularity_ == "selective") {
    c_.recompute = "selective";
    std::string list;
    bool other = false;
    const auto add = [&](const YamlNode& item) {
      const std::string m = name("model.recompute_modules", item);
      if (parallel::parse_recompute_module(m)) {
        list += (list.empty() ? "\"" : ", \"") + m + "\"";
        other = other || m != "core_attn";
      } else if (!m.empty()) {
        c_.not_mapped.push_back("model.recompute_modules: " + m + " (no such module in tetrasim)");
      }
    };
    if (modules_ != nullptr && modules_->kind == Kind::scalar) add(*modules_);
    if (modules_ != nullptr && modules_->kind == Kind::sequence) {
      for (const YamlNode& item : modules_->items) add(item);
    }
    if (other) c_.layout_keys.emplace_back("recompute_modules", "[" + list + "]");
  }
  if (first_layers_) c_.layout_keys.emplace_back("first_stage_layers", std::to_string(first_layers_->value));
  if (last_layers_) c_.layout_keys.emplace_back("last_stage_layers", std::to_string(last_layers_->value));
  if (embedding_split_.value_or(false)) c_.layout_keys.emplace_back("account_for_embedding_in_pipeline_split", "true");
  if (loss_split_.value_or(false)) c_.layout_keys.emplace_back("account_for_loss_in_pipeline_split", "true");
  if (const auto comm = parallel::parse_cp_comm(cp_comm_)) {
    c_.layout_keys.emplace_back("cp_comm_type", std::string("\"") + parallel::to_string(*comm) + "\"");
  } else if (!cp_comm_.empty() && cp_comm_ != "null") {
    c_.not_mapped.push_back("model.cp_comm_type = " + cp_comm_);
  }
  // [all-to-all level, ring level] of a2a+p2p: the first is cp_a2a; other depths do not map.
  if (hierarchical_cp_ != nullptr && !hierarchical_cp_->is_null()) {
    const std::string key = "model.hierarchical_context_parallel_sizes";
    if (hierarchical_cp_->kind == Kind::sequence && hierarchical_cp_->items.size() == 2) {
      c_.cp_a2a = integer(key, hierarchical_cp_->items.front());
      c_.cp_ring = integer(key, hierarchical_cp_->items.back());
    } else {
      c_.not_mapped.push_back(key + " (not two levels)");
    }
  }
  if (!c_.experts) return;  // the dispatcher of a dense model moves nothing
  const std::string dispatcher = dispatcher_ == "alltoall_seq" ? "alltoall" : dispatcher_;
  if (dispatcher == "alltoall" || dispatcher == "allgather" || dispatcher == "flex") {
    c_.layout_keys.emplace_back("moe_token_dispatcher", "\"" + dispatcher + "\"");
  } else if (!dispatcher.empty()) {
    c_.not_mapped.push_back("model.moe_token_dispatcher_type = " + dispatcher);
  }
  if (dispatcher == "flex" && (flex_ == "deepep" || flex_ == "hybridep")) {
    c_.layout_keys.emplace_back("moe_flex_backend", "\"" + flex_ + "\"");
  }
}

// cuda_graph_impl and cuda_graph_scope as the scenario's cuda_graph list.
void NemoReader::cuda_graphs() {
  std::string impl = graph_impl_;
  if ((impl.empty() || impl == "none") && enable_graphs_.value_or(false)) impl = "local";
  if (impl.empty() || impl == "none") return;
  std::string scopes;
  const auto add = [&](const YamlNode& item) {
    std::string s = name("model.cuda_graph_scope", item);
    if (s.rfind("CudaGraphScope.", 0) == 0) s = s.substr(15);
    if (!s.empty()) scopes += (scopes.empty() ? "" : "+") + s;
  };
  if (graph_scope_ != nullptr && graph_scope_->kind == Kind::scalar) add(*graph_scope_);
  if (graph_scope_ != nullptr && graph_scope_->kind == Kind::sequence) {
    for (const YamlNode& item : graph_scope_->items) add(item);
  }
  if (scopes.empty() || scopes == "full") scopes = "layer";  // no scope (older Megatron-Core: "full"): whole layers
  const parallel::CudaGraphsParse parsed = parallel::parse_cuda_graphs(scopes);
  if (!parsed.unknown.empty()) {
    c_.not_mapped.push_back("model.cuda_graph_impl = " + impl + ", cuda_graph_scope " + scopes + " (" +
                            parsed.unknown + " is no scope tetrasim models)");
    return;
  }
  std::string list;
  for (std::size_t at = 0; at <= scopes.size();) {
    const std::size_t end = std::min(scopes.find('+', at), scopes.size());
    list += (list.empty() ? "\"" : ", \"") + scopes.substr(at, end - at) + "\"";
    at = end + 1;
  }
  c_.training_keys.emplace_back("cuda_graph", "[" + list + "]");
}

void NemoReader::finish_training() {
  int zero = dist_opt_.value_or(false) || optim_name_.find("distributed") != std::string::npos ? 1 : 0;
  if (megatron_fsdp_.value_or(false)) {
    static const std::map<std::string, int, std::less<>> stages{
        {"no_shard", 0}, {"optim", 1}, {"optim_grads", 2}, {"optim_grads_params", 3}};
    const auto it = stages.find(sharding_);
    if (it != stages.end()) zero = it->second;
  }
  c_.zero_stage = zero;
  bool grad = ddp_grad_overlap_.value_or(false);
  bool param = ddp_param_overlap_.value_or(false);
  if (comm_overlap_ && zero >= 1) {  // CommOverlapConfig's nulls: on (dp = 1 has nothing to overlap)
    grad = comm_grad_.value_or(true);
    param = comm_param_.value_or(true);
  }
  c_.overlap_grad_reduce = grad;
  c_.overlap_param_gather = param;
  // CommOverlapConfig turns TP overlap off under tp < 2 or without sequence parallelism.
  const bool tp_comm = comm_overlap_ ? comm_tp_.value_or(false) : model_tp_comm_.value_or(false);
  if (tp_comm && c_.tp && c_.tp->value > 1 && c_.sp) c_.tp_comm_overlap = true;
  if (flash_.value_or(false) && c_.attention.empty()) c_.attention = "flash2";
  if (loss_fusion_.value_or(false)) c_.training_keys.emplace_back("fused_cross_entropy", "true");
  cuda_graphs();
  if (!c_.experts) return;
  if (!capacity_.empty()) {
    c_.training_keys.emplace_back("moe_capacity_factor", capacity_);
    if (pad_.value_or(false)) c_.training_keys.emplace_back("moe_pad_to_capacity", "true");
  }
  if (a2a_.value_or(false)) c_.training_keys.emplace_back("moe_a2a_overlap", "true");
  if (router_fusion_.value_or(false)) c_.training_keys.emplace_back("moe_router_fusion", "true");
  if (aux_loss_ && balancing_ != "none") c_.training_keys.emplace_back("moe_aux_loss", "true");
}

void NemoReader::finish(const ImportOptions& options) {
  finish_precision();
  finish_layout();
  finish_training();
  c_.arch = glu_.value_or(false) || norm_ == "rmsnorm" || activation_.find("swiglu") != std::string::npos ? "llama"
                                                                                                         : "gpt";
  c_.tied = tied_.value_or(true);  // Megatron-Core's default
  if (!c_.experts) {  // a dense model's dump still carries the router's defaults
    c_.top_k.reset();
    c_.moe_ffn_hidden.reset();
  }
  if (!c_.seq_len) {
    c_.seq_len = model_seq_;
  } else if (model_seq_ && model_seq_->value != c_.seq_len->value) {
    c_.not_mapped.push_back(model_seq_->key + " = " + std::to_string(model_seq_->value) + " (the sequences are " +
                            c_.seq_len->key + " = " + std::to_string(c_.seq_len->value) + ")");
  }
  if (nodes_ && devices_ && options.gpus == 0) {
    c_.world = Number{nodes_->value * devices_->value, nodes_->key, nodes_->where};
  } else {
    for (const auto& n : {nodes_, devices_}) {
      if (n) c_.not_mapped.push_back(n->key + " = " + std::to_string(n->value));
    }
  }
  if (!c_.world && options.gpus == 0) {
    throw UserError(SourceLocation{path_, 1}, "--gpus",
                    "the file does not say how many GPUs run it (Megatron-Bridge leaves that to the launcher; a NeMo "
                    "launcher file has trainer.num_nodes and trainer.devices): --gpus N gives the run's size");
  }
}

}  // namespace

LaunchConfig read_nemo(std::string_view text, const std::string& path, const ImportOptions& options) {
  LaunchConfig c;
  c.launcher = Launcher::nemo;
  c.path = path;
  const YamlNode root = parse_yaml(text, path);
  if (root.kind != Kind::mapping) {
    throw UserError(SourceLocation{path, root.line, root.column}, "",
                    "the YAML document is not a mapping of sections (model:, train:, ... or trainer:, model:)");
  }
  NemoReader reader(path, c);
  reader.walk("", root);
  reader.finish(options);
  return c;
}

}  // namespace tetra::interop::detail
