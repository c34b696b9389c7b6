// tetrasim import on the real launcher files of tests/data/configs/ (exact numbers from each
// file), the round trip import(export(layout)) == layout, and the readers' errors.

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "support/run_tetrasim.hpp"
#include "tetra/base/error.hpp"
#include "tetra/base/text_file.hpp"
#include "tetra/interop/export.hpp"
#include "tetra/interop/import.hpp"
#include "tetra/parallel/recompute_modules.hpp"
#include "tetra/scenarios/scenario.hpp"

using tetra::interop::ImportOptions;
using tetra::interop::Launcher;

namespace {

const std::string kConfigs = std::string(TETRA_SOURCE_DIR) + "/tests/data/configs/";

/// The one-line error `tetrasim import` gives for `text` read as `path`; "" when it imports.
std::string import_error(const std::string& text, const std::string& path, const ImportOptions& o) {
  try {
    (void)tetra::interop::import_scenario(text, path, o);
  } catch (const tetra::UserError& e) {
    return e.what();
  }
  return "";
}

/// The scenario `tetrasim import` makes of `file`, loaded.
tetra::scenarios::Scenario imported(const std::string& file, long long gpus = 0,
                                    const std::string& cluster = "dgx-h100", const std::string& model = "") {
  ImportOptions o;
  o.gpus = gpus;
  o.cluster = cluster;
  o.model = model;
  const std::string path = kConfigs + file;
  const std::string toml = tetra::interop::import_scenario(tetra::read_input_file(path), path, o);
  CAPTURE(toml);
  return tetra::scenarios::load_scenario_text(toml, path);
}

struct Expected {
  int tp, cp, pp, dp, mbs, global_batch, seq_len;
};

void check(const tetra::scenarios::Scenario& sc, const Expected& e) {
  const auto& l = sc.layout;
  CHECK(l.tp == e.tp);
  CHECK(l.cp == e.cp);
  CHECK(l.pp == e.pp);
  CHECK(l.dp == e.dp);
  CHECK(l.mbs == e.mbs);
  CHECK(sc.training.global_batch == e.global_batch);
  CHECK(sc.training.seq_len == e.seq_len);
}

/// Exports the layout of `scenario` (TOML text) for `launcher`, imports the result and checks
/// that the layout, batch and precision come back.
void round_trip(const std::string& scenario, Launcher launcher) {
  const auto sc = tetra::scenarios::load_scenario_text(scenario, "layout.toml");
  const tetra::interop::ExportInput in{sc.model, sc.training, sc.layout, sc.cluster.total_gpus(),
                                       sc.cluster.gpus_per_node};
  const std::string exported = tetra::interop::export_layout(launcher, in);
  CAPTURE(exported);
  ImportOptions o;
  o.cluster = sc.cluster.name;
  if (launcher == Launcher::nemo) {  // a ConfigContainer holds no GPU count, and the name has no .yaml
    o.from = launcher;
    o.gpus = sc.cluster.total_gpus();
  }
  const std::string toml = tetra::interop::import_scenario(exported, "exported", o);
  CAPTURE(toml);
  const auto back = tetra::scenarios::load_scenario_text(toml, "imported.toml");
  CHECK(back.model.name == sc.model.name);
  CHECK(back.cluster.total_gpus() == sc.cluster.total_gpus());
  CHECK(tetra::scenarios::format_layout(back.layout) == tetra::scenarios::format_layout(sc.layout));
  CHECK(back.layout.ep == sc.layout.ep);
  CHECK(back.layout.etp == sc.layout.etp);
  CHECK(back.layout.dp_replicate == sc.layout.dp_replicate);
  CHECK(back.layout.ac_freq == sc.layout.ac_freq);
  CHECK(back.training.seq_len == sc.training.seq_len);
  CHECK(back.training.global_batch == sc.training.global_batch);
  CHECK(back.training.precision == sc.training.precision);
  CHECK(back.training.fp8.recipe == sc.training.fp8.recipe);
  CHECK(back.training.zero_stage == sc.training.zero_stage);
  CHECK(back.training.torch.compile == sc.training.torch.compile);
  if (launcher != Launcher::nemo) return;
  // Megatron-Bridge YAML carries every Megatron-Core setting of the layout and the run.
  CHECK(back.layout == sc.layout);
  CHECK(back.training.fp8.param_gather == sc.training.fp8.param_gather);
  CHECK(back.training.grad_dtype == sc.training.grad_dtype);
  CHECK(back.training.attention == sc.training.attention);
  CHECK(back.training.overlap_grad_reduce == sc.training.overlap_grad_reduce);
  CHECK(back.training.tp_comm_overlap == sc.training.tp_comm_overlap);
  CHECK(back.training.fused_cross_entropy == sc.training.fused_cross_entropy);
  CHECK(back.training.cuda_graphs == sc.training.cuda_graphs);
  CHECK(back.training.moe_capacity_factor == sc.training.moe_capacity_factor);
}

std::string scenario(const std::string& model, const std::string& training, const std::string& layout,
                     int nodes = 4) {
  return "[model]\npreset = \"" + model + "\"\n[cluster]\npreset = \"dgx-h100\"\nnodes = " + std::to_string(nodes) +
         "\n[training]\n" + training + "\n[layout]\n" + layout + "\n";
}

}  // namespace

