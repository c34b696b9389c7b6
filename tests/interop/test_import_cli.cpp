// `tetrasim import`, `search --export` and `plan --export` end to end: imported scenarios load
// with simulate, bad inputs give one line and exit 1 with nothing written.

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "support/run_tetrasim.hpp"

namespace fs = std::filesystem;
using tetra::test::CliRun;
using tetra::test::run_tetrasim;

namespace {

std::size_t count_lines(const std::string& s) {
  std::size_t n = 0;
  for (const char c : s) n += c == '\n' ? 1 : 0;
  return n;
}

/// A user error: exit 1, nothing on stdout, one stderr line starting with `prefix`.
void check_user_error(const CliRun& r, const std::string& prefix) {
  CAPTURE(r.err);
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(count_lines(r.err) == 1);
  CHECK(r.err.rfind("tetrasim: " + prefix, 0) == 0);
}

const fs::path kScratch = tetra::test::scratch_dir("interop");

/// `tetrasim import INPUT -o OUT ARGS` of a file with `text`: the run, and whether OUT exists.
CliRun import_text(const std::string& name, const std::string& text, const std::string& args = "") {
  const fs::path in = kScratch / name;
  tetra::test::write_text(in, text);
  const fs::path out = kScratch / (name + ".toml");
  fs::remove(out);
  CliRun r = run_tetrasim("import '" + in.string() + "' -o '" + out.string() + "' " + args);
  if (r.code != 0) CHECK_FALSE(fs::exists(out));
  return r;
}

}  // namespace

TEST_SUITE("interop") {

TEST_CASE("every real file imports to a scenario that simulates") {
  const std::pair<const char*, const char*> files[] = {
      {"megatron/train_gpt3_175b_distributed.sh", "--gpus 1024"},
      {"megatron/train_llama3_8b_h100_fp8.sh", ""},
      {"megatron/train_mixtral_8x7b_distributed.sh", "--gpus 64"},
      {"torchtitan/llama3_8b.toml", "--gpus 64"},
      {"torchtitan/llama3_70b.toml", "--gpus 64"},
      {"torchtitan/llama3_405b.toml", "--gpus 128"},
      {"nemo/llama3_8b_sft_gb200_fp8_mx_v1.yaml", "--gpus 8 --cluster gb200-nvl72"},
      {"nemo/llama3_70b_sft_gb200_fp8_mx_v1.yaml", "--gpus 32 --cluster gb200-nvl72"},
      {"nemo/qwen3_235b_a22b_pretrain_b200_nvfp4_v1.yaml", "--gpus 64 --cluster dgx-b200"},
      {"nemo/llama3_1_70b.yaml", "--model llama3.1-70b"},
  };
  for (const auto& [file, args] : files) {
    CAPTURE(file);
    const fs::path out = kScratch / (fs::path(file).filename().string() + ".toml");
    const CliRun r = run_tetrasim(std::string("import tests/data/configs/") + file + " -o '" + out.string() + "' " + args);
    CAPTURE(r.err);
    REQUIRE(r.code == 0);
    const CliRun sim = run_tetrasim("simulate '" + out.string() + "'");
    CAPTURE(sim.err);
    CHECK(sim.code == 0);
  }
}

TEST_CASE("import prints the scenario on stdout without -o") {
  const CliRun r = run_tetrasim("import tests/data/configs/torchtitan/llama3_70b.toml --gpus 64 --cluster hgx-h200");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("preset = \"llama3.1-70b\"") != std::string::npos);
  CHECK(r.out.find("preset = \"hgx-h200\"\nnodes = 8\n") != std::string::npos);
  CHECK(r.out.find("# not mapped: [optimizer].lr = 1.5e-4") != std::string::npos);
}

