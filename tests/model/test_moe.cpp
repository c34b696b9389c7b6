// Mixture-of-experts and MLA shapes: parameter counts, MoE layer placement, model FLOPs and
// the expert part of a stage. Every expected number is worked out by hand from the public
// Hugging Face configs cited in model/src/presets.cpp.
#include <doctest/doctest.h>
#include "support/approx.hpp"

#include <string>
#include <string_view>

#include "tetra/base/error.hpp"
#include "tetra/parallel/flops.hpp"
#include "tetra/model/model.hpp"
#include "tetra/model/moe.hpp"
#include "tetra/parallel/params.hpp"
#include "tetra/model/presets.hpp"
#include "tetra/parallel/validate.hpp"

using tetra::test::approx;
using namespace tetra::model;
using namespace tetra::parallel;

namespace {

// The MoE / MLA keys of deepseek-ai/DeepSeek-V3 config.json (public Hugging Face Hub file; the
// keys tetrasim reads, values as published).
constexpr const char* kDeepSeekV3 = R"({
  "architectures": ["DeepseekV3ForCausalLM"],
  "model_type": "deepseek_v3",
  "hidden_size": 7168,
  "intermediate_size": 18432,
  "moe_intermediate_size": 2048,
  "num_hidden_layers": 61,
  "num_attention_heads": 128,
  "num_key_value_heads": 128,
  "n_routed_experts": 256,
  "n_shared_experts": 1,
  "num_experts_per_tok": 8,
  "first_k_dense_replace": 3,
  "moe_layer_freq": 1,
  "scoring_func": "sigmoid",
  "q_lora_rank": 1536,
  "kv_lora_rank": 512,
  "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64,
  "v_head_dim": 128,
  "num_nextn_predict_layers": 1,
  "vocab_size": 129280,
  "tie_word_embeddings": false
})";

// meta-llama/Llama-4-Maverick-17B-128E config.json, the text_config keys tetrasim reads.
constexpr const char* kMaverick = R"({
  "architectures": ["Llama4ForConditionalGeneration"],
  "model_type": "llama4",
  "text_config": {
    "model_type": "llama4_text",
    "hidden_size": 5120,
    "head_dim": 128,
    "intermediate_size": 8192,
    "intermediate_size_mlp": 16384,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "num_hidden_layers": 48,
    "num_local_experts": 128,
    "num_experts_per_tok": 1,
    "interleave_moe_layer_step": 2,
    "vocab_size": 202048,
    "tie_word_embeddings": false
  }
})";

// openai/gpt-oss-120b config.json, the keys tetrasim reads.
constexpr const char* kGptOss120b = R"({
  "architectures": ["GptOssForCausalLM"],
  "model_type": "gpt_oss",
  "hidden_size": 2880,
  "head_dim": 64,
  "intermediate_size": 2880,
  "num_attention_heads": 64,
  "num_key_value_heads": 8,
  "num_hidden_layers": 36,
  "num_local_experts": 128,
  "num_experts_per_tok": 4,
  "attention_bias": true,
  "sliding_window": 128,
  "vocab_size": 201088,
  "tie_word_embeddings": false
})";

Model preset(const char* name) {
  auto m = find_model_preset(name);
  REQUIRE(m);
  return *m;
}
}  // namespace