TEST_SUITE("interop") {

TEST_CASE("Megatron-LM examples/gpt3/train_gpt3_175b_distributed.sh on 1024 GPUs") {
  const auto sc = imported("megatron/train_gpt3_175b_distributed.sh", 1024);
  check(sc, {8, 1, 16, 8, 1, 1536, 2048});
  CHECK(sc.model.name == "gpt3-175b");
  CHECK(sc.training.precision == tetra::parallel::Precision::fp16);
  CHECK(sc.training.zero_stage == 0);
}

TEST_CASE("Megatron-LM examples/llama/train_llama3_8b_h100_fp8.sh: its own 8 GPUs") {
  const auto sc = imported("megatron/train_llama3_8b_h100_fp8.sh");
  check(sc, {1, 1, 1, 8, 1, 128, 8192});
  CHECK(sc.model.name == "llama3.1-8b");
  CHECK(sc.training.fp8.recipe == tetra::parallel::Fp8Recipe::delayed);
  CHECK(sc.training.fp8.param_gather);
  CHECK(sc.training.grad_dtype == tetra::parallel::Precision::bf16);
  CHECK(sc.training.attention == tetra::parallel::AttentionKernel::cudnn);
  CHECK(sc.training.zero_stage == 1);
  CHECK(sc.training.overlap_grad_reduce);
  CHECK_FALSE(sc.layout.sp);  // --sequence-parallel without tensor parallelism is dropped
}

TEST_CASE("Megatron-LM examples/mixtral/train_mixtral_8x7b_distributed.sh on 64 GPUs") {
  const auto sc = imported("megatron/train_mixtral_8x7b_distributed.sh", 64);
  check(sc, {1, 1, 4, 16, 1, 256, 4096});
  CHECK(sc.model.name == "mixtral-8x7b");
  CHECK(sc.layout.ep == 8);
  CHECK(sc.layout.etp == 1);
}

TEST_CASE("torchtitan llama3_8b.toml on 64 GPUs (the file's preset)") {
  const auto sc = imported("torchtitan/llama3_8b.toml", 64);
  check(sc, {1, 1, 1, 64, 1, 64, 8192});
  CHECK(sc.model.name == "llama3.1-8b");
  CHECK(sc.training.framework == tetra::parallel::Framework::fsdp);
  CHECK(sc.layout.recompute == tetra::parallel::Recompute::selective_op);
  CHECK_FALSE(sc.training.torch.compile);
}

TEST_CASE("torchtitan llama3_70b.toml on 64 GPUs") {
  const auto sc = imported("torchtitan/llama3_70b.toml", 64);
  check(sc, {8, 1, 1, 8, 8, 64, 8192});
  CHECK(sc.model.name == "llama3.1-70b");
  CHECK(sc.layout.sp);
  CHECK(sc.layout.recompute == tetra::parallel::Recompute::full);
}

TEST_CASE("torchtitan llama3_405b.toml on 128 GPUs: float8, compile, async TP") {
  const auto sc = imported("torchtitan/llama3_405b.toml", 128);
  check(sc, {8, 1, 1, 16, 2, 32, 8192});
  CHECK(sc.model.name == "llama3.1-405b");
  CHECK(sc.training.fp8.recipe == tetra::parallel::Fp8Recipe::tensorwise);
  CHECK(sc.training.torch.compile);
  CHECK(sc.training.torch.async_tp);
}

TEST_CASE("torchtitan: without --gpus the fewest whole nodes") {
  check(imported("torchtitan/llama3_8b.toml"), {1, 1, 1, 8, 1, 8, 8192});
}

TEST_CASE("Megatron-Bridge llama3_8b_sft_gb200_fp8_mx_v1.yaml on 8 GB200 GPUs: MXFP8") {
  const auto sc = imported("nemo/llama3_8b_sft_gb200_fp8_mx_v1.yaml", 8, "gb200-nvl72");
  check(sc, {1, 1, 1, 8, 1, 8, 4096});  // dataset.seq_length, not the model's 16384
  CHECK(sc.model.name == "llama3.1-8b");
  CHECK(sc.training.fp8.recipe == tetra::parallel::Fp8Recipe::mxfp8);  // mixed_precision over model.fp8: null
  CHECK(sc.training.fp8.param_gather);
  CHECK(sc.training.grad_dtype == tetra::parallel::Precision::fp32);
  CHECK(sc.training.zero_stage == 1);
  CHECK_FALSE(sc.training.overlap_grad_reduce);  // comm_overlap: null, ddp says false
  CHECK(sc.training.fused_cross_entropy);
  CHECK(sc.training.cuda_graphs.bits == 0);  // cuda_graph_impl: none
  CHECK(sc.layout.recompute == tetra::parallel::Recompute::none);
}

TEST_CASE("Megatron-Bridge llama3_70b_sft_gb200_fp8_mx_v1.yaml on 32 GB200 GPUs: interleaved pp 8 x vp 10") {
  const auto sc = imported("nemo/llama3_70b_sft_gb200_fp8_mx_v1.yaml", 32, "gb200-nvl72");
  check(sc, {1, 1, 8, 4, 1, 32, 4096});
  CHECK(sc.model.name == "llama3.1-70b");
  CHECK(sc.layout.vp == 10);
  CHECK(sc.layout.schedule == tetra::parallel::Schedule::interleaved);
  CHECK(sc.training.fp8.recipe == tetra::parallel::Fp8Recipe::mxfp8);
  // comm_overlap's nulls under the distributed optimizer: the overlaps are on
  CHECK(sc.training.overlap_grad_reduce);
  CHECK(sc.training.overlap_param_gather);
  CHECK(sc.training.cuda_graphs.has(tetra::parallel::CudaGraphScope::mlp));
  CHECK(sc.training.cuda_graphs.bits == 1U << static_cast<unsigned>(tetra::parallel::CudaGraphScope::mlp));
}

TEST_CASE("Megatron-Bridge qwen3_235b_a22b_pretrain_b200_nvfp4_v1.yaml on 64 B200 GPUs: NVFP4, ep 8") {
  const auto sc = imported("nemo/qwen3_235b_a22b_pretrain_b200_nvfp4_v1.yaml", 64, "dgx-b200");
  check(sc, {1, 1, 8, 8, 1, 1024, 4096});
  CHECK(sc.model.name == "qwen3-235b-a22b");
  CHECK(sc.layout.ep == 8);
  CHECK(sc.layout.etp == 1);
  CHECK(sc.layout.moe_dispatcher == tetra::parallel::MoeDispatcher::alltoall);
  // embedding and loss counted in the split: 94 + 2 = 96 layers over 8 stages, 11 on each end
  CHECK(sc.layout.first_stage_layers == 11);
  CHECK(sc.layout.last_stage_layers == 11);
  CHECK(sc.training.fp8.recipe == tetra::parallel::Fp8Recipe::nvfp4);
  CHECK(sc.training.overlap_grad_reduce);
  CHECK_FALSE(sc.training.tp_comm_overlap);  // asked for, but tp = 1
  // model.moe_router_fusion: true; moe_aux_loss_coeff 0.001 with aux_loss balancing.
  CHECK(sc.training.moe_router_fusion);
  CHECK(sc.training.moe_aux_loss);
}

TEST_CASE("Megatron-Bridge YAML: the router's fusion and load-balancing loss as Megatron-Core reads them") {
  // Megatron-Core: the loss runs when a coefficient is above 0 and the balancing type is not
  // "none" (router.py get_aux_loss_coeff / is_aux_loss_enabled); a list gives one coefficient
  // per type.
  const std::string path = kConfigs + "nemo/qwen3_235b_a22b_pretrain_b200_nvfp4_v1.yaml";
  const std::string base = tetra::read_input_file(path);
  ImportOptions o;
  o.gpus = 64;
  o.cluster = "dgx-b200";
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = base;
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
    return text;
  };
  auto training = [&](const std::string& text) {
    return tetra::scenarios::load_scenario_text(tetra::interop::import_scenario(text, path, o), path).training;
  };
  const auto none = training(with("moe_router_load_balancing_type: aux_loss", "moe_router_load_balancing_type: none"));
  CHECK_FALSE(none.moe_aux_loss);
  CHECK(none.moe_router_fusion);
  const auto unfused = training(with("moe_router_fusion: true", "moe_router_fusion: false"));
  CHECK_FALSE(unfused.moe_router_fusion);
  CHECK(unfused.moe_aux_loss);
  CHECK(training(with("moe_aux_loss_coeff: 0.001", "moe_aux_loss_coeff: [0.0, 0.001]")).moe_aux_loss);
  CHECK_FALSE(training(with("moe_aux_loss_coeff: 0.001", "moe_aux_loss_coeff: 0.0")).moe_aux_loss);
  try {
    (void)training(with("moe_aux_loss_coeff: 0.001", "moe_aux_loss_coeff: -1"));
    FAIL("a negative coefficient is accepted");
  } catch (const tetra::UserError& e) {
    CHECK(std::string(e.what()).find("model.moe_aux_loss_coeff: is not a number >= 0") != std::string::npos);
  }
}

