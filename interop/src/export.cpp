// Layout -> launcher configuration. Megatron-LM flags: megatron/training/arguments.py;
// torchtitan keys: torchtitan/config/job_config.py (pytorch/torchtitan at 238fa99).

#include "tetra/interop/export.hpp"

#include <sstream>
#include <string>
#include <vector>

namespace tetra::interop {
namespace {

using parallel::Fp8Recipe;
using parallel::Recompute;
using parallel::Schedule;

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// The Megatron-LM architecture flags of the model.
void model_flags(const model::Model& m, std::vector<std::string>& flags) {
  flags.push_back("--num-layers " + std::to_string(m.layers));
  flags.push_back("--hidden-size " + std::to_string(m.hidden));
  flags.push_back("--ffn-hidden-size " + std::to_string(m.ffn_hidden));
  flags.push_back("--num-attention-heads " + std::to_string(m.heads));
  if (m.kv_heads != m.heads) {
    flags.push_back("--group-query-attention");
    flags.push_back("--num-query-groups " + std::to_string(m.kv_heads));
  }
  if (m.head_dim_override > 0) flags.push_back("--kv-channels " + std::to_string(m.head_dim_override));
  if (m.qk_norm) flags.push_back("--qk-layernorm");
  flags.push_back("--vocab-size " + std::to_string(m.vocab));
  if (m.llama_block()) {
    flags.push_back("--swiglu");
    flags.push_back("--normalization RMSNorm");
    flags.push_back("--position-embedding-type rope");
    flags.push_back("--disable-bias-linear");
  }
  if (!m.tied_embeddings) flags.push_back("--untie-embeddings-and-output-weights");
  if (m.moe) {
    flags.push_back("--num-experts " + std::to_string(m.moe->num_experts));
    flags.push_back("--moe-router-topk " + std::to_string(m.moe->experts_per_token));
    flags.push_back("--moe-ffn-hidden-size " + std::to_string(m.moe->moe_ffn_hidden));
  }
}

// Megatron-LM's --fp8-recipe for a scenario recipe; "" when it has none.
std::string megatron_recipe(Fp8Recipe r) {
  switch (r) {
    case Fp8Recipe::delayed: return "delayed";
    case Fp8Recipe::current: return "tensorwise";
    case Fp8Recipe::mxfp8: return "mxfp8";
    case Fp8Recipe::blockwise: return "blockwise";
    default: return "";
  }
}

void training_flags(const ExportInput& in, std::vector<std::string>& flags, std::vector<std::string>& notes) {
  const parallel::Training& t = in.training;
  flags.push_back(t.precision == parallel::Precision::fp16 ? "--fp16" : "--bf16");
  if (t.fp8.enabled()) {
    const std::string recipe = megatron_recipe(t.fp8.recipe);
    if (recipe.empty()) {
      notes.push_back(std::string("precision fp8 with recipe ") + parallel::to_string(t.fp8.recipe) +
                      ": no Megatron-LM recipe");
    } else {
      flags.push_back("--fp8-format hybrid");
      flags.push_back("--fp8-recipe " + recipe);
      if (t.fp8.param_gather) flags.push_back("--fp8-param-gather");
    }
  }
  if (t.grad_dtype == parallel::Precision::bf16) flags.push_back("--grad-reduce-in-bf16");
  if (t.zero_stage >= 1) flags.push_back("--use-distributed-optimizer");
  if (t.zero_stage >= 2) notes.push_back("zero_stage " + std::to_string(t.zero_stage) + ": priced as the distributed optimizer (stage 1)");
  if (t.overlap_grad_reduce) flags.push_back("--overlap-grad-reduce");
  if (t.overlap_param_gather && t.zero_stage >= 1) flags.push_back("--overlap-param-gather");
  if (t.tp_comm_overlap) flags.push_back("--tp-comm-overlap");
  switch (t.attention) {
    case parallel::AttentionKernel::flash2:
    case parallel::AttentionKernel::flash3: flags.push_back("--attention-backend flash"); break;
    case parallel::AttentionKernel::cudnn: flags.push_back("--attention-backend fused"); break;
    case parallel::AttentionKernel::fused: flags.push_back("--attention-backend unfused"); break;
    default: notes.push_back(std::string("attention ") + parallel::to_string(t.attention) + ": no Megatron-LM backend");
  }
}

}  // namespace

std::string megatron_arguments(const ExportInput& in) {
  const parallel::Layout& l = in.layout;
  std::vector<std::string> flags, notes;
  flags.push_back("--tensor-model-parallel-size " + std::to_string(l.tp));
  flags.push_back("--pipeline-model-parallel-size " + std::to_string(l.pp));
  flags.push_back("--context-parallel-size " + std::to_string(l.cp));
  if (l.cp > 1 && l.cp_comm != parallel::CpComm::p2p) {
    flags.push_back(std::string("--cp-comm-type ") + parallel::to_string(l.cp_comm));
  }
  if (l.cp > 1 && l.cp_comm == parallel::CpComm::a2a_p2p) {
    flags.push_back("--hierarchical-context-parallel-sizes " + std::to_string(l.cp_a2a) + " " +
                    std::to_string(l.cp_ring()));
  }
  if (l.vp > 1) flags.push_back("--virtual-pipeline-model-parallel-size " + std::to_string(l.vp));
  if (l.sp) flags.push_back("--sequence-parallel");
  if (in.model.moe) {
    flags.push_back("--expert-model-parallel-size " + std::to_string(l.ep));
    flags.push_back("--expert-tensor-parallel-size " + std::to_string(l.etp));
  }
  flags.push_back("--micro-batch-size " + std::to_string(l.mbs));
  flags.push_back("--global-batch-size " + std::to_string(in.training.global_batch));
  flags.push_back("--seq-length " + std::to_string(in.training.seq_len));
  flags.push_back("--max-position-embeddings " + std::to_string(in.training.seq_len));
  if (l.recompute == Recompute::full) {
    flags.push_back("--recompute-granularity full");
    flags.push_back("--recompute-method uniform");
    flags.push_back("--recompute-num-layers 1");
  } else if (l.recompute == Recompute::selective) {
    flags.push_back("--recompute-granularity selective");
  } else if (l.recompute != Recompute::none) {
    notes.push_back(std::string("recompute ") + parallel::to_string(l.recompute) + ": a torchtitan policy");
  }
  if (l.schedule != Schedule::one_f_one_b && l.schedule != Schedule::interleaved) {
    notes.push_back(std::string("schedule ") + parallel::to_string(l.schedule) + ": no Megatron-LM flag");
  }
  training_flags(in, flags, notes);
  model_flags(in.model, flags);

  std::ostringstream out;
  for (const std::string& n : notes) out << "# " << n << '\n';
  const long long per_node = in.gpus < in.gpus_per_node ? in.gpus : in.gpus_per_node;
  out << "torchrun --nnodes " << (per_node > 0 ? in.gpus / per_node : 1) << " --nproc_per_node " << per_node
      << " pretrain_gpt.py";
  for (const std::string& f : flags) out << " \\\n    " << f;
  out << '\n';
  return out.str();
}

std::string torchtitan_job(const ExportInput& in) {
  const parallel::Layout& l = in.layout;
  const parallel::Training& t = in.training;
  std::ostringstream out;
  // The torchtitan name and flavor of the preset (torchtitan/models/*/__init__.py).
  static const std::vector<std::pair<std::string, std::pair<std::string, std::string>>> flavors{
      {"llama3.1-8b", {"llama3", "8B"}},           {"llama3.1-70b", {"llama3", "70B"}},
      {"llama3.1-405b", {"llama3", "405B"}},       {"llama4-scout", {"llama4", "17bx16e"}},
      {"llama4-maverick", {"llama4", "17bx128e"}}, {"deepseek-v3", {"deepseek_v3", "671B"}},
      {"qwen3-30b-a3b", {"qwen3", "30B-A3B"}},     {"qwen3-235b-a22b", {"qwen3", "235B-A22B"}},
  };
  out << "[model]\n";
  bool named = false;
  for (const auto& [preset, nf] : flavors) {
    if (preset == in.model.name) {
      out << "name = " << quoted(nf.first) << "\nflavor = " << quoted(nf.second) << '\n';
      named = true;
    }
  }
  if (!named) out << "# model " << in.model.name << ": no torchtitan flavor\n";
  if (t.fp8.enabled()) {
    const bool mx = t.fp8.recipe == Fp8Recipe::mxfp8;
    out << "converters = [" << quoted(mx ? "mx" : "float8") << "]\n";
    if (t.fp8.recipe != Fp8Recipe::tensorwise && t.fp8.recipe != Fp8Recipe::rowwise && !mx) {
      out << "# fp8 recipe " << parallel::to_string(t.fp8.recipe) << ": not a torchao recipe\n";
    }
  }
  const long long per_rank = t.global_batch / (l.dp > 0 ? l.dp : 1);
  out << "\n[training]\n"
      << "local_batch_size = " << (l.pp > 1 ? per_rank : l.mbs) << '\n'
      << "global_batch_size = " << t.global_batch << '\n'
      << "seq_len = " << t.seq_len << '\n';
  out << "\n[parallelism]\n"
      << "data_parallel_replicate_degree = " << l.dp_replicate << '\n'
      << "data_parallel_shard_degree = " << l.shard_dp() << '\n'
      << "tensor_parallel_degree = " << l.tp << '\n'
      << "pipeline_parallel_degree = " << l.pp << '\n'
      << "context_parallel_degree = " << l.cp << '\n';
  if (in.model.moe) {
    out << "expert_parallel_degree = " << l.ep << "\nexpert_tensor_parallel_degree = " << l.etp << '\n';
  }
  if (l.pp > 1) {
    out << "pipeline_parallel_microbatch_size = " << l.mbs << '\n';
    const char* schedule = l.schedule == Schedule::interleaved ? "Interleaved1F1B"
                           : l.schedule == Schedule::gpipe     ? "GPipe"
                                                               : "1F1B";
    out << "pipeline_parallel_schedule = " << quoted(schedule) << '\n';
    if (l.schedule == Schedule::interleaved && l.vp != 2) {
      out << "# vp " << l.vp << ": set pipeline_parallel_layers_per_stage\n";
    }
  }
  if (t.torch.async_tp) out << "enable_async_tensor_parallel = true\n";
  if (t.fp8.recipe == Fp8Recipe::rowwise) out << "\n[quantize.linear.float8]\nrecipe_name = \"rowwise\"\n";
  out << "\n[activation_checkpoint]\n";
  switch (l.recompute) {
    case Recompute::none: out << "mode = \"none\"\n"; break;
    case Recompute::full: out << "mode = \"full\"\n"; break;
    case Recompute::selective_op: out << "mode = \"selective\"\nselective_ac_option = \"op\"\n"; break;
    case Recompute::selective_layer:
      out << "mode = \"selective\"\nselective_ac_option = " << quoted(std::to_string(l.ac_freq)) << '\n';
      break;
    case Recompute::selective: out << "mode = \"none\"\n# recompute selective: a Megatron-LM policy\n"; break;
  }
  out << "\n[compile]\nenable = " << (t.torch.compile ? "true" : "false") << '\n'
      << "components = " << (t.torch.compile_loss ? "[\"model\", \"loss\"]" : "[\"model\"]") << '\n';
  return out.str();
}

std::string export_layout(Launcher launcher, const ExportInput& in) {
  switch (launcher) {
    case Launcher::torchtitan: return torchtitan_job(in);
    case Launcher::nemo: return nemo_overrides(in);
    default: return megatron_arguments(in);
  }
}

}  // namespace tetra::interop