TEST_SUITE("llama") {
  TEST_CASE("Hugging Face import: DeepSeek-V3 equals the preset, plus its MTP module") {
    const Model m = model_from_hf_config_text(kDeepSeekV3, "config.json");
    REQUIRE(m.moe);
    REQUIRE(m.mla);
    CHECK(*m.moe == *preset("deepseek-v3").moe);
    CHECK(*m.mla == *preset("deepseek-v3").mla);
    CHECK(m.mtp_layers == 1);
    // 671,026,404,352 + one MTP module 11,610,067,968.
    CHECK(total_params(m, 4096) == 682'636'472'320);
  }

  TEST_CASE("Hugging Face import: Llama 4 Maverick under text_config equals the preset") {
    const Model m = model_from_hf_config_text(kMaverick, "config.json");
    const Model p = preset("llama4-maverick");
    REQUIRE(m.moe);
    CHECK(*m.moe == *p.moe);
    CHECK(m.ffn_hidden == 16384);  // intermediate_size_mlp: the dense layers
    CHECK(m.head_dim() == 128);
    CHECK(total_params(m, 8192) == total_params(p, 8192));
  }

  TEST_CASE("gpt-oss-120b: model_type gpt_oss is arch gpt-oss, 116.83B total with its biases and sinks") {
    // The gpt-oss model card (OpenAI, arXiv 2508.10925, Table 1): 116.83B total parameters,
    // 5.13B active without the 0.58B embedding. By hand, per layer: attention weights
    // 2·2880·4096 + 2·2880·512 = 26,542,080, biases 4096 + 2·512 + 2880 and 64 sinks = 8,064;
    // router 2880·128 + 128 bias, two RMSNorms 5,760; 128 experts of 3·2880·2880 + 2·2880 +
    // 2880 = 24,891,840 each = 3,186,155,520. Layer 3,213,080,192; 36 layers 115,670,886,912;
    // embedding and LM head 2·2880·201088 = 1,158,266,880; final norm 2880.
    const Model m = model_from_hf_config_text(kGptOss120b, "config.json");
    CHECK(m.arch == Arch::gpt_oss);
    CHECK(m.gated_mlp());
    CHECK(m.llama_block());
    REQUIRE(m.moe);
    CHECK(m.moe->moe_ffn_hidden == 2880);
    CHECK(m.head_dim() == 64);
    CHECK(layer_params(m, 0) == 3'213'080'192);
    CHECK(total_params(m, 4096) == 116'829'156'672);
    // Active: 124 idle experts per layer fewer = 5,711,982,912; less the 579,133,440 embedding
    // = 5,132,849,472, the card's 5.13B.
    CHECK(active_params(m, 4096) == 5'711'982'912);
    CHECK(active_params(m, 4096) - 2880LL * 201088 == 5'132'849'472);
    // GPT-2-style model types stay gpt.
    CHECK(parse_arch("gpt-oss") == Arch::gpt_oss);
    CHECK(std::string(to_string(Arch::gpt_oss)) == "gpt-oss");
  }

  TEST_CASE("Hugging Face import: top-k above the experts names the key and its line") {
    std::string text = kDeepSeekV3;
    text.replace(text.find("\"num_experts_per_tok\": 8"), 24, "\"num_experts_per_tok\": 300");
    CHECK_THROWS_WITH_AS((void)model_from_hf_config_text(text, "config.json"),
                         "config.json:12:3: num_experts_per_tok: num_experts_per_tok=300 must not "
                         "exceed n_routed_experts=256",
                         tetra::UserError);
  }

  TEST_CASE("MoE layout rules (check_moe_layout)") {
    const Model m = preset("mixtral-8x7b");
    Training t;
    t.global_batch = 64;
    Layout l;
    l.dp = 8;
    l.ep = 8;
    CHECK_FALSE(check_layout(m, 8, t, l));
    l.ep = 3;  // 8 experts
    auto issue = check_layout(m, 8, t, l);
    REQUIRE(issue);
    CHECK(issue->rule == "ep-divides-experts");
    CHECK(issue->key == "ep");
    l.ep = 4;
    l.etp = 4;  // 16 does not divide tp*cp*dp = 8
    issue = check_layout(m, 8, t, l);
    REQUIRE(issue);
    CHECK(issue->rule == "ep-divides-dp");
    CHECK(issue->key == "etp");
    l.etp = 1;
    l.tp = 2;
    l.dp = 4;  // ep 4 with tp 2 and no SP
    issue = check_layout(m, 8, t, l);
    REQUIRE(issue);
    CHECK(issue->rule == "ep-tp-needs-sp");
    l.sp = true;
    CHECK_FALSE(check_layout(m, 8, t, l));
    Model topk = m;
    topk.moe->experts_per_token = 9;
    issue = check_layout(topk, 8, t, l);
    REQUIRE(issue);
    CHECK(issue->rule == "topk-exceeds-experts");
    issue = check_layout(preset("llama3.1-8b"), 8, t, l);
    REQUIRE(issue);
    CHECK(issue->rule == "ep-needs-moe");
    {
      // The router's settings need a router.
      Layout dense;
      dense.dp = 8;
      for (const char* key : {"moe_router_fusion", "moe_aux_loss"}) {
        Training r = t;
        r.moe_router_fusion = std::string_view(key) == "moe_router_fusion";
        r.moe_aux_loss = std::string_view(key) == "moe_aux_loss";
        const auto bad = check_layout(preset("llama3.1-8b"), 8, r, dense);
        REQUIRE(bad);
        CHECK(bad->rule == "ep-needs-moe");
        CHECK(bad->key == std::string(key));
      }
    }
    // Padding to capacity needs a capacity (Megatron-Core transformer_config.py).
    t.moe_pad_to_capacity = true;
    issue = check_layout(m, 8, t, l);
    REQUIRE(issue);
    CHECK(issue->rule == "pad-needs-capacity");
    CHECK(issue->key == "moe_pad_to_capacity");
    t.moe_capacity_factor = 1.0;
    CHECK_FALSE(check_layout(m, 8, t, l));
    // A flex backend other than the default needs the flex dispatcher.
    l.moe_flex_backend = FlexBackend::hybridep;
    issue = check_layout(m, 8, t, l);
    REQUIRE(issue);
    CHECK(issue->rule == "flex-backend-needs-flex");
    CHECK(issue->key == "moe_flex_backend");
  }

  TEST_CASE("DeepSeek-V3: MLA layer 187,107,328, 671.0B total, 37.6B active (arXiv 2412.19437)") {
    const Model m = preset("deepseek-v3");
    REQUIRE(m.mla);
    REQUIRE(m.moe);
    // MLA: q_a 7168*1536 + q_norm 1536 + q_b 1536*128*192 + kv_a 7168*(512+64) + kv_norm 512
    //      + kv_b 512*128*(128+128) + O 128*128*7168
    //    = 11,010,048 + 1,536 + 37,748,736 + 4,128,768 + 512 + 16,777,216 + 117,440,512
    //    = 187,107,328.
    // Dense layer (0-2): + 3*7168*18432 + 2*7168 = 583,483,392.
    CHECK(layer_params(m, 0) == 583'483'392);
    CHECK(layer_params(m, 2) == 583'483'392);
    // MoE layer (3-60): + router 7168*256 + shared 3*7168*2048 + 256 experts * 3*7168*2048
    //   + 2*7168 = 187,107,328 + 1,835,008 + 44,040,192 + 11,274,289,152 + 14,336.
    CHECK(layer_params(m, 3) == 11'507'286'016);
    CHECK(moe_layer_count(m) == 58);
    // 2*7168*129280 + 7168 + 3*583,483,392 + 58*11,507,286,016 = 671,026,404,352 ("671B").
    CHECK(total_params(m, 4096) == 671'026'404'352);
    // Less 58 layers * 248 idle experts * 44,040,192 = 37,552,282,624 ("37B activated").
    CHECK(active_params(m, 4096) == 37'552'282'624);
  }

  TEST_CASE("DeepSeek-V3 with one MTP module: +11,610,067,968 (685B with its embedding copies)") {
    Model m = preset("deepseek-v3");
    m.mtp_layers = 1;
    // One MoE layer 11,507,286,016 + enorm/hnorm 2*7168 + eh_proj 2*7168^2 + final norm 7168.
    CHECK(mtp_params(m) == 11'610'067'968);
    CHECK(total_params(m, 4096) == 682'636'472'320);
  }

  TEST_CASE("Mixtral 8x7B: 46.7B total, 12.9B active (arXiv 2401.04088)") {
    const Model m = preset("mixtral-8x7b");
    // 2*4096*4096 + 2*4096*1024 + 4096*8 + 8*3*4096*14336 + 2*4096 = 1,451,270,144
    CHECK(layer_params(m, 0) == 1'451'270'144);
    // 32 layers + 2*4096*32000 + 4096
    CHECK(total_params(m, 4096) == 46'702'792'704);
    // less 32 * 6 * 176,160,768
    CHECK(active_params(m, 4096) == 12'879'925'248);
  }

  TEST_CASE("Qwen3-30B-A3B: explicit head_dim 128, 30.5B total, 3.35B active") {
    const Model m = preset("qwen3-30b-a3b");
    CHECK(m.head_dim() == 128);  // not hidden/heads = 64
    // Q and O 2*2048*(32*128), K and V 2*2048*(4*128), router 2048*128,
    // 128 experts * 3*2048*768, norms 2*2048, the Q and K norms 2*128 = 623,120,640.
    CHECK(m.qk_norm);
    CHECK(layer_params(m, 47) == 623'120'640);
    CHECK(total_params(m, 4096) == 30'532'122'624);  // 30,532,110,336 + 48 x 256
    CHECK(active_params(m, 4096) == 3'353'032'704);
  }

  TEST_CASE("Hugging Face import: model_type qwen3 / qwen3_moe brings the per-head Q and K norms") {
    // transformers' Qwen3Attention and Qwen3MoeAttention always build q_norm and k_norm
    // (RMSNorm over head_dim); a Llama config has neither.
    const std::string qwen3 = R"({"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
      "moe_intermediate_size": 768, "num_hidden_layers": 48, "num_attention_heads": 32,
      "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8,
      "decoder_sparse_step": 1, "mlp_only_layers": [], "vocab_size": 151936, "tie_word_embeddings": false})";
    const Model m = model_from_hf_config_text(qwen3, "config.json");
    CHECK(m.qk_norm);
    CHECK(total_params(m, 4096) == total_params(preset("qwen3-30b-a3b"), 4096));
    std::string dense = qwen3;
    dense.replace(dense.find("qwen3_moe"), 9, "llama");
    CHECK_FALSE(model_from_hf_config_text(dense, "config.json").qk_norm);
  }

  TEST_CASE("Qwen3-235B-A22B: 235.1B total, 22.2B active") {
    const Model m = preset("qwen3-235b-a22b");
    // With the Q and K norms, 94 x 2 x 128 = 24,064 parameters.
    CHECK(total_params(m, 4096) == 235'093'634'560);
    CHECK(active_params(m, 4096) == 22'190'763'520);
  }

  TEST_CASE("Llama 4: Maverick interleaves MoE on odd layers (400.7B / 17.2B), Scout all (107.8B)") {
    const Model mav = preset("llama4-maverick");
    CHECK_FALSE(is_moe_layer(mav, 0));
    CHECK(is_moe_layer(mav, 1));
    CHECK_FALSE(is_moe_layer(mav, 46));
    CHECK(is_moe_layer(mav, 47));
    CHECK(moe_layer_count(mav) == 24);
    // 24 dense layers (attention 2*5120*5120 + 2*5120*1024, MLP 3*5120*16384) and 24 MoE layers
    // (router 5120*128, shared 3*5120*8192, 128 experts of 3*5120*8192), 2*5120*202048 + 5120.
    CHECK(total_params(mav, 8192) == 400'711'848'960);
    CHECK(active_params(mav, 8192) == 17'184'691'200);
    const Model scout = preset("llama4-scout");
    CHECK(moe_layer_count(scout) == 48);
    CHECK(total_params(scout, 8192) == 107'769'861'120);
    CHECK(active_params(scout, 8192) == 17'172'894'720);
  }

  TEST_CASE("MoE layer placement: first_k_dense, moe_layer_freq, interleave step") {
    Model m = preset("deepseek-v3");
    CHECK_FALSE(is_moe_layer(m, 2));
    CHECK(is_moe_layer(m, 3));
    CHECK(moe_layers_in(m, 0, 8) == 5);
    m.moe->moe_layer_freq = 2;  // Megatron-Core: i % 2 == 0, from layer 3 on: 4, 6, ...
    CHECK_FALSE(is_moe_layer(m, 3));
    CHECK(is_moe_layer(m, 4));
    CHECK(moe_layers_in(m, 0, 10) == 3);  // 4, 6, 8
    CHECK_FALSE(is_moe_layer(preset("llama3.1-8b"), 5));
  }

  TEST_CASE("Model FLOPs per token: DeepSeek-V3 249.8 GFLOP, with MTP 260.0 GFLOP (Megatron-LM)") {
    Model m = preset("deepseek-v3");
    // MLP 6*7168*(18432*3*3 + (2048*8*3 + 2048*3)*58) = 145,068,392,448
    // MLA per layer 6*(1536*(7168+128*192+1) + 512*(7168+128*256+1) + 7168*64 + 128*128*7168
    //   + 4096*128*192/2 + 4096*128*128/2) = 1,625,960,448, times 61
    // logits 6*7168*129280
    CHECK(megatron_flops_per_token(m, 4096) == approx(249'812'054'016.0).epsilon(1e-12));
    // One MTP module: 59 MoE MLPs, 62 attention layers, 6*(3h + 2h^2), two LM heads. The
    // Megatron-Bridge tables print about 260 GFLOP/token for their "w/ MTP" DeepSeek-V3 rows.
    m.mtp_layers = 1;
    CHECK(megatron_flops_per_token(m, 4096) == approx(259'992'950'784.0).epsilon(1e-12));
  }

  TEST_CASE("Model FLOPs per token: Mixtral 8x7B counts the two routed experts' grouped GEMMs") {
    const Model m = preset("mixtral-8x7b");
    // 6*4096*(14336*2*3)*32 + 32*6*(4096*(4096 + 2*1024) + 4096*4096 + 4096*4096)
    //   + 6*4096*32000 = 79,706,456,064 at s = 4096
    CHECK(megatron_flops_per_token(m, 4096) == approx(79'706'456'064.0).epsilon(1e-12));
  }

  TEST_CASE("Stage parameters: experts split over ep and etp, dense part over tp") {
    const Model m = preset("qwen3-30b-a3b");
    Layout l;
    l.tp = 2;
    l.pp = 2;
    l.dp = 4;
    l.ep = 4;
    l.etp = 2;
    l.sp = true;
    const auto stages = stage_params(m, l, 4096);
    REQUIRE(stages.size() == 2);
    CHECK(stages[0].moe_layers == 24);
    // 128/4 = 32 experts of 3*2048*768 = 4,718,592, each split over etp 2: 75,497,472 per layer.
    CHECK(stages[0].expert_params == 24LL * 75'497'472);
    // Non-expert part per layer on one GPU: (2*2048*4096 + 2*2048*512)/2 + 2048*128 + 2*2048
    //   + the Q and K norms 2*128 = 9,437,184 + 262,144 + 4,096 + 256 = 9,703,680; embedding
    //   2048*152064/2 (padded to 256).
    CHECK(stages[0].params == 24LL * (9'703'680 + 75'497'472) + 2048LL * 152064 / 2);
  }

  TEST_CASE("Stage parameters: DeepSeek-V3 with MTP over pp 2, ep 8 (MTP on the last stage)") {
    Model m = preset("deepseek-v3");
    m.mtp_layers = 1;
    Layout l;
    l.pp = 2;
    l.dp = 8;
    l.ep = 8;
    l.first_stage_layers = 30;
    l.last_stage_layers = 31;
    const auto stages = stage_params(m, l, 4096);
    REQUIRE(stages.size() == 2);
    // Layers 0-29 (MoE from layer 3: 27) and 30-60 (31); 256/8 = 32 experts of
    // 3*7168*2048 = 44,040,192 per MoE layer: 1,409,286,144 per layer on one GPU.
    CHECK(stages[0].moe_layers == 27);
    CHECK(stages[1].moe_layers == 31);
    CHECK(stages[0].expert_params == 27LL * 1'409'286'144);
    CHECK(stages[1].mtp_layers == 1);
    CHECK(stages[1].expert_params == 32LL * 1'409'286'144);  // + the MTP module's experts
    CHECK(stages[0].mtp_layers == 0);
  }
}