TEST_CASE("NeMo launcher llama3_1_70b.yaml: its own 128 x 8 GPUs") {
  // No vocabulary in the file: llama2-70b has the same shape, so --model names the preset.
  const auto sc = imported("nemo/llama3_1_70b.yaml", 0, "dgx-h100", "llama3.1-70b");
  check(sc, {4, 2, 4, 32, 1, 2048, 8192});
  CHECK(sc.cluster.total_gpus() == 1024);
  CHECK(sc.model.name == "llama3.1-70b");
  CHECK(sc.layout.vp == 10);
  CHECK(sc.layout.sp);
  CHECK(sc.training.precision == tetra::parallel::Precision::bf16);
  CHECK(sc.training.zero_stage == 1);  // mcore_distributed_optim
  CHECK(sc.training.overlap_grad_reduce);
  CHECK(sc.training.overlap_param_gather);
  CHECK(sc.training.tp_comm_overlap);  // ub_tp_comm_overlap
  CHECK(sc.training.attention == tetra::parallel::AttentionKernel::flash2);
}

TEST_CASE("settings with no scenario key are listed at the end") {
  ImportOptions o;
  o.gpus = 64;
  const std::string path = kConfigs + "megatron/train_mixtral_8x7b_distributed.sh";
  const std::string toml = tetra::interop::import_scenario(tetra::read_input_file(path), path, o);
  CHECK(toml.find("# not mapped: --lr 1e-4\n") != std::string::npos);
  CHECK(toml.find("# not mapped: --moe-aux-loss-coeff 1e-2\n") != std::string::npos);
  // the unset `if [ -n "${WANDB_API_KEY}" ]` branch is not read
  CHECK(toml.find("--wandb-project") == std::string::npos);
}

