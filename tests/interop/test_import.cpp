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
#include "tetra/scenarios/scenario.hpp"

using tetra::interop::ImportOptions;
using tetra::interop::Launcher;

namespace {

const std::string kConfigs = std::string(TETRA_SOURCE_DIR) + "/tests/data/configs/";

/// The scenario `tetrasim import` makes of `file`, loaded.
tetra::scenarios::Scenario imported(const std::string& file, long long gpus = 0, const std::string& cluster = "dgx-h100") {
  ImportOptions o;
  o.gpus = gpus;
  o.cluster = cluster;
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
  SUBCASE("megatron: gpt arch") {
    round_trip(scenario("gpt3-175b", "seq_len = 2048\nglobal_batch = 1536\n",
                        "tp = 8\npp = 16\nmbs = 1\nsp = true", 128),
               Launcher::megatron);
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
  SUBCASE("layers per virtual stage give vp") {
    const std::string text =
        "--num-layers 80 --hidden-size 8192 --ffn-hidden-size 28672 --num-attention-heads 64 "
        "--group-query-attention --num-query-groups 8 --swiglu --untie-embeddings-and-output-weights "
        "--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 5 --global-batch-size 64\n";
    o.gpus = 32;
    const auto sc = tetra::scenarios::load_scenario_text(tetra::interop::import_scenario(text, "args.txt", o), "x");
    CHECK(sc.layout.vp == 4);
    CHECK(sc.layout.schedule == tetra::parallel::Schedule::interleaved);
    CHECK(sc.layout.dp == 8);
  }
}

TEST_CASE("reader errors name the file, the line and the flag") {
  ImportOptions o;
  auto message = [&](const std::string& text) -> std::string {
    try {
      (void)tetra::interop::import_scenario(text, "f.sh", o);
    } catch (const tetra::UserError& e) {
      return e.what();
    }
    return "";
  };
  CHECK(message("echo hello\n") == "f.sh:1: --from: not a launcher configuration tetrasim reads: neither "
                                   "Megatron-LM arguments (--num-layers, --tensor-model-parallel-size, ...) nor "
                                   "a torchtitan job file ([parallelism], [training]); --from names the launcher");
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

}  // TEST_SUITE
