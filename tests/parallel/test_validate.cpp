#include <doctest/doctest.h>

#include <string>

#include "tetra/model/presets.hpp"
#include "tetra/parallel/validate.hpp"

using namespace tetra::model;
using namespace tetra::parallel;

namespace {

/// Llama-3.1-8B on 64 GPUs: tp=2 pp=4 dp=8, global batch 512, seq 8192 -- valid.
struct Case {
  Model model = *find_model_preset("llama3.1-8b");
  long long world = 64;
  Training training;
  Layout layout;
  Case() {
    training.seq_len = 8192;
    training.global_batch = 512;
    layout.tp = 2;
    layout.pp = 4;
    layout.dp = 8;
  }
  [[nodiscard]] std::optional<LayoutIssue> check() const {
    return check_layout(model, world, training, layout);
  }
};

/// Asserts that `c` breaks `rule`, blaming `key`, and returns the message.
std::string expect_issue(const Case& c, const std::string& key, const std::string& rule) {
  const auto issue = c.check();
  REQUIRE(issue.has_value());
  CHECK(issue->key == key);
  CHECK(issue->rule == rule);
  return issue->message;
}

}  // namespace

TEST_SUITE("llama") {
  TEST_CASE("a valid layout passes") {
    Case c;
    CHECK_FALSE(c.check().has_value());
    c.layout.sp = true;
    CHECK_FALSE(c.check().has_value());
  }

  TEST_CASE("model shape") {
    Case c;
    c.model.layers = 0;
    expect_issue(c, "layers", "model-positive");
    c = Case();
    c.model.hidden = 4097;
    expect_issue(c, "hidden", "heads-divide-hidden");
    c = Case();
    c.model.kv_heads = 5;
    expect_issue(c, "kv_heads", "kv-heads-divide-heads");
  }

  TEST_CASE("positive sizes") {
    for (const char* key : {"tp", "cp", "pp", "dp", "vp", "mbs"}) {
      Case c;
      const std::string k = key;
      if (k == "tp") c.layout.tp = 0;
      if (k == "cp") c.layout.cp = -1;
      if (k == "pp") c.layout.pp = 0;
      if (k == "dp") c.layout.dp = 0;
      if (k == "vp") c.layout.vp = 0;
      if (k == "mbs") c.layout.mbs = 0;
      CAPTURE(k);
      CHECK(expect_issue(c, k, "positive").find("must be a positive integer") !=
            std::string::npos);
    }
    Case c;
    c.training.seq_len = 0;
    expect_issue(c, "seq_len", "positive");
    c = Case();
    c.training.global_batch = 0;
    expect_issue(c, "global_batch", "positive");
    c = Case();
    c.layout.last_stage_layers = -2;
    expect_issue(c, "last_stage_layers", "positive");
  }

  TEST_CASE("zero_stage in 0..3") {
    Case c;
    c.training.zero_stage = 4;
    CHECK(expect_issue(c, "zero_stage", "zero-stage-range") == "zero_stage=4 must be 0, 1, 2 or 3");
    c.training.zero_stage = 3;
    CHECK_FALSE(c.check());
  }

  TEST_CASE("tp divides heads, kv_heads and ffn_hidden") {
    Case c;
    c.layout.tp = 3;
    c.world = 3 * 4 * 8;
    CHECK(expect_issue(c, "tp", "tp-divides-heads") == "tp=3 must divide heads=32 and kv_heads=8");
    c = Case();
    c.layout.tp = 16;  // divides heads=32 but not kv_heads=8
    c.layout.dp = 1;
    expect_issue(c, "tp", "tp-divides-heads");
    c = Case();
    c.model.ffn_hidden = 14337;
    expect_issue(c, "tp", "tp-divides-ffn");
  }

  TEST_CASE("dp*tp*cp*pp equals the cluster size") {
    Case c;
    c.world = 128;
    CHECK(expect_issue(c, "dp", "world-size") ==
          "dp*tp*cp*pp = 8*2*1*4 = 64 must equal the cluster's 128 GPUs");
  }

  TEST_CASE("mbs*dp divides global_batch") {
    Case c;
    c.training.global_batch = 500;
    c.layout.mbs = 1;
    CHECK(expect_issue(c, "global_batch", "batch-divides") ==
          "global_batch=500 must be a multiple of mbs*dp = 1*8 = 8");
  }

  TEST_CASE("cp needs seq_len divisible by 2*cp") {
    Case c;
    c.layout.cp = 2;
    c.layout.dp = 4;
    c.training.seq_len = 8194;
    CHECK(expect_issue(c, "cp", "cp-divides-seq").find("2*cp = 4") != std::string::npos);
    c.training.seq_len = 8192;
    CHECK_FALSE(c.check());
  }

  TEST_CASE("cp_comm_type: Transformer Engine's rules (context_parallel.py attn_forward_func_with_cp)") {
    // Llama 3.1 8B (32 heads, 8 KV heads) at tp 2, cp 2, pp 4, dp 4.
    Case c;
    c.layout.cp = 2;
    c.layout.dp = 4;
    for (const CpComm comm : {CpComm::p2p, CpComm::all_gather, CpComm::a2a}) {
      c.layout.cp_comm = comm;
      CHECK_FALSE(c.check());
    }
    // a2a scatters heads: 8/2 = 4 KV heads per tp rank do not split over cp 8.
    c.layout.cp = 8;
    c.layout.dp = 1;
    c.layout.cp_comm = CpComm::a2a;
    const std::string why = expect_issue(c, "cp_comm_type", "a2a-divides-heads");
    CHECK(why.find("kv_heads/tp = 4") != std::string::npos);
    CHECK(why.find("cp=8") != std::string::npos);
    c.layout.cp_comm = CpComm::all_gather;
    CHECK_FALSE(c.check());
    // PyTorch's context parallelism has no cp_comm_type.
    c.training.framework = Framework::fsdp;
    CHECK(expect_issue(c, "cp_comm_type", "cp-comm-needs-megatron").find("\"fsdp\"") != std::string::npos);
    c.layout.cp_comm = CpComm::p2p;
    CHECK_FALSE(check_cp_comm(c.model, c.training, c.layout));
    // At cp = 1 there is nothing to exchange, whatever it says.
    c.layout.cp = 1;
    c.layout.cp_comm = CpComm::a2a;
    CHECK_FALSE(check_cp_comm(c.model, c.training, c.layout));
    // MLA (K and V of different widths) runs only in the ring.
    Model mla = *find_model_preset("deepseek-v3");
    Layout l;
    l.cp = 2;
    l.cp_comm = CpComm::a2a;
    Training tr;
    CHECK(check_cp_comm(mla, tr, l)->rule == "cp-comm-mla");
    l.cp_comm = CpComm::p2p;
    CHECK_FALSE(check_cp_comm(mla, tr, l));
    // gpt-oss's sliding windows and learnable softmax sinks: a2a only (Megatron-Bridge's gpt-oss
    // recipes set cp_comm_type = "a2a").
    Model oss = *find_model_preset("llama3.1-8b");
    oss.arch = Arch::gpt_oss;
    CHECK(check_cp_comm(oss, tr, l)->rule == "cp-comm-sinks");
    l.cp_comm = CpComm::a2a;
    CHECK_FALSE(check_cp_comm(oss, tr, l));
    // Spellings: Megatron-Core's, and the "allgather" of Megatron-LM's --cp-comm-type help.
    for (const CpComm comm : {CpComm::p2p, CpComm::all_gather, CpComm::a2a, CpComm::a2a_p2p}) {
      CHECK(parse_cp_comm(to_string(comm)) == comm);
    }
    CHECK(parse_cp_comm("allgather") == CpComm::all_gather);
    CHECK(parse_cp_comm("a2a+p2p") == CpComm::a2a_p2p);
    CHECK_FALSE(parse_cp_comm("p2p+a2a"));
  }

  TEST_CASE("cp_comm_type a2a+p2p: two levels of two or more ranks, the heads split over the all-to-all level (Megatron-Core hierarchical_context_parallel_sizes, TE attn_forward_func_with_cp)") {
    // Llama 3.1 8B (32 heads, 8 KV heads) at tp 2, cp 8, pp 4: 4 KV heads per TP rank.
    Case c;
    c.layout.cp = 8;
    c.layout.dp = 1;
    c.layout.cp_comm = CpComm::a2a_p2p;
    c.layout.cp_a2a = 2;
    CHECK_FALSE(c.check());
    c.layout.cp_a2a = 4;
    CHECK_FALSE(c.check());
    CHECK(c.layout.cp_ring() == 2);
    // A level of one rank is the other scheme alone; a level that does not divide cp is no split.
    for (const int a : {1, 8, 3}) {
      c.layout.cp_a2a = a;
      CHECK(expect_issue(c, "cp_a2a", "cp-a2a-divides-cp").find("cp=8") != std::string::npos);
    }
    // The all-to-all level scatters heads: at tp 8, one KV head per rank does not split.
    c.layout.cp_a2a = 2;
    c.layout.tp = 8;
    c.layout.pp = 1;
    const std::string why = expect_issue(c, "cp_a2a", "a2a-divides-heads");
    CHECK(why.find("kv_heads/tp = 1") != std::string::npos);
    CHECK(why.find("cp_a2a=2") != std::string::npos);
    // cp_a2a sizes a2a+p2p alone.
    c.layout.tp = 2;
    c.layout.pp = 4;
    c.layout.cp_comm = CpComm::p2p;
    CHECK(expect_issue(c, "cp_a2a", "cp-a2a-needs-hierarchical").find("\"p2p\"") != std::string::npos);
    // MLA's ring runs under both ring schemes.
    Model mla = *find_model_preset("deepseek-v3");
    Layout l;
    l.cp = 4;
    l.cp_comm = CpComm::a2a_p2p;
    l.cp_a2a = 2;
    Training tr;
    CHECK_FALSE(check_cp_comm(mla, tr, l));
  }

  TEST_CASE("sp needs tp > 1 and a sequence divisible by tp") {
    Case c;
    c.layout.tp = 1;
    c.layout.dp = 16;
    c.layout.sp = true;
    CHECK(expect_issue(c, "sp", "sp-needs-tp") == "sp=true needs tp > 1");
    c = Case();
    c.layout.sp = true;
    c.training.seq_len = 4095;
    expect_issue(c, "sp", "sp-divides-seq");
  }

  TEST_CASE("layers split into pp*vp chunks") {
    Case c;
    c.layout.pp = 8;
    c.layout.dp = 4;
    c.layout.vp = 8;  // 64 chunks for 32 layers
    c.layout.schedule = Schedule::interleaved;
    CHECK(expect_issue(c, "vp", "layers-divide").find("pp*vp = 8*8 = 64") != std::string::npos);
    Case d;
    d.model = *find_model_preset("llama3.1-405b");
    d.layout.pp = 16;
    d.layout.dp = 1;
    d.layout.tp = 4;
    d.training.global_batch = 64;
    expect_issue(d, "pp", "layers-divide");
  }

  TEST_CASE("uneven first/last stage split") {
    Case c;
    c.model = *find_model_preset("llama3.1-405b");
    c.layout.tp = 4;
    c.layout.pp = 16;
    c.layout.dp = 1;
    c.training.global_batch = 64;
    c.layout.first_stage_layers = 7;
    c.layout.last_stage_layers = 7;
    CHECK_FALSE(c.check());  // 112 over 14 middle ranks = 8 each
    c.layout.first_stage_layers = 6;
    c.layout.last_stage_layers = 6;  // 114 over 14: not even
    CHECK(expect_issue(c, "first_stage_layers", "uneven-split").find("leaves 114") !=
          std::string::npos);
    c.layout.first_stage_layers = 6;
    c.layout.last_stage_layers = 0;  // 120 over 15 = 8
    CHECK_FALSE(c.check());
    // vp > 1: the end ranks' other chunks hold k = middle layers / vp (parallel::chunk_layers,
    // arXiv 2407.21783 section 3.3.2). first 6, rest 120 over 15 ranks x 2 chunks -> k = 4;
    // rank 0 = chunk 0 (6 - 4 = 2) + chunk 1 (4).
    c.layout.vp = 2;
    c.layout.schedule = Schedule::interleaved;
    CHECK_FALSE(c.check());
    // 120 over 15 ranks x 16 chunks = 240 chunks: fewer layers than chunks.
    c.layout.vp = 16;
    expect_issue(c, "first_stage_layers", "uneven-split");
    // Llama 3: 7 + 14 x 8 + 7 with vp 8 -> k = 1, the first and the last chunk hold 0 layers
    // (embedding only / head only) and the rank's 7 other chunks 1 each.
    c.layout.vp = 8;
    c.layout.first_stage_layers = 7;
    c.layout.last_stage_layers = 7;
    CHECK_FALSE(c.check());
    // vp 4: 112 over 14 x 4 = 56 chunks -> k = 2; an end needs >= 3 x 2 = 6 layers.
    c.layout.vp = 4;
    c.layout.first_stage_layers = 5;
    c.layout.last_stage_layers = 9;  // 112 left: even over the middle, but 5 < 6
    CHECK(expect_issue(c, "first_stage_layers", "uneven-chunks").find("= 6") != std::string::npos);
    c.layout.first_stage_layers = 6;
    c.layout.last_stage_layers = 8;
    CHECK_FALSE(c.check());
    // pp 2 and both ends fixed: k = ceil(126/(2 x 8)) = 8; an end needs >= 7 x 8 = 56.
    Case p2;
    p2.model = c.model;
    p2.layout.tp = 4;
    p2.layout.pp = 2;
    p2.layout.dp = 1;
    p2.layout.vp = 8;
    p2.layout.schedule = Schedule::interleaved;
    p2.training.global_batch = 64;
    p2.world = 8;
    p2.layout.first_stage_layers = 55;
    p2.layout.last_stage_layers = 71;
    expect_issue(p2, "first_stage_layers", "uneven-chunks");
    p2.layout.first_stage_layers = 63;
    p2.layout.last_stage_layers = 63;
    CHECK_FALSE(p2.check());
    Case p1;
    p1.layout.pp = 1;
    p1.layout.dp = 32;
    p1.layout.first_stage_layers = 4;
    expect_issue(p1, "first_stage_layers", "uneven-needs-pp");
    Case two;
    two.layout.pp = 2;
    two.layout.dp = 16;
    two.layout.first_stage_layers = 15;
    two.layout.last_stage_layers = 16;  // 31 != 32
    expect_issue(two, "first_stage_layers", "uneven-split");
    two.layout.last_stage_layers = 17;
    CHECK_FALSE(two.check());
  }

  TEST_CASE("vp and the interleaved schedule") {
    Case c;
    c.layout.vp = 2;
    CHECK(expect_issue(c, "vp", "vp-needs-interleaved").find("\"1f1b\"") != std::string::npos);
    c.layout.schedule = Schedule::interleaved;
    CHECK_FALSE(c.check());
    // Layered gradient accumulation places vp chunks per rank too (modular placement:
    // Lamy-Poirier, arXiv 2106.02679; ServiceNow Fast-LLM), and
    // has no micro-batch group rule: 520/(1*8) = 65 micro-batches are fine.
    c.layout.schedule = Schedule::layered;
    CHECK_FALSE(c.check());
    c.training.global_batch = 520;
    CHECK_FALSE(c.check());
    c.layout.schedule = Schedule::gpipe;
    CHECK(expect_issue(c, "vp", "vp-needs-interleaved").find("\"layered\"") != std::string::npos);
    Case v;
    v.layout.pp = 1;
    v.layout.dp = 32;
    v.layout.vp = 2;
    v.layout.schedule = Schedule::interleaved;
    expect_issue(v, "vp", "vp-needs-pp");
    Case i;
    i.layout.schedule = Schedule::interleaved;
    expect_issue(i, "schedule", "interleaved-needs-vp");
    Case m;  // 8*... micro-batches = 520/(1*8) = 65, not a multiple of pp=4
    m.layout.vp = 2;
    m.layout.schedule = Schedule::interleaved;
    m.training.global_batch = 520;
    CHECK(expect_issue(m, "global_batch", "interleaved-microbatches").find("= 65") !=
          std::string::npos);
  }

  TEST_CASE("zb-h1 with pp=1 is accepted (runs as 1f1b)") {
    Case c;
    c.layout.pp = 1;
    c.layout.dp = 32;
    c.layout.schedule = Schedule::zb_h1;
    CHECK_FALSE(c.check());
  }

  TEST_CASE("rank_order names each dimension once") {
    Case c;
    c.layout.rank_order = "tp-dp-pp";
    expect_issue(c, "rank_order", "rank-order");
    c.layout.rank_order = "tp-tp-dp-pp";
    expect_issue(c, "rank_order", "rank-order");
    c.layout.rank_order = "pp-dp-cp-tp";
    CHECK_FALSE(c.check());
  }

  TEST_CASE("enum spellings round-trip") {
    for (auto s : {Schedule::gpipe, Schedule::one_f_one_b, Schedule::interleaved, Schedule::zb_h1,
                   Schedule::layered}) {
      CHECK(parse_schedule(to_string(s)) == s);
    }
    CHECK(std::string(to_string(Schedule::one_f_one_b)) == "1f1b");
    CHECK(std::string(to_string(Schedule::zb_h1)) == "zb-h1");
    for (auto a : {AttentionKernel::flash2, AttentionKernel::flash3, AttentionKernel::flash1,
                   AttentionKernel::cudnn, AttentionKernel::fused, AttentionKernel::torch}) {
      CHECK(parse_attention(to_string(a)) == a);
    }
    for (auto r : {Recompute::none, Recompute::selective, Recompute::full}) {
      CHECK(parse_recompute(to_string(r)) == r);
    }
    for (auto p : {Precision::bf16, Precision::fp16, Precision::fp32}) {
      CHECK(parse_precision(to_string(p)) == p);
    }
    for (auto f : {Framework::megatron, Framework::deepspeed, Framework::fsdp}) {
      CHECK(parse_framework(to_string(f)) == f);
    }
    CHECK(parse_optimizer("adam") == Optimizer::adam);
    CHECK(parse_arch("gpt") == Arch::gpt);
    CHECK_FALSE(parse_schedule("1F1B"));
    CHECK_FALSE(parse_precision("bfloat16"));
    CHECK(bytes_of(Precision::bf16) == 2);
    CHECK(bytes_of(Precision::fp32) == 4);
    Layout l;
    l.dp = 8;
    l.mbs = 2;
    Training t;
    t.global_batch = 512;
    CHECK(micro_batches(l, t) == 32);
  }

  TEST_CASE("ac_freq belongs to recompute = selective_layer") {
    Case c;
    c.layout.recompute = Recompute::selective_layer;
    c.layout.ac_freq = 3;
    CHECK_FALSE(c.check().has_value());
    c.layout.recompute = Recompute::full;
    const std::string msg = expect_issue(c, "ac_freq", "ac-freq-needs-selective-layer");
    CHECK(msg.find("selective_layer") != std::string::npos);
  }
}