TEST_CASE("bad inputs: one line FILE:LINE: KEY: reason, exit 1, nothing written") {
  SUBCASE("unknown file type") {
    check_user_error(import_text("notes.txt", "just some text\n"), (kScratch / "notes.txt").string() + ":1: --from: ");
  }
  SUBCASE("a flag without its value") {
    check_user_error(import_text("novalue.sh", "python pretrain_gpt.py \\\n  --num-layers 32 \\\n  --seq-length\n"),
                     (kScratch / "novalue.sh").string() + ":3: --seq-length: needs a value");
  }
  SUBCASE("a degree that is not an integer") {
    check_user_error(import_text("float.sh", "pretrain_gpt.py --num-layers 32 --pipeline-model-parallel-size 2.5\n"),
                     (kScratch / "float.sh").string() + ":1: --pipeline-model-parallel-size: '2.5' is not an integer");
  }
  SUBCASE("an unresolvable $VAR behind a needed flag") {
    check_user_error(import_text("var.sh", "pretrain_gpt.py --num-layers 32 \\\n  --micro-batch-size ${MBS}\n"),
                     (kScratch / "var.sh").string() + ":2: --micro-batch-size: $MBS is not set in the file");
  }
  SUBCASE("degrees that do not divide the world size") {
    const std::string file = "tests/data/configs/megatron/train_gpt3_175b_distributed.sh";
    const fs::path out = kScratch / "gpt3.toml";
    fs::remove(out);
    check_user_error(run_tetrasim("import " + file + " -o '" + out.string() + "'"),
                     file + ":23: --nnodes: tp 8 x cp 1 x pp 16 = 128 GPUs do not divide the run's 8 GPUs");
    CHECK_FALSE(fs::exists(out));
  }
  SUBCASE("torchtitan degrees that do not multiply to --gpus") {
    check_user_error(import_text("job.toml", "[parallelism]\ndata_parallel_shard_degree = 4\ntensor_parallel_degree = 2\n"
                                             "[model]\nname = \"llama3\"\nflavor = \"8B\"\n", "--gpus 16"),
                     (kScratch / "job.toml").string() + ":2:30: [parallelism].data_parallel_shard_degree: ");
  }
  SUBCASE("a YAML syntax error") {
    check_user_error(import_text("bad.yaml", "model:\n  tensor_model_parallel_size: 2\n  num_layers: 32: 4\n",
                                 "--gpus 8"),
                     (kScratch / "bad.yaml").string() +
                         ":3:17: model: YAML: mapping values are not allowed in this context");
  }
  SUBCASE("a YAML document that is not a mapping") {
    check_user_error(import_text("list.yml", "- 1\n- 2\n", "--gpus 8"),
                     (kScratch / "list.yml").string() + ":1:1: the YAML document is not a mapping");
  }
  SUBCASE("a YAML parallel size that is not an integer") {
    check_user_error(import_text("tp.yaml", "model:\n  tensor_model_parallel_size: two\n", "--gpus 8"),
                     (kScratch / "tp.yaml").string() +
                         ":2:31: model.tensor_model_parallel_size: 'two' is not an integer");
  }
  SUBCASE("YAML sizes that do not divide the GPUs") {
    const std::string file = "tests/data/configs/nemo/llama3_70b_sft_gb200_fp8_mx_v1.yaml";
    const fs::path out = kScratch / "mb70.toml";
    fs::remove(out);
    check_user_error(run_tetrasim("import " + file + " --gpus 12 --cluster gb200-nvl72 -o '" + out.string() + "'"),
                     file + ":478:33: model.pipeline_model_parallel_size: tp 1 x cp 1 x pp 8 = 8 GPUs do not divide "
                            "the run's 12 GPUs (--gpus 12)");
    CHECK_FALSE(fs::exists(out));
  }
  SUBCASE("a Megatron-Bridge file without --gpus") {
    check_user_error(run_tetrasim("import tests/data/configs/nemo/llama3_8b_sft_gb200_fp8_mx_v1.yaml"),
                     "tests/data/configs/nemo/llama3_8b_sft_gb200_fp8_mx_v1.yaml:1: --gpus: the file does not say");
  }
  SUBCASE("import refuses to write over its input") {
    const fs::path in = kScratch / "self.toml";
    tetra::test::write_text(in, "[parallelism]\ntensor_parallel_degree = 2\n[model]\nname = \"llama3\"\nflavor = \"8B\"\n");
    check_user_error(run_tetrasim("import '" + in.string() + "' -o '" + in.string() + "'"), "");
  }
}

TEST_CASE("search --export: the best layout as launcher configuration, and back") {
  const CliRun json = run_tetrasim("search scenarios/quickstart.toml --json --top 1");
  REQUIRE(json.code == 0);
  for (const std::string launcher : {"megatron", "torchtitan"}) {
    CAPTURE(launcher);
    const CliRun r = run_tetrasim("search scenarios/quickstart.toml --export " + launcher);
    REQUIRE(r.code == 0);
    const fs::path exported = kScratch / ("exported_" + launcher);
    tetra::test::write_text(exported, r.out);
    const fs::path back = kScratch / ("exported_" + launcher + ".toml");
    const CliRun imp = run_tetrasim("import '" + exported.string() + "' -o '" + back.string() + "'");
    CAPTURE(imp.err);
    REQUIRE(imp.code == 0);
    const CliRun sim = run_tetrasim("simulate '" + back.string() + "' --json");
    REQUIRE(sim.code == 0);
    // The best layout's compact form appears in both.
    const std::string text = tetra::test::slurp(back);
    if (launcher == "megatron") CHECK(r.out.rfind("torchrun --nnodes 2 --nproc_per_node 8 pretrain_gpt.py", 0) == 0);
    if (launcher == "torchtitan") CHECK(r.out.find("[parallelism]\n") != std::string::npos);
    CHECK(text.find("preset = \"llama3.1-8b\"") != std::string::npos);
  }
  {
    const CliRun r = run_tetrasim("search scenarios/quickstart.toml --export nemo");
    REQUIRE(r.code == 0);
    CHECK(r.out.rfind("# Megatron-Bridge ConfigContainer overrides: llama3.1-8b on 16 GPUs", 0) == 0);
    const fs::path exported = kScratch / "exported_nemo.yaml";
    tetra::test::write_text(exported, r.out);
    const fs::path back = kScratch / "exported_nemo.toml";
    const CliRun imp = run_tetrasim("import '" + exported.string() + "' --gpus 16 -o '" + back.string() + "'");
    CAPTURE(imp.err);
    REQUIRE(imp.code == 0);
    CHECK(run_tetrasim("simulate '" + back.string() + "'").code == 0);
    CHECK(tetra::test::slurp(back).find("preset = \"llama3.1-8b\"") != std::string::npos);
  }
  CHECK(run_tetrasim("search scenarios/quickstart.toml --export megatron --json").code == 2);
  CHECK(run_tetrasim("search scenarios/quickstart.toml --export deepspeed").code == 2);
}

}  // TEST_SUITE