TEST_CASE("round trip: import(export(layout)) gives the layout back") {
  const std::string megatron = "seq_len = 8192\nglobal_batch = 256\nzero_stage = 1\n";
  SUBCASE("megatron: tp and pp") {
    round_trip(scenario("llama3.1-70b", megatron, "tp = 8\npp = 2\nmbs = 1\nsp = true"), Launcher::megatron);
  }
  SUBCASE("megatron: interleaved, full recompute, cp") {
    round_trip(scenario("llama3.1-70b", megatron,
                        "tp = 4\ncp = 2\npp = 4\nvp = 2\nmbs = 1\nsp = true\nrecompute = \"full\"\n"
                        "schedule = \"interleaved\"",
                        8),
               Launcher::megatron);
  }
  SUBCASE("megatron: fp8 current scaling, selective recompute, mbs 2") {
    round_trip(scenario("llama3.1-8b", megatron + "precision = \"fp8\"\nfp8_recipe = \"current\"\n",
                        "tp = 2\nmbs = 2\nsp = true\nrecompute = \"selective\""),
               Launcher::megatron);
  }
  SUBCASE("megatron: MoE with expert parallelism") {
    round_trip(scenario("mixtral-8x7b", megatron, "tp = 1\npp = 4\nep = 8\netp = 1\nmbs = 1", 8),
               Launcher::megatron);
  }
  SUBCASE("megatron: context parallelism over Ulysses all-to-alls") {
    round_trip(scenario("llama3.1-8b", megatron, "tp = 2\ncp = 4\nmbs = 1\nsp = true\ncp_comm_type = \"a2a\""),
               Launcher::megatron);
  }
  SUBCASE("megatron: hierarchical context parallelism (a2a+p2p, --hierarchical-context-parallel-sizes)") {
    round_trip(scenario("llama3.1-8b", megatron,
                        "tp = 2\ncp = 8\nmbs = 1\nsp = true\ncp_comm_type = \"a2a+p2p\"\ncp_a2a = 2", 2),
               Launcher::megatron);
  }
  SUBCASE("megatron: gpt arch") {
    round_trip(scenario("gpt3-175b", "seq_len = 2048\nglobal_batch = 1536\n",
                        "tp = 8\npp = 16\nmbs = 1\nsp = true", 128),
               Launcher::megatron);
  }
  SUBCASE("nemo: tp and pp, fused loss, TP overlap") {
    round_trip(scenario("llama3.1-70b", megatron + "tp_comm_overlap = true\nfused_cross_entropy = true\n",
                        "tp = 8\npp = 2\nmbs = 1\nsp = true"),
               Launcher::nemo);
  }
  SUBCASE("nemo: interleaved, full recompute, cp, cuDNN attention, bf16 gradients") {
    round_trip(scenario("llama3.1-70b", megatron + "attention = \"cudnn\"\ngrad_dtype = \"bf16\"\n",
                        "tp = 4\ncp = 2\npp = 4\nvp = 2\nmbs = 1\nsp = true\nrecompute = \"full\"\n"
                        "schedule = \"interleaved\"",
                        8),
               Launcher::nemo);
  }
  SUBCASE("nemo: hierarchical context parallelism (hierarchical_context_parallel_sizes)") {
    round_trip(scenario("llama3.1-8b", megatron,
                        "tp = 2\ncp = 8\nmbs = 1\nsp = true\ncp_comm_type = \"a2a+p2p\"\ncp_a2a = 4", 2),
               Launcher::nemo);
  }
  SUBCASE("nemo: context parallelism over a K/V all-gather") {
    round_trip(scenario("llama3.1-70b", megatron, "tp = 4\ncp = 2\npp = 2\nmbs = 1\nsp = true\ncp_comm_type = \"all_gather\""),
               Launcher::nemo);
  }
  SUBCASE("nemo: fp8 current scaling with FP8 weights, selective recompute by module, CUDA graphs") {
    round_trip(scenario("llama3.1-8b",
                        megatron + "precision = \"fp8\"\nfp8_recipe = \"current\"\nfp8_param_gather = true\n"
                                   "cuda_graph = [\"attn\", \"mlp\"]\n",
                        "tp = 2\nmbs = 2\nsp = true\nrecompute = \"selective\"\n"
                        "recompute_modules = [\"core_attn\", \"layernorm\"]"),
               Launcher::nemo);
  }
  SUBCASE("nemo: MoE with expert parallelism, flex dispatcher, uneven pipeline") {
    round_trip(scenario("qwen3-30b-a3b", megatron,
                        "tp = 1\npp = 4\nep = 8\netp = 1\nmbs = 1\nfirst_stage_layers = 11\n"
                        "last_stage_layers = 11\nmoe_token_dispatcher = \"flex\"\nmoe_flex_backend = \"hybridep\"",
                        8),
               Launcher::nemo);
  }
  SUBCASE("nemo: NVFP4 on B200, capacity factor") {
    round_trip("[model]\npreset = \"mixtral-8x7b\"\n[cluster]\npreset = \"dgx-b200\"\nnodes = 4\n[training]\n" +
                   megatron + "precision = \"fp8\"\nfp8_recipe = \"nvfp4\"\nmoe_capacity_factor = 1.25\n"
                              "[layout]\ntp = 2\nsp = true\npp = 2\nep = 8\netp = 1\nmbs = 1\n",
               Launcher::nemo);
  }
  const std::string titan = "seq_len = 8192\nglobal_batch = 64\nzero_stage = 3\nframework = \"fsdp\"\n";
  SUBCASE("torchtitan: FSDP with per-op checkpointing") {
    round_trip(scenario("llama3.1-8b", titan, "mbs = 2\nrecompute = \"selective_op\""), Launcher::torchtitan);
  }
  SUBCASE("torchtitan: HSDP, TP, every 4th block checkpointed, compile") {
    round_trip(scenario("llama3.1-70b", titan + "compile = true\n",
                        "tp = 4\ndp_replicate = 2\nmbs = 1\nsp = true\nrecompute = \"selective_layer\"\nac_freq = 4"),
               Launcher::torchtitan);
  }
  SUBCASE("torchtitan: pipeline with gradient accumulation, float8") {
    round_trip(scenario("llama3.1-70b", titan + "precision = \"fp8\"\nfp8_recipe = \"tensorwise\"\n",
                        "tp = 8\npp = 2\nmbs = 1\nsp = true\nrecompute = \"full\""),
               Launcher::torchtitan);
  }
}

