#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tetra/base/error.hpp"
#include "tetra/parallel/params.hpp"
#include "tetra/model/presets.hpp"

using namespace tetra::model;
using namespace tetra::parallel;

namespace {

// meta-llama/Llama-3.1-8B config.json (public Hugging Face Hub file).
constexpr const char* kLlama31_8B = R"({
  "architectures": [
    "LlamaForCausalLM"
  ],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": 128001,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  },
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
}
)";

// openai-community/gpt2 config.json (keys that matter).
constexpr const char* kGpt2 = R"({
  "activation_function": "gelu_new",
  "architectures": ["GPT2LMHeadModel"],
  "model_type": "gpt2",
  "n_ctx": 1024,
  "n_embd": 768,
  "n_head": 12,
  "n_inner": null,
  "n_layer": 12,
  "n_positions": 1024,
  "vocab_size": 50257
})";

std::string error_of(std::string_view text) {
  try {
    (void)model_from_hf_config_text(text, "config.json");
  } catch (const tetra::UserError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_SUITE("llama") {
  TEST_CASE("HF import: Llama-3.1-8B config.json equals the preset") {
    const Model m = model_from_hf_config_text(kLlama31_8B, "config.json");
    const Model p = *find_model_preset("llama3.1-8b");
    CHECK(m.arch == Arch::llama);
    CHECK(m.layers == p.layers);
    CHECK(m.hidden == p.hidden);
    CHECK(m.ffn_hidden == p.ffn_hidden);
    CHECK(m.heads == p.heads);
    CHECK(m.kv_heads == p.kv_heads);
    CHECK(m.vocab == p.vocab);
    CHECK(m.tied_embeddings == p.tied_embeddings);
    CHECK(total_params(m, 8192) == 8'030'261'248);
  }

  TEST_CASE("HF import: GPT-2 keys give arch gpt, 4h FFN, tied embeddings") {
    const Model m = model_from_hf_config_text(kGpt2, "gpt2.json");
    CHECK(m.arch == Arch::gpt);
    CHECK(m.layers == 12);
    CHECK(m.hidden == 768);
    CHECK(m.ffn_hidden == 3072);
    CHECK(m.heads == 12);
    CHECK(m.kv_heads == 12);
    CHECK(m.tied_embeddings);
    // GPT-2 small: 124,439,808 parameters with 1024 positions (12*(12h^2+13h) + (V+1024)h + 2h)
    CHECK(total_params(m, 1024) == 124'439'808);
  }

  TEST_CASE("HF import: gpt_neox model_type is gpt, no kv key means MHA") {
    const Model m = model_from_hf_config_text(
        R"({"model_type": "gpt_neox", "num_hidden_layers": 2, "hidden_size": 64,
            "intermediate_size": 256, "num_attention_heads": 4, "vocab_size": 1000})",
        "neox.json");
    CHECK(m.arch == Arch::gpt);
    CHECK(m.kv_heads == 4);
    CHECK_FALSE(m.tied_embeddings);
  }

  TEST_CASE("HF import: syntax errors give file:line:col") {
    const std::string e = error_of("{\n  \"hidden_size\": 4096,\n  \"layers\" 32\n}");
    CAPTURE(e);
    CHECK(e.find("config.json:3:13: invalid JSON") == 0);  // end of the offending token "32"
    const std::string trailing = error_of("{\"a\": 1,}");
    CAPTURE(trailing);
    CHECK(trailing.find("config.json:1:9:") == 0);
    CHECK(error_of("").find("config.json:1:1:") == 0);
  }

  TEST_CASE("HF import: missing and wrong-typed keys are named") {
    std::string e = error_of(R"({"hidden_size": 4096})");
    CHECK(e.find("num_hidden_layers") != std::string::npos);
    CHECK(e.find("missing") != std::string::npos);
    e = error_of("{\n \"num_hidden_layers\": \"32\",\n \"hidden_size\": 4096}");
    CAPTURE(e);
    CHECK(e.find("config.json:2:2: num_hidden_layers: expected a positive integer") == 0);
    CHECK(e.find("got a string") != std::string::npos);
    e = error_of(R"({"num_hidden_layers": 32.5})");
    CHECK(e.find("got 32.5") != std::string::npos);
    e = error_of(R"({"num_hidden_layers": -4})");
    CHECK(e.find("got -4") != std::string::npos);
    e = error_of(R"({"num_hidden_layers": 99999999999})");
    CHECK(e.find("num_hidden_layers") != std::string::npos);
    e = error_of(R"({"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 256,
                     "num_attention_heads": 4, "vocab_size": 10, "tie_word_embeddings": 1})");
    CHECK(e.find("tie_word_embeddings: expected true or false") != std::string::npos);
    e = error_of(R"({"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 256,
                     "num_attention_heads": 4, "num_key_value_heads": 3, "vocab_size": 10})");
    CHECK(e.find("num_key_value_heads") != std::string::npos);
    CHECK(error_of("[1, 2]").find("expected a JSON object") != std::string::npos);
  }

  TEST_CASE("HF import from a file, a missing file is a user error") {
    const auto dir = std::filesystem::path(TETRA_BINARY_DIR) / "tests" / "llama";
    std::filesystem::create_directories(dir);
    const auto path = (dir / "llama31_8b_config.json").string();
    {
      std::ofstream out(path);
      out << kLlama31_8B;
    }
    CHECK(model_from_hf_config(path).hidden == 4096);
    CHECK_THROWS_AS((void)model_from_hf_config((dir / "nope.json").string()), tetra::UserError);
  }
}
