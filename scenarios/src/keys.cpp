#include "tetra/scenarios/keys.hpp"

#include <array>
#include <sstream>
#include <type_traits>

namespace tetra::scenarios {

namespace {

template <class T>
constexpr std::string_view plain_type() {
  return std::is_integral_v<T> ? "integer" : "number";
}

// One row per key. A key added here is accepted by the loader (which still reads its value)
// and appears in docs/scenario-format.md after `tetrasim keys --markdown`.
constexpr std::array kKeys = std::to_array<KeyInfo>({
    // ---- [model] ----
    {"model", "preset", "name", "none", "`tetrasim presets` lists them", "a built-in model; the keys beside it override it", ""},
    {"model", "hf_config", "string", "none", "a path relative to the scenario", "a Hugging Face `config.json` to read the shape from (Llama, Qwen3, Mixtral, DeepSeek-V3, gpt-oss, Llama 4)", "Hugging Face `transformers` config"},
    {"model", "arch", "name", "llama", "llama, gpt, gpt-oss", "the block: llama (RMSNorm, SwiGLU, RoPE), gpt (LayerNorm, GeLU MLP, learned positions), gpt-oss (llama with biases, sinks and YaRN)", ""},
    {"model", "layers", "integer", "required", "1..100000", "transformer layers", "`num_hidden_layers`"},
    {"model", "hidden", "integer", "required", "1..10000000", "model width", "`hidden_size`"},
    {"model", "ffn_hidden", "integer", "required", "1..10000000", "dense MLP width", "`intermediate_size`"},
    {"model", "heads", "integer", "required", "1..100000", "query heads", "`num_attention_heads`"},
    {"model", "kv_heads", "integer", "heads", "divides heads", "key/value heads (grouped-query attention)", "`num_key_value_heads`"},
    {"model", "vocab", "integer", "required", "1..100000000", "vocabulary size", "`vocab_size`"},
    {"model", "tied_embeddings", "boolean", "false", "", "the output layer shares the input embedding", "`tie_word_embeddings`"},
    {"model", "head_dim", "integer", "hidden / heads", "1..10000000", "attention head width when it is not hidden / heads", "`head_dim`"},
    {"model", "qk_norm", "boolean", "false", "not with MLA", "an RMSNorm over every query and key head before RoPE", "Qwen3 `q_norm` / `k_norm`; Megatron-Core `qk_layernorm`"},
    {"model", "mtp_layers", "integer", "0", ">= 0", "multi-token-prediction modules, on the last stage", "`num_nextn_predict_layers`"},
    {"model", "num_experts", "integer", "dense", ">= 1", "routed experts per MoE layer; makes the model MoE", "`n_routed_experts`, `num_local_experts`"},
    {"model", "experts_per_token", "integer", "required with num_experts", "1..num_experts", "experts each token is routed to (top-k)", "`num_experts_per_tok`"},
    {"model", "moe_ffn_hidden", "integer", "required with num_experts", ">= 1", "FFN width of one routed expert", "`moe_intermediate_size`"},
    {"model", "shared_experts", "integer", "0", ">= 0", "shared experts every token passes", "`n_shared_experts`"},
    {"model", "shared_ffn_hidden", "integer", "shared_experts * moe_ffn_hidden", ">= 1", "width of all shared experts run as one MLP", "Megatron-Core `moe_shared_expert_intermediate_size`"},
    {"model", "first_k_dense", "integer", "0", ">= 0", "the first k layers keep the dense FFN", "`first_k_dense_replace`"},
    {"model", "moe_layer_freq", "integer", "1", ">= 1", "from first_k_dense on, layer l is MoE when l % freq == 0", "DeepSeek-V3 `moe_layer_freq`"},
    {"model", "interleave_moe_layer_step", "integer", "1", ">= 1", "layer l is MoE when (l + 1) % step == 0", "Llama 4 `interleave_moe_layer_step`, Qwen3 `decoder_sparse_step`"},
    {"model", "moe_router", "name", "softmax_topk", "softmax_topk, topk_softmax, sigmoid_topk", "the router's score function and order (Qwen3, Mixtral, DeepSeek-V3 / Llama 4)", ""},
    {"model", "q_lora_rank", "integer", "0", ">= 0", "multi-head latent attention: query compression rank (0 = none)", "DeepSeek-V3 `q_lora_rank`"},
    {"model", "kv_lora_rank", "integer", "standard attention", ">= 1", "multi-head latent attention: key/value compression rank", "DeepSeek-V3 `kv_lora_rank`"},
    {"model", "qk_nope_head_dim", "integer", "standard attention", ">= 1", "MLA: query/key head width without RoPE", "DeepSeek-V3 `qk_nope_head_dim`"},
    {"model", "qk_rope_head_dim", "integer", "standard attention", ">= 1", "MLA: query/key head width with RoPE", "DeepSeek-V3 `qk_rope_head_dim`"},
    {"model", "v_head_dim", "integer", "standard attention", ">= 1", "MLA: value head width", "DeepSeek-V3 `v_head_dim`"},
    // ---- [cluster] ----
    {"cluster", "preset", "name", "none", "`tetrasim presets` lists them", "a built-in node or rack; the keys beside it override it", ""},
    {"cluster", "gpus_per_node", "integer", "the preset's", "1..1024", "GPUs in one node", ""},
    {"cluster", "nodes", "integer", "the preset's", "1..1000000", "nodes in the cluster", ""},
    {"cluster", "profile", "string", "none", "a path relative to the scenario", "a calibration profile (`tetrasim calibrate`) whose measured rates replace the built-in ones; refused when it was measured on another GPU model", ""},
    {"cluster", "profile_any_gpu", "boolean", "false", "", "apply the profile even when it was measured on another GPU model", ""},
    {"cluster", "gpu_speed_spread", "number", "0.01", "0..0.5", "how much identical GPUs differ in pace (standard deviation of one GPU's compute time over the median's); each step waits for the slowest of the job's GPUs. 0 prices every GPU at the median's", "Sinha et al., SC22 (arXiv 2208.11035)"},
    {"cluster", "gpu", "table", "the preset's", "", "the GPU: [cluster.gpu]", ""},
    {"cluster", "intra_node", "table", "the preset's", "", "the links inside a node: [cluster.intra_node]", ""},
    {"cluster", "inter_node", "table", "the preset's", "", "the network between nodes: [cluster.inter_node]", ""},
    {"cluster", "host", "table", "measured defaults", "", "the memory of the node's CPU as one data-loader worker uses it: [cluster.host]", ""},
    {"cluster.gpu", "preset", "name", "none", "`tetrasim presets` lists them", "a built-in GPU; the keys beside it override it", ""},
    {"cluster.gpu", "memory", "quantity", "the preset's", "1MiB..1PB", "device memory as the device reports it (nvidia-smi total), e.g. \"80GiB\"", "nvidia-smi `memory.total`"},
    {"cluster.gpu", "bf16_peak", "quantity", "the preset's", "> 0, at most 10EFLOP/s", "dense BF16 tensor-core peak, e.g. \"989TFLOP/s\"", "the GPU's datasheet"},
    {"cluster.gpu", "fp8_peak", "quantity", "the preset's", "> 0, at most 10EFLOP/s", "dense FP8 tensor-core peak", "the GPU's datasheet"},
    {"cluster.gpu", "fp4_peak", "quantity", "the preset's", "> 0, at most 10EFLOP/s", "dense FP4 tensor-core peak (Blackwell)", "the GPU's datasheet"},
    {"cluster.gpu", "hbm_bandwidth", "quantity", "the preset's", "> 0, at most 10PB/s", "HBM bandwidth, e.g. \"3.35TB/s\"", "the GPU's datasheet"},
    {"cluster.gpu", "host_link_bandwidth", "quantity", "the preset's", "> 0, at most 10PB/s", "the GPU's link to host memory, per direction, line rate: PCIe x16 (Gen4 32GB/s, Gen5 64GB/s) or a Grace superchip's NVLink-C2C share (225GB/s); activation offloading copies over it", "the GPU's datasheet"},
    {"cluster.gpu", "sms", "integer", "the preset's", "1..100000", "streaming multiprocessors (GEMM wave quantization)", "CUDA device query"},
    {"cluster.gpu", "rated_power", "quantity", "the preset's", "> 0, at most 100kW", "the board power the rates hold at, e.g. \"700W\"", "the GPU's datasheet"},
    {"cluster.gpu", "power_limit", "quantity", "rated_power", "> 0, at most rated_power", "a lower power cap: tensor-core rates scale by (limit / rating)^0.625 (docs/architecture.md)", "MLPerf Inference v4.1 MaxQ runs"},
    {"cluster.intra_node", "kind", "name", "the preset's", "nvswitch, nvlink-mesh, pcie", "how the GPUs of a node are joined; on a mesh each pair has 1/(gpus_per_node - 1) of the bandwidth", "NVIDIA HGX H100 4-GPU"},
    {"cluster.intra_node", "bandwidth", "quantity", "the preset's", "> 0, at most 10PB/s", "per GPU per direction, e.g. \"450GB/s\"", "NVLink datasheets"},
    {"cluster.intra_node", "latency", "quantity", "the preset's", "0..10s", "one hop, e.g. \"1us\"", ""},
    {"cluster.intra_node", "nvls", "boolean", "the preset's", "", "NVLink SHARP in-switch reductions (NCCL NVLS algorithm)", "NCCL `NCCL_NVLS_ENABLE`"},
    {"cluster.intra_node", "domain", "integer", "gpus_per_node", ">= gpus_per_node", "GPUs one NVLink domain joins (72 on an NVL72 rack)", ""},
    {"cluster.inter_node", "nics_per_node", "integer", "the preset's", "1..1024", "network adapters per node; fewer than the GPUs are shared by the groups that cross nodes at once", ""},
    {"cluster.inter_node", "nic_bandwidth", "quantity", "the preset's", "> 0, at most 10PB/s", "per adapter per direction, e.g. \"400Gb/s\"", ""},
    {"cluster.inter_node", "latency", "quantity", "the preset's", "0..10s", "one network hop", ""},
    {"cluster.inter_node", "pod_gpus", "integer", "0 (one pod)", "whole nodes, 1..1000000", "GPUs of one pod of an oversubscribed fabric: consecutive ranks under full bisection bandwidth", "Dubey et al. 2024 (Llama 3, arXiv 2407.21783) §3.3.1: pods of 3,072 GPUs"},
    {"cluster.inter_node", "oversubscription", "number", "1", "1..64", "how many times thinner the layer joining the pods is than the NICs below it (7 for 1:7)", "Dubey et al. 2024 §3.3.1: 1:7 between pods"},
    {"cluster.host", "first_touch_bandwidth", "quantity", "2.73GB/s", "> 0, at most 10PB/s", "one thread writing freshly allocated memory (page faults included); `tetrasim calibrate --host` measures it", "tests/data/calib/host_rates_epyc_kvm.toml"},
    {"cluster.host", "copy_bandwidth", "quantity", "18.85GB/s", "> 0, at most 10PB/s", "one thread copying between resident buffers (bytes copied); `tetrasim calibrate --host` measures it", "tests/data/calib/host_rates_epyc_kvm.toml"},
    // ---- [training] ----
    // The plain keys, one row each in parallel/training_keys.def.
#define TRAINING_SWITCH(name, value, needs, meaning, source) {"training", #name, "boolean", #value, needs, meaning, source},
#define TRAINING_NUMBER(type, name, value, lowest, highest, meaning, source) \
  {"training", #name, plain_type<type>(), #value, #lowest ".." #highest, meaning, source},
#include "tetra/parallel/training_keys.def"
    {"training", "precision", "name", "bf16", "bf16, fp16, fp32, fp8", "weights and activations; fp8 = bf16 with FP8 linears (delayed scaling unless fp8_recipe says)", ""},
    {"training", "grad_dtype", "name", "fp32", "bf16, fp16, fp32", "dtype gradients are accumulated and reduced in", "Megatron-Core `grad_reduce_in_fp32`"},
    {"training", "optimizer", "name", "adam", "adam", "the optimizer", ""},
    {"training", "attention", "name", "flash2", "flash2, flash3, flash1, cudnn, fused, torch, triton", "the attention kernel (triton: the Triton FlashAttention of MPT / llm-foundry `attn_impl: triton`)", "FlashAttention; Transformer Engine `FusedAttention` = cudnn"},
    {"training", "framework", "name", "megatron", "megatron, deepspeed, fsdp", "the training stack: Megatron-Core, DeepSpeed, PyTorch FSDP (torchtitan, Composer)", ""},
    {"training", "fp8_recipe", "name", "delayed", "delayed, current, blockwise, mxfp8, nvfp4, tensorwise, rowwise", "FP8 / FP4 scaling recipe; needs precision = \"fp8\" (tensorwise, rowwise: torchao Float8)", "Transformer Engine recipes; torchao float8"},
    {"training", "fp8_param_gather", "boolean", "false", "", "weights are gathered in FP8 with no BF16 copy", "Megatron-Core `fp8_param_gather`"},
    {"training", "compile", "boolean", "false", "", "torch.compile of the blocks (framework fsdp)", "torchtitan `compile`"},
    {"training", "async_tp", "boolean", "false", "", "asynchronous tensor parallelism over symmetric memory (framework fsdp)", "torchtitan `enable_async_tensor_parallel`"},
    {"training", "compile_loss", "boolean", "true", "", "the loss is compiled with the blocks (framework fsdp, with compile)", "torchtitan since December 2024"},
    {"training", "reshard_after_forward", "boolean or integer", "FSDP2's default", "true, false or a group size >= 1", "FSDP2 `reshard_after_forward`", "PyTorch `fully_shard`"},
    {"training", "moe_capacity_factor", "number", "dropless", "0.001..1000", "tokens per expert capped at this multiple of the balanced share", "Megatron-Core `moe_expert_capacity_factor`"},
    {"training", "moe_routing_imbalance", "number", "1.04", "1..1000", "tokens of the busiest expert rank over the mean (1.0 for force-balanced runs)", "arXiv 2408.15664 Table 2 (MaxVio)"},
    {"training", "dataloader_mask", "name", "cached (framework megatron), none (others)", "none, cached, per_sample", "the attention mask the host data loader builds for each sample: none, one kept and collated (cached), or one built anew (per_sample: reset_position_ids, reset_attention_mask or eod_mask_loss); it paces the step when the loader is slower than the GPUs", "Megatron-Core GPTDataset `create_attention_mask`"},
    {"training", "cuda_graph", "list", "none", "attn, mlp, moe, moe_router, moe_preprocess, layer, full_iteration", "what runs inside CUDA graphs (no host time); an array or one string joined by '+'", "Megatron-Core `cuda_graph_scope`"},
    {"training", "adam_moments_dtype", "name", "fp32", "fp32, bf16", "dtype of Adam's two moments (framework megatron)", "Megatron-Core `exp_avg_dtype`, `exp_avg_sq_dtype`"},
    // ---- [layout] ----
    {"layout", "tp", "integer", "1", "1..1000000", "tensor-parallel size", "Megatron-Core `tensor_model_parallel_size`"},
    {"layout", "cp", "integer", "1", "1..1000000", "context-parallel size", "Megatron-Core `context_parallel_size`"},
    {"layout", "pp", "integer", "1", "1..1000000", "pipeline stages", "Megatron-Core `pipeline_model_parallel_size`"},
    {"layout", "dp", "integer", "GPUs / (tp * cp * pp)", "1..1000000", "data-parallel size", ""},
    {"layout", "vp", "integer", "1", "1..1000000", "model chunks (virtual stages) per pipeline rank", "Megatron-Core `virtual_pipeline_model_parallel_size`"},
    {"layout", "mbs", "integer", "1", "1..1000000", "micro-batch size in sequences", "`micro_batch_size`"},
    {"layout", "sp", "boolean", "false", "needs tp > 1", "sequence parallelism", "Megatron-Core `sequence_parallel`"},
    {"layout", "recompute", "name", "none", "none, selective, full, selective_op, selective_layer", "activation recomputation (selective_op, selective_layer: torchtitan's policies)", "Megatron-Core `recompute_granularity`; torchtitan `activation_checkpoint`"},
    {"layout", "schedule", "name", "1f1b", "gpipe, 1f1b, interleaved, zb-h1, layered", "pipeline schedule", ""},
    {"layout", "rank_order", "string", "tp-cp-dp-pp", "a permutation of tp, cp, dp, pp joined by '-'", "how ranks are numbered, innermost first", "Megatron-Core `order`"},
    {"layout", "first_stage_layers", "integer", "even split", "1..100000", "layers on the first pipeline stage", "Megatron-Core `num_layers_in_first_pipeline_stage`"},
    {"layout", "last_stage_layers", "integer", "even split", "1..100000", "layers on the last pipeline stage", "Megatron-Core `num_layers_in_last_pipeline_stage`"},
    {"layout", "account_for_embedding_in_pipeline_split", "boolean", "false", "", "the embedding counts as one layer of the first stage", "Megatron-Core, same name"},
    {"layout", "account_for_loss_in_pipeline_split", "boolean", "false", "", "the loss counts as one layer of the last stage", "Megatron-Core, same name"},
    {"layout", "dp_shard", "integer", "dp / dp_replicate", "1..1000000", "ranks that shard the model (HSDP)", "torchtitan `data_parallel_shard_degree`"},
    {"layout", "dp_replicate", "integer", "1", "1..1000000", "ranks that replicate it (HSDP)", "torchtitan `data_parallel_replicate_degree`"},
    {"layout", "ac_freq", "integer", "2", "1..100000", "under selective_layer, every k-th block is recomputed in full", "torchtitan `selective_ac_option`"},
    {"layout", "ep", "integer", "1", "divides num_experts", "expert-parallel size, folded over tp * cp * dp", "Megatron-Core `expert_model_parallel_size`"},
    {"layout", "etp", "integer", "1", "divides moe_ffn_hidden", "tensor-parallel size inside each expert", "Megatron-Core `expert_tensor_parallel_size`"},
    {"layout", "moe_token_dispatcher", "name", "alltoall", "alltoall, allgather, flex", "how tokens reach their experts", "Megatron-Core `moe_token_dispatcher_type`"},
    {"layout", "moe_flex_backend", "name", "deepep", "deepep, hybridep", "the flex dispatcher's backend", "Megatron-Core `moe_flex_dispatcher_backend`"},
    {"layout", "cp_comm_type", "name", "p2p", "p2p, all_gather, allgather, a2a, a2a+p2p", "how context-parallel ranks exchange attention inputs: a K/V ring under the attention, an exposed K/V all-gather, Ulysses all-to-alls of Q, K, V and the output, or both in two levels (a2a+p2p: all-to-alls inside groups of cp_a2a ranks, the ring over the groups) (cp > 1, framework megatron; a2a needs heads / tp and kv_heads / tp divisible by cp, a2a+p2p by cp_a2a)", "Megatron-Core `cp_comm_type`"},
    {"layout", "cp_a2a", "integer", "1", "2..cp/2, divides cp", "under cp_comm_type = \"a2a+p2p\", the consecutive CP ranks of one all-to-all group; the ring runs over cp / cp_a2a of them", "Megatron-Core `hierarchical_context_parallel_sizes` = [cp_a2a, cp / cp_a2a]"},
    {"layout", "recompute_modules", "list", "core_attn", "core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts", "under recompute = \"selective\", the parts re-run before their backward; an array or one string joined by '+'", "Megatron-Core `recompute_modules`"},
    {"layout", "offload_layers", "integer", "0", "0..layers - 1", "layers whose activations go to host memory (pp = 1, no recompute, framework megatron)", "Megatron-Core `cpu_offloading_num_layers`"},
    // ---- [search] ----
    {"search", "tp", "list", "[1, 2, 4, 8]", "integers >= 1", "tensor-parallel sizes to try", ""},
    {"search", "cp", "list", "[1]", "integers >= 1", "context-parallel sizes to try", ""},
    {"search", "pp", "list or \"divisors\"", "\"divisors\"", "integers >= 1", "pipeline sizes; \"divisors\" = every divisor of the layers, and every power of two an uneven first/last split serves (126 layers: pp 4, 8, 16, ...)", ""},
    {"search", "mbs", "list", "[1, 2, 4]", "integers >= 1", "micro-batch sizes", ""},
    {"search", "vp", "list", "[1]", "integers >= 1", "virtual stages per pipeline rank", ""},
    {"search", "recompute", "list", "[\"none\", \"selective\", \"full\"]", "the [layout] recompute names", "recomputation modes; selective cells keep [layout] recompute_modules", ""},
    {"search", "schedule", "list", "[\"1f1b\"]", "the [layout] schedule names", "pipeline schedules", ""},
    {"search", "sp", "list", "[true]", "booleans", "sequence parallelism, tried where tp > 1", ""},
    {"search", "memory_fraction", "number", "1.0", "0.01..1", "usable share of GPU memory for pruning (docs/memory.md)", ""},
    {"search", "precision", "list", "the [training] precision", "bf16, fp8", "precisions to try; fp8 under [search] fp8_recipe, else the [training] recipe, else delayed scaling", ""},
    {"search", "fp8_recipe", "name", "the [training] recipe", "the [training] fp8_recipe names", "the FP8 recipe that precision = \"fp8\" in this table means", ""},
    {"search", "rank_order", "list", "the [layout] rank_order", "the [layout] rank_order spellings", "rank orders to try (on a fabric of pods the order decides which groups cross them)", ""},
    {"search", "dp_replicate", "list", "[1]", "integers >= 1", "HSDP replica counts (framework fsdp, zero_stage 3)", ""},
    {"search", "ac_freq", "list", "[2]", "integers >= 1", "checkpoint frequencies under selective_layer", ""},
    {"search", "compile", "list", "the [training] compile", "booleans", "torch.compile on / off (framework fsdp)", ""},
    {"search", "ep", "list", "[1]", "integers >= 1", "expert-parallel sizes (MoE models)", ""},
    {"search", "etp", "list", "[1]", "integers >= 1", "expert tensor-parallel sizes (MoE models)", ""},
    {"search", "offload_layers", "list", "the [layout] value", "integers >= 0", "activation offloading depths, tried where Megatron-Core allows it", ""},
    {"search", "fp8_param_gather", "list", "the [training] value", "booleans", "FP8 parameter gather, tried on FP8 precisions", ""},
    {"search", "cp_comm_type", "list", "the [layout] value", "the [layout] cp_comm_type names", "context-parallel exchanges, tried where cp > 1", "Megatron-Core `cp_comm_type`"},
    {"search", "grad_dtype", "list", "the [training] value", "bf16, fp16, fp32", "gradient dtypes", ""},
    // ---- [plan] ----
    {"plan", "tokens", "number", "required", "> 0", "tokens to train, e.g. 15.6e12", ""},
    {"plan", "deadline_days", "number", "none", "> 0", "the run must end within this many days", ""},
    {"plan", "budget", "number", "none", "> 0; needs prices", "the most the run may cost, in the prices' currency", ""},
    {"plan", "failures_per_gpu_hour", "number", "1.973e-5", ">= 0", "interruptions per GPU-hour", "Llama 3 paper (arXiv 2407.21783) section 3.3.4"},
    {"plan", "checkpoint_bandwidth", "quantity", "\"2TB/s\"", "> 0", "sustained checkpoint write rate of the storage", "Llama 3 paper (arXiv 2407.21783) section 3.3.4"},
    {"plan", "restart_time", "quantity", "\"10min\"", "> 0", "time to restart after an interruption", ""},
    {"plan", "pue", "number", "1.56", "1.0 .. 3.0", "power usage effectiveness of the data centre (facility over IT energy); scales the energy of every candidate", "Uptime Institute Global Data Center Survey 2024 (average annual PUE)"},
    {"plan", "candidate", "table array", "required", "one or more", "the clusters to compare: [[plan.candidate]]", ""},
    {"plan.candidate", "name", "string", "the preset or file", "unique with gpus", "a label", ""},
    {"plan.candidate", "cluster", "name", "none", "a built-in cluster", "the cluster (or cluster_file, not both)", ""},
    {"plan.candidate", "cluster_file", "string", "none", "a path relative to the scenario", "a TOML file holding only [cluster]", ""},
    {"plan.candidate", "gpus", "integer, list or range", "required", "\"1024..16384\", \"1024..8192 step 1024\", [1024, 3072] or one count", "GPU counts to plan for, whole nodes", ""},
    {"plan.candidate", "price_per_gpu_hour", "number", "none", ">= 0; on every candidate or none", "the user's price per GPU-hour", ""},
});

}  // namespace

std::span<const KeyInfo> scenario_keys() noexcept { return kKeys; }

std::vector<std::string_view> key_tables() {
  std::vector<std::string_view> out;
  for (const KeyInfo& k : kKeys) {
    if (out.empty() || out.back() != k.table) out.push_back(k.table);
  }
  return out;
}

std::vector<std::string_view> key_names(std::string_view table) {
  std::vector<std::string_view> out;
  for (const KeyInfo& k : kKeys) {
    if (k.table == table) out.push_back(k.name);
  }
  return out;
}

std::string keys_markdown() {
  std::ostringstream out;
  for (const std::string_view table : key_tables()) {
    out << "\n### [" << table << "]\n\n| key | type | default | accepted | meaning | source |\n"
        << "| --- | --- | --- | --- | --- | --- |\n";
    for (const KeyInfo& k : kKeys) {
      if (k.table != table) continue;
      out << "| `" << k.name << "` | " << k.type << " | " << k.default_value << " | " << k.bounds << " | "
          << k.meaning << " | " << k.source << " |\n";
    }
  }
  return out.str();
}

}  // namespace tetra::scenarios