TEST_CASE("Megatron-LM arguments: shell forms") {
  ImportOptions o;
  SUBCASE("a plain argument file, --flag=value, defaults and arrays") {
    const std::string text =
        "TP=${TP_SIZE:-4}\nARGS=(\n  --num-layers 80 --hidden-size 8192\n  --ffn-hidden-size 28672\n)\n"
        "ARGS+=(--num-attention-heads 64 --group-query-attention --num-query-groups 8 --vocab-size 128256)\n"
        "torchrun --nnodes=2 --nproc_per_node 8 pretrain_gpt.py \\\n  --tensor-model-parallel-size=$TP \\\n"
        "  ${ARGS[@]} --swiglu --untie-embeddings-and-output-weights \\\n  --micro-batch-size 1 "
        "--global-batch-size 32 --seq-length 4096 # a comment\n";
    const auto sc = tetra::scenarios::load_scenario_text(tetra::interop::import_scenario(text, "args.sh", o), "x");
    CHECK(sc.model.name == "llama3.1-70b");
    check(sc, {4, 1, 1, 4, 1, 32, 4096});
  }
  SUBCASE("--cp-comm-type: one type maps (allgather as all_gather), a per-layer list does not") {
    const std::string model =
        "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
        "--group-query-attention --num-query-groups 8 --swiglu --untie-embeddings-and-output-weights "
        "--vocab-size 128256 --seq-length 8192 --global-batch-size 64 --context-parallel-size 2 ";
    o.gpus = 8;
    auto sc = tetra::scenarios::load_scenario_text(
        tetra::interop::import_scenario(model + "--cp-comm-type allgather\n", "args.txt", o), "x");
    CHECK(sc.layout.cp_comm == tetra::parallel::CpComm::all_gather);
    const std::string toml = tetra::interop::import_scenario(model + "--cp-comm-type p2p a2a\n", "args.txt", o);
    CHECK(toml.find("# not mapped: --cp-comm-type p2p a2a\n") != std::string::npos);
    CHECK(tetra::scenarios::load_scenario_text(toml, "x").layout.cp_comm == tetra::parallel::CpComm::p2p);
    // a2a+p2p with its two levels: the first is the all-to-all group (cp 2 x 4 on 16 GPUs at
    // tp 1); other depths do not map.
    o.gpus = 16;
    const std::string hcp = model.substr(0, model.find("--context-parallel-size")) +
                            "--context-parallel-size 8 --cp-comm-type a2a+p2p ";
    sc = tetra::scenarios::load_scenario_text(
        tetra::interop::import_scenario(hcp + "--hierarchical-context-parallel-sizes 2 4\n", "args.txt", o), "x");
    CHECK(sc.layout.cp_comm == tetra::parallel::CpComm::a2a_p2p);
    CHECK(sc.layout.cp_a2a == 2);
    const std::string three =
        tetra::interop::import_scenario(hcp + "--hierarchical-context-parallel-sizes 2 2 2\n", "args.txt", o);
    CHECK(three.find("# not mapped: --hierarchical-context-parallel-sizes 2 2 2\n") != std::string::npos);
    // Levels whose product is not cp: Megatron-Core's parallel_state refuses them, and so does the
    // import, at the flag's line.
    CHECK(import_error(hcp + "--hierarchical-context-parallel-sizes 2 2\n", "args.txt", o) ==
          "args.txt:1: --hierarchical-context-parallel-sizes: hierarchical context-parallel sizes 2 x 2 do not make "
          "cp 8");
    CHECK(import_error(hcp + "--hierarchical-context-parallel-sizes 1000000000 1000000000\n", "args.txt", o) ==
          "args.txt:1: --hierarchical-context-parallel-sizes: hierarchical context-parallel sizes 1000000000 x "
          "1000000000 do not make cp 8");
  }
  SUBCASE("the data loader's mask: reset flags build it per sample, --no-create-attention-mask-in-dataloader none") {
    // Fujii et al.'s launchers (okoge-kaz/Megatron-LM scripts/abci/Llama-3.1-8B at e4e8c218)
    // pass --reset-position-ids --reset-attention-mask.
    const std::string model =
        "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
        "--group-query-attention --num-query-groups 8 --swiglu --untie-embeddings-and-output-weights "
        "--vocab-size 128256 --seq-length 8192 --global-batch-size 64 ";
    o.gpus = 8;
    auto load = [&](const std::string& flags) {
      return tetra::scenarios::load_scenario_text(tetra::interop::import_scenario(model + flags + "\n", "args.txt", o), "x");
    };
    const auto reset = load("--reset-position-ids --reset-attention-mask --num-workers 4");
    REQUIRE(reset.training.dataloader_mask);
    CHECK(*reset.training.dataloader_mask == tetra::parallel::LoaderMask::per_sample);
    CHECK(reset.training.dataloader_workers == 4);
    const auto eod = load("--eod-mask-loss");
    CHECK(tetra::parallel::loader_mask(eod.training) == tetra::parallel::LoaderMask::per_sample);
    const auto none = load("--reset-attention-mask --no-create-attention-mask-in-dataloader");
    CHECK(tetra::parallel::loader_mask(none.training) == tetra::parallel::LoaderMask::none);
    const auto plain = load("");
    CHECK_FALSE(plain.training.dataloader_mask);
    CHECK(tetra::parallel::loader_mask(plain.training) == tetra::parallel::LoaderMask::cached);
    CHECK(plain.training.dataloader_workers == 2);
    // A flag given twice: the last one counts, as argparse keeps it (a fuzzer's find:
    // tests/fuzz/regressions/import_megatron/repeated_num_workers.sh).
    CHECK(load("--num-workers 4 --num-workers 1").training.dataloader_workers == 1);
  }
  SUBCASE("shell arithmetic $(( )) and numeric tests -gt / -eq, as Fujii et al.'s TSUBAME launcher writes them") {
    // okoge-kaz/Megatron-LM scripts/tsubame/Llama-3.1-8B/llama-3.1-8B-tp2-pp2.sh at e4e8c218:
    // the layers per virtual stage are $((${NUM_LAYERS} / ${PIPELINE_PARALLEL_SIZE} /
    // ${PIPLINE_MODEL_CHUNKS})) and the flag is passed under [[ ${PIPLINE_MODEL_CHUNKS} -gt 1 ]].
    auto script = [](const std::string& chunks) {
      return "NUM_LAYERS=80\nPP=4\nCHUNKS=" + chunks +
             "\nPER_STAGE=$((${NUM_LAYERS} / ${PP} / ${CHUNKS}))\n"
             "GBS=$(( (2 + 2) * 16 % 100 ))\nARGS=\"--pipeline-model-parallel-size ${PP}\"\n"
             "if [[ ${CHUNKS} -gt 1 ]]; then\n"
             "  ARGS=\"${ARGS} --num-layers-per-virtual-pipeline-stage ${PER_STAGE}\"\nfi\n"
             "python pretrain_gpt.py --num-layers ${NUM_LAYERS} --hidden-size 8192 --ffn-hidden-size 28672 "
             "--num-attention-heads 64 --group-query-attention --num-query-groups 8 --swiglu "
             "--untie-embeddings-and-output-weights --vocab-size 128256 ${ARGS} --global-batch-size $((GBS))\n";
    };
    o.gpus = 32;
    const auto interleaved = tetra::scenarios::load_scenario_text(tetra::interop::import_scenario(script("2"), "l.sh", o), "x");
    CHECK(interleaved.layout.vp == 2);   // 80 / 4 / 2 = 10 layers per virtual stage
    CHECK(interleaved.training.global_batch == 64);  // (2 + 2) * 16 % 100
    const auto plain = tetra::scenarios::load_scenario_text(tetra::interop::import_scenario(script("1"), "l.sh", o), "x");
    CHECK(plain.layout.vp == 1);  // the -gt branch not taken
    // An unset name, a division by zero or a form outside + - * / % ( ) stays unresolved.
    auto message = [&](const std::string& text) { return import_error(text, "l.sh", o); };
    const std::string head = "pretrain_gpt.py --num-layers 32 --tensor-model-parallel-size ";
    CHECK(message(head + "$(($NODES * 8))\n").find("is not set in the file") != std::string::npos);
    CHECK(message("Z=0\n" + head + "$((8 / Z))\n").find("is not set in the file") != std::string::npos);
    CHECK(message(head + "$((2 ** 3))\n").find("is not set in the file") != std::string::npos);
    CHECK(message(head + "$((2000000000 * 2000000000 * 2000000000))\n").find("is not set in the file") !=
          std::string::npos);  // beyond 2^61
    const std::string deep = std::string(100, '(') + "1" + std::string(100, ')');
    CHECK(message(head + "$((" + deep + "))\n").find("is not set in the file") != std::string::npos);
    CHECK(message(head + "$((" + std::string(100000, '-') + "1))\n").find("is not set in the file") !=
          std::string::npos);
  }
  SUBCASE("layers per virtual stage give vp") {
    const std::string text =
        "--num-layers 80 --hidden-size 8192 --ffn-hidden-size 28672 --num-attention-heads 64 "
        "--group-query-attention --num-query-groups 8 --swiglu --untie-embeddings-and-output-weights "
        "--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 5 --global-batch-size 64 "
        "--vocab-size 128256\n";
    o.gpus = 32;
    const auto sc = tetra::scenarios::load_scenario_text(tetra::interop::import_scenario(text, "args.txt", o), "x");
    CHECK(sc.layout.vp == 4);
    CHECK(sc.layout.schedule == tetra::parallel::Schedule::interleaved);
    CHECK(sc.layout.dp == 8);
  }
}