TEST_SUITE("llama") {
  TEST_CASE("offload_layers: Megatron-Core's cpu_offloading rules (transformer_config.py)") {
    Case c;
    c.layout.offload_layers = 4;
    // "Currently there is no support for Pipeline parallelism with CPU offloading".
    CHECK(expect_issue(c, "offload_layers", "offload-needs-pp1").find("pp=4") != std::string::npos);
    c.layout.pp = 1;
    c.layout.dp = 32;
    CHECK_FALSE(c.check().has_value());
    c.layout.recompute = Recompute::full;
    expect_issue(c, "offload_layers", "offload-no-recompute");
    c.layout.recompute = Recompute::none;
    c.training.cuda_graphs.add(CudaGraphScope::attn);
    expect_issue(c, "offload_layers", "offload-no-cuda-graph");
    c.training.cuda_graphs = {};
    c.layout.offload_layers = 32;
    expect_issue(c, "offload_layers", "offload-below-layers");
    c.layout.offload_layers = 4;
    c.training.framework = Framework::fsdp;
    c.training.zero_stage = 3;
    CHECK(expect_issue(c, "offload_layers", "offload-needs-megatron").find("fsdp") != std::string::npos);
  }

  TEST_CASE("adam_moments_dtype: bf16 moments are Megatron-Core's precision-aware optimizer") {
    Case c;
    c.training.adam_moments_dtype = Precision::bf16;
    CHECK_FALSE(c.check().has_value());
    c.training.framework = Framework::deepspeed;
    expect_issue(c, "adam_moments_dtype", "moments-need-megatron");
  }

  TEST_CASE("recompute_modules: Megatron-Core's rules (transformer_config.py)") {
    Case c;
    c.layout.recompute_modules.add(RecomputeModule::layernorm);
    CHECK(expect_issue(c, "recompute_modules", "modules-need-selective").find("selective") != std::string::npos);
    c.layout.recompute = Recompute::selective;
    CHECK_FALSE(c.check().has_value());
    c.layout.recompute_modules.add(RecomputeModule::mla_up_proj);
    expect_issue(c, "recompute_modules", "mla-up-proj-needs-mla");
    c.layout.recompute_modules = {};
    c.layout.recompute_modules.add(RecomputeModule::moe_act);
    expect_issue(c, "recompute_modules", "module-needs-moe");
    // Delayed FP8 scaling supports neither moe_act nor layernorm recomputation.
    Case q;
    q.model = *find_model_preset("qwen3-30b-a3b");
    q.world = 16;
    q.training.seq_len = 4096;
    q.training.global_batch = 256;
    q.layout = Layout{};
    q.layout.dp = 16;
    q.layout.ep = 8;
    q.layout.recompute = Recompute::selective;
    q.layout.recompute_modules.add(RecomputeModule::moe_act);
    CHECK_FALSE(q.check().has_value());
    q.training.fp8.recipe = Fp8Recipe::delayed;
    expect_issue(q, "recompute_modules", "modules-delayed-fp8");
    q.training.fp8.recipe = Fp8Recipe::none;
    q.layout.recompute_modules.add(RecomputeModule::shared_experts);
    expect_issue(q, "recompute_modules", "shared-experts-needs-shared");
    q.layout.recompute_modules = {};
    q.layout.recompute_modules.add(RecomputeModule::moe);
    q.training.moe_a2a_overlap = true;
    expect_issue(q, "recompute_modules", "moe-recompute-a2a-overlap");
  }

  TEST_CASE("recompute_modules spell as Megatron-Core does, joined by '+'") {
    const RecomputeModulesParse p = parse_recompute_modules("moe_act+layernorm+mla_up_proj");
    CHECK(p.unknown.empty());
    CHECK(p.modules.has(RecomputeModule::moe_act));
    CHECK(p.modules.has(RecomputeModule::layernorm));
    CHECK_FALSE(p.modules.has(RecomputeModule::core_attn));
    CHECK(format_recompute_modules(p.modules) == "moe_act+layernorm+mla_up_proj");
    CHECK(parse_recompute_modules("moe_act+attention").unknown == "attention");
    Layout l;
    CHECK(recomputed_modules(l).empty());
    CHECK_FALSE(recomputes(l, RecomputeModule::core_attn));
    l.recompute = Recompute::selective;
    CHECK(format_recompute_modules(recomputed_modules(l)) == "core_attn");  // Megatron-Core's default list
    l.recompute_modules.add(RecomputeModule::moe_act);
    CHECK(format_recompute_modules(recomputed_modules(l)) == "moe_act");
    CHECK_FALSE(recomputes(l, RecomputeModule::core_attn));
    CHECK(recomputes(l, RecomputeModule::moe_act));
    l.recompute = Recompute::full;  // a list applies under selective only
    CHECK(recomputed_modules(l).empty());
  }
}
