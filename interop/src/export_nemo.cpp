// Layout -> Megatron-Bridge ConfigContainer overrides (NVIDIA-NeMo/Megatron-Bridge
// src/megatron/bridge/training/config.py; the form of scripts/performance/*_overrides.yaml):
// the keys nemo_yaml.cpp reads, so that import gives the layout back.

#include <algorithm>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tetra/interop/export.hpp"
#include "tetra/parallel/cuda_graph.hpp"
#include "tetra/parallel/recompute_modules.hpp"

namespace tetra::interop {
namespace {

using parallel::Fp8Recipe;
using parallel::Recompute;
using parallel::Schedule;

const char* yes(bool b) { return b ? "true" : "false"; }

// The names of a set, in enum order, as a YAML flow sequence.
template <class Set, class Enum>
std::string flow_list(const std::vector<std::pair<Enum, std::string>>& names, const Set& set) {
  std::string out;
  for (const auto& [e, n] : names) {
    if (set.has(e)) out += (out.empty() ? "" : ", ") + n;
  }
  return "[" + out + "]";
}

std::vector<std::pair<parallel::CudaGraphScope, std::string>> scope_names() {
  std::vector<std::pair<parallel::CudaGraphScope, std::string>> out;
  const std::string all = parallel::cuda_graph_scope_names();
  for (std::size_t at = 0; at < all.size();) {
    const std::size_t end = std::min(all.find(", ", at), all.size());
    const std::string name = all.substr(at, end - at);
    for (int i = 0; i < 8; ++i) {
      const auto scope = static_cast<parallel::CudaGraphScope>(i);
      if (parallel::parse_cuda_graphs(name).graphs.has(scope)) out.emplace_back(scope, name);
    }
    at = end + 2;
  }
  return out;
}

std::vector<std::pair<parallel::RecomputeModule, std::string>> module_names() {
  std::vector<std::pair<parallel::RecomputeModule, std::string>> out;
  for (int i = 0; i < 8; ++i) {
    const auto m = static_cast<parallel::RecomputeModule>(i);
    if (parallel::parse_recompute_module(parallel::to_string(m)) == m) out.emplace_back(m, parallel::to_string(m));
  }
  return out;
}

// model: the parallel sizes, recomputation and pipeline split.
void layout_keys(const ExportInput& in, std::ostream& out, std::vector<std::string>& notes) {
  const parallel::Layout& l = in.layout;
  out << "model:\n"
      << "  tensor_model_parallel_size: " << l.tp << '\n'
      << "  pipeline_model_parallel_size: " << l.pp << '\n'
      << "  context_parallel_size: " << l.cp << '\n'
      << "  virtual_pipeline_model_parallel_size: " << (l.vp > 1 ? std::to_string(l.vp) : "null") << '\n'
      << "  sequence_parallel: " << yes(l.sp) << '\n';
  if (l.cp > 1) out << "  cp_comm_type: " << parallel::to_string(l.cp_comm) << '\n';
  if (l.cp > 1 && l.cp_comm == parallel::CpComm::a2a_p2p) {
    out << "  hierarchical_context_parallel_sizes: [" << l.cp_a2a << ", " << l.cp_ring() << "]\n";
  }
  if (in.model.moe) {
    out << "  expert_model_parallel_size: " << l.ep << "\n  expert_tensor_parallel_size: " << l.etp << '\n'
        << "  moe_token_dispatcher_type: " << parallel::to_string(l.moe_dispatcher) << '\n';
    if (l.moe_dispatcher == parallel::MoeDispatcher::flex) {
      out << "  moe_flex_dispatcher_backend: " << parallel::to_string(l.moe_flex_backend) << '\n';
    }
  }
  if (l.first_stage_layers > 0) out << "  num_layers_in_first_pipeline_stage: " << l.first_stage_layers << '\n';
  if (l.last_stage_layers > 0) out << "  num_layers_in_last_pipeline_stage: " << l.last_stage_layers << '\n';
  if (l.recompute == Recompute::full) {
    out << "  recompute_granularity: full\n  recompute_method: uniform\n  recompute_num_layers: 1\n";
  } else if (l.recompute == Recompute::selective) {
    out << "  recompute_granularity: selective\n  recompute_modules: "
        << (l.recompute_modules.empty() ? "[core_attn]" : flow_list(module_names(), l.recompute_modules)) << '\n';
  } else {
    out << "  recompute_granularity: null\n";
    if (l.recompute != Recompute::none) {
      notes.push_back(std::string("recompute ") + parallel::to_string(l.recompute) + ": a torchtitan policy");
    }
  }
  if (l.schedule != Schedule::one_f_one_b && l.schedule != Schedule::interleaved) {
    notes.push_back(std::string("schedule ") + parallel::to_string(l.schedule) + ": no Megatron-Bridge setting");
  }
}

// model: the architecture, as Megatron-Core's TransformerConfig names it.
void model_keys(const model::Model& m, std::ostream& out) {
  out << "  num_layers: " << m.layers << "\n  hidden_size: " << m.hidden << "\n  ffn_hidden_size: " << m.ffn_hidden
      << "\n  num_attention_heads: " << m.heads << "\n  num_query_groups: " << m.kv_heads << '\n';
  if (m.head_dim_override > 0) out << "  kv_channels: " << m.head_dim_override << '\n';
  if (m.qk_norm) out << "  qk_layernorm: true\n";
  out << "  vocab_size: " << m.vocab << "\n  gated_linear_unit: " << yes(m.gated_mlp())
      << "\n  normalization: " << (m.llama_block() ? "RMSNorm" : "LayerNorm")
      << "\n  share_embeddings_and_output_weights: " << yes(m.tied_embeddings) << '\n';
  if (m.moe) {
    out << "  num_moe_experts: " << m.moe->num_experts << "\n  moe_router_topk: " << m.moe->experts_per_token
        << "\n  moe_ffn_hidden_size: " << m.moe->moe_ffn_hidden << '\n';
  }
}

// model: what the training switches set there (overlaps, attention, fusion, graphs, MoE).
void training_model_keys(const ExportInput& in, std::ostream& out, std::vector<std::string>& notes) {
  const parallel::Training& t = in.training;
  out << "  seq_length: " << t.seq_len << "\n  tp_comm_overlap: " << yes(t.tp_comm_overlap) << '\n';
  switch (t.attention) {
    case parallel::AttentionKernel::flash2:
    case parallel::AttentionKernel::flash3: out << "  attention_backend: flash\n"; break;
    case parallel::AttentionKernel::cudnn: out << "  attention_backend: fused\n"; break;
    case parallel::AttentionKernel::fused: out << "  attention_backend: unfused\n"; break;
    default:
      notes.push_back(std::string("attention ") + parallel::to_string(t.attention) + ": no Megatron-Core backend");
  }
  out << "  cross_entropy_loss_fusion: " << yes(t.fused_cross_entropy) << '\n';
  if (t.cuda_graphs.bits != 0) {
    // Whole layers are the local implementation's graphs, the modules Transformer Engine's.
    const bool whole = t.cuda_graphs.has(parallel::CudaGraphScope::layer);
    out << "  cuda_graph_impl: " << (whole ? "local" : "transformer_engine") << "\n  cuda_graph_scope: "
        << (whole ? std::string("[]") : flow_list(scope_names(), t.cuda_graphs)) << '\n';
  }
  if (in.model.moe) {
    if (t.moe_capacity_factor) out << "  moe_expert_capacity_factor: " << *t.moe_capacity_factor << '\n';
    if (t.moe_pad_to_capacity) out << "  moe_pad_expert_input_to_capacity: true\n";
    if (t.moe_a2a_overlap) out << "  overlap_moe_expert_parallel_comm: true\n";
  }
}

// train, dataset, ddp, optimizer and mixed_precision.
void training_sections(const ExportInput& in, std::ostream& out, std::vector<std::string>& notes) {
  const parallel::Training& t = in.training;
  out << "train:\n  global_batch_size: " << t.global_batch << "\n  micro_batch_size: " << in.layout.mbs << '\n'
      << "dataset:\n  seq_length: " << t.seq_len << '\n';
  out << "ddp:\n  use_distributed_optimizer: " << yes(t.zero_stage >= 1) << '\n'
      << "  overlap_grad_reduce: " << yes(t.overlap_grad_reduce) << '\n'
      << "  overlap_param_gather: " << yes(t.overlap_param_gather && t.zero_stage >= 1) << '\n';
  if (t.zero_stage >= 2) {  // Megatron FSDP shards gradients (and weights) too
    out << "  use_megatron_fsdp: true\n  data_parallel_sharding_strategy: "
        << (t.zero_stage == 2 ? "optim_grads" : "optim_grads_params") << '\n';
  }
  out << "optimizer:\n  use_distributed_optimizer: " << yes(t.zero_stage >= 1) << '\n';
  const bool fp16 = t.precision == parallel::Precision::fp16;
  out << "mixed_precision:\n  bf16: " << yes(!fp16) << "\n  fp16: " << yes(fp16) << '\n';
  const Fp8Recipe r = t.fp8.recipe;
  if (r == Fp8Recipe::nvfp4) {
    out << "  fp8: null\n  fp8_recipe: null\n  fp4: e2m1\n  fp4_recipe: nvfp4\n";
  } else if (r == Fp8Recipe::delayed || r == Fp8Recipe::current || r == Fp8Recipe::blockwise ||
             r == Fp8Recipe::mxfp8) {
    const char* recipe = r == Fp8Recipe::current ? "tensorwise" : parallel::to_string(r);
    out << "  fp8: " << (r == Fp8Recipe::mxfp8 ? "e4m3" : "hybrid") << "\n  fp8_recipe: " << recipe
        << "\n  fp8_param_gather: " << yes(t.fp8.param_gather) << "\n  fp4: null\n";
  } else {
    out << "  fp8: null\n  fp4: null\n";
    if (t.fp8.enabled()) {
      notes.push_back(std::string("fp8 recipe ") + parallel::to_string(r) + ": a torchao recipe, not Megatron-Core's");
    }
  }
  out << "  grad_reduce_in_fp32: " << yes(t.grad_dtype == parallel::Precision::fp32) << '\n';
  if (t.framework != parallel::Framework::megatron) {
    notes.push_back(std::string("framework ") + parallel::to_string(t.framework) + ": written for Megatron-Core");
  }
}

}  // namespace

std::string nemo_overrides(const ExportInput& in) {
  std::vector<std::string> notes;
  std::ostringstream body;
  layout_keys(in, body, notes);
  model_keys(in.model, body);
  training_model_keys(in, body, notes);
  training_sections(in, body, notes);

  std::ostringstream out;
  const long long per_node = in.gpus < in.gpus_per_node ? in.gpus : in.gpus_per_node;
  out << "# Megatron-Bridge ConfigContainer overrides: " << in.model.name << " on " << in.gpus << " GPUs (torchrun "
      << "--nnodes " << (per_node > 0 ? in.gpus / per_node : 1) << " --nproc_per_node " << per_node << ").\n"
      << "# The GPUs are the launcher's: `tetrasim import FILE --gpus " << in.gpus << "` reads this back.\n";
  for (const std::string& n : notes) out << "# " << n << '\n';
  out << body.str();
  return out.str();
}

}  // namespace tetra::interop