TEST_CASE("reader errors name the file, the line and the flag") {
  ImportOptions o;
  auto message = [&](const std::string& text) { return import_error(text, "f.sh", o); };
  CHECK(message("echo hello\n") == "f.sh:1: --from: not a launcher configuration tetrasim reads: neither "
                                   "Megatron-LM arguments (--num-layers, --tensor-model-parallel-size, ...) nor "
                                   "a torchtitan job file ([parallelism], [training]) nor a .yaml file; --from "
                                   "names the launcher");
  CHECK(message("\npretrain_gpt.py --num-layers 32 --micro-batch-size\n") ==
        "f.sh:2: --micro-batch-size: needs a value");
  CHECK(message("pretrain_gpt.py --num-layers 32 \\\n  --tensor-model-parallel-size eight\n") ==
        "f.sh:2: --tensor-model-parallel-size: 'eight' is not an integer");
  CHECK(message("TP=$1\npretrain_gpt.py --num-layers 32 \\\n --tensor-model-parallel-size $TP\n") ==
        "f.sh:3: --tensor-model-parallel-size: $TP (from $1) is not set in the file, so its value is unknown "
        "(write the number)");
  CHECK(message("[parallelism]\ntensor_parallel_degree = \"8\"\n") ==
        "f.sh:2:26: [parallelism].tensor_parallel_degree: is not an integer");
  // an unresolvable value behind a flag that is not needed is kept as written
  const std::string ok = "pretrain_gpt.py --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 "
                         "--num-attention-heads 32 --group-query-attention --num-query-groups 8 --swiglu "
                         "--untie-embeddings-and-output-weights --vocab-size 128256 --save $CKPT\n";
  CHECK(tetra::interop::import_scenario(ok, "f.sh", o).find("# not mapped: --save $CKPT\n") != std::string::npos);
}

namespace {

// Llama-3.1-70B's shape under Megatron-Core's names (no vocabulary: llama2-70b fits it too).
const std::string kShape70b =
    "  num_layers: 80\n  hidden_size: 8192\n  ffn_hidden_size: 28672\n  num_attention_heads: 64\n"
    "  num_query_groups: 8\n  gated_linear_unit: true\n  normalization: RMSNorm\n"
    "  share_embeddings_and_output_weights: false\n";

std::string yaml_error(const std::string& text, long long gpus = 8) {
  ImportOptions o;
  o.gpus = gpus;
  return import_error(text, "f.yaml", o);
}

}  // namespace

TEST_CASE("Megatron-Bridge YAML: run-time rules of mixed_precision and comm_overlap") {
  ImportOptions o;
  o.gpus = 64;
  o.model = "llama3.1-70b";
  auto load = [&](const std::string& text) {
    const std::string toml = tetra::interop::import_scenario(text, "f.yml", o);
    CAPTURE(toml);
    return tetra::scenarios::load_scenario_text(toml, "x");
  };
  SUBCASE("a recipe name; comm_overlap decides the overlaps and turns TP overlap off without SP") {
    const auto sc = load("model:\n  tensor_model_parallel_size: 4\n  sequence_parallel: false\n" + kShape70b +
                         "mixed_precision: bf16_with_fp8_current_scaling_mixed\n"
                         "comm_overlap:\n  tp_comm_overlap: true\n  overlap_grad_reduce: false\n"
                         "ddp:\n  use_distributed_optimizer: true\n  overlap_param_gather: false\n"
                         "train:\n  global_batch_size: 64\n  micro_batch_size: 2\ndataset:\n  seq_length: 8192\n");
    check(sc, {4, 1, 1, 16, 2, 64, 8192});
    CHECK(sc.training.fp8.recipe == tetra::parallel::Fp8Recipe::current);
    CHECK(sc.training.fp8.param_gather);
    CHECK_FALSE(sc.training.overlap_grad_reduce);  // comm_overlap says false
    CHECK(sc.training.overlap_param_gather);       // comm_overlap's null: on, over ddp's false
    CHECK_FALSE(sc.training.tp_comm_overlap);
  }
  SUBCASE("without mixed_precision, the model's and ddp's keys; selective recompute by module") {
    const auto sc = load("model:\n  tensor_model_parallel_size: 8\n  sequence_parallel: true\n"
                         "  fp8: hybrid\n  recompute_granularity: selective\n  recompute_modules: [core_attn, mlp]\n" +
                         kShape70b + "ddp:\n  grad_reduce_in_fp32: false\n");
    CHECK(sc.training.fp8.recipe == tetra::parallel::Fp8Recipe::delayed);  // TransformerConfig's default
    CHECK(sc.training.grad_dtype == tetra::parallel::Precision::bf16);
    CHECK(sc.training.zero_stage == 0);
    CHECK(sc.layout.recompute == tetra::parallel::Recompute::selective);
    CHECK(tetra::parallel::format_recompute_modules(sc.layout.recompute_modules) == "core_attn+mlp");
  }
}

TEST_CASE("NeMo YAML errors: one line FILE:LINE:COL: KEY: reason") {
  CHECK(yaml_error("model:\n  tensor_model_parallel_size: 2\n  num_layers: [1\n") ==
        "f.yaml:4:1: model.num_layers[1]: YAML: did not find expected ',' or ']' while parsing a flow sequence");
  CHECK(yaml_error("model:\n  tensor_model_parallel_size: 2.5\n") ==
        "f.yaml:2:31: model.tensor_model_parallel_size: '2.5' is not an integer");
  CHECK(yaml_error("model:\n  pipeline_model_parallel_size: 3\n" + kShape70b) ==
        "f.yaml:2:33: model.pipeline_model_parallel_size: tp 1 x cp 1 x pp 3 = 3 GPUs do not divide the run's 8 "
        "GPUs (--gpus 8)");
  CHECK(yaml_error("- model\n- train\n") ==
        "f.yaml:1:1: the YAML document is not a mapping of sections (model:, train:, ... or trainer:, model:)");
  CHECK(yaml_error("") ==
        "f.yaml:1:1: the YAML document is not a mapping of sections (model:, train:, ... or trainer:, model:)");
  CHECK(yaml_error("base: &b\n  x: 1\nmodel: *b\n") ==
        "f.yaml:3:8: model: YAML alias *b is not read (write the value where it is used)");
  CHECK(yaml_error("model:\n  num_layers: 32\n  num_layers: 33\n") ==
        "f.yaml:3:3: model: key 'num_layers' is repeated in this mapping");
  CHECK(yaml_error("a: 1\n---\nb: 2\n") == "f.yaml:2:1: a second YAML document (the file must hold one)");
  CHECK(yaml_error("train:\n  micro_batch_size: ${oc.env:MBS}\n") ==
        "f.yaml:2:21: train.micro_batch_size: '${oc.env:MBS}' is an interpolation, so its value is unknown (write "
        "the value)");
  CHECK(yaml_error("model:\n  sequence_parallel: maybe\n") ==
        "f.yaml:2:22: model.sequence_parallel: 'maybe' is not true or false");
  CHECK(yaml_error("model:\n  num_layers: 32\n", 0) ==
        "f.yaml:1: --gpus: the file does not say how many GPUs run it (Megatron-Bridge leaves that to the launcher; "
        "a NeMo launcher file has trainer.num_nodes and trainer.devices): --gpus N gives the run's size");
  CHECK(yaml_error("trainer:\n  num_nodes: 1\n  devices: 4\nmodel:\n  tensor_model_parallel_size: 8\n" + kShape70b,
                   0) ==
        "f.yaml:2:14: trainer.num_nodes: tp 8 x cp 1 x pp 1 = 8 GPUs do not divide the run's 4 GPUs (the file's "
        "node count may be a placeholder: --gpus gives the run's size)");
  CHECK(yaml_error("model:\n  context_parallel_size: 4\n  cp_comm_type: a2a+p2p\n"
                   "  hierarchical_context_parallel_sizes: [2, 4]\n" + kShape70b, 8) ==
        "f.yaml:4:44: model.hierarchical_context_parallel_sizes: hierarchical context-parallel sizes 2 x 4 do not "
        "make cp 4");
  CHECK(yaml_error("model:\n" + kShape70b) ==
        "f.yaml:2:15: model.num_layers: the model's shape is that of llama2-70b and llama3.1-70b, which differ in "
        "vocabulary (the file does not give it); --model names one");
  // The bounds: nesting, size.
  CHECK(yaml_error("a: " + std::string(100, '[')).find("f.yaml:1:67: a[0][0]") == 0);
  CHECK(yaml_error("a: " + std::string(100, '[')).find("nested deeper than 64 levels") != std::string::npos);
  CHECK(yaml_error(std::string(5u << 20, '#')) == "f.yaml:1: the YAML file is larger than 4 MiB");
}

}  // TEST_SUITE
