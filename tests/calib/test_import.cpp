// Recorded tables (CSV), trace import (Kineto / Nsight JSON) and the replay sweep.
#include <algorithm>
#include <fstream>
#include <sstream>

#include <doctest/doctest.h>
#include "support/approx.hpp"

#include "synthetic.hpp"
#include "tetra/calib/sweep.hpp"
#include "tetra/calib/tables.hpp"
#include "tetra/calib/trace_import.hpp"
#include "tetra/base/error.hpp"

using tetra::test::approx;
using namespace tetra;
using namespace tetra::calib;

namespace {

const std::string kData = std::string(TETRA_SOURCE_DIR) + "/tests/data/calib/";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_SUITE("calib") {
  TEST_CASE("tables round-trip exactly through CSV") {
    const auto p = testing::make_synthetic();
    const auto text = format_tables_csv(p);
    const auto q = parse_tables_csv(text, "mem");
    REQUIRE(q.gemm.size() == p.gemm.size());
    CHECK(q.gemm[7].seconds == p.gemm[7].seconds);
    CHECK(q.collective.back().bytes == p.collective.back().bytes);
    CHECK(q.attention[3].pass == p.attention[3].pass);
    CHECK(q.meta.sms == 132);
    CHECK(format_tables_csv(q) == text);
  }

  TEST_CASE("malformed tables give one-line errors with file and line") {
    CHECK_THROWS_WITH_AS((void)parse_tables_csv("[gemm]\nm,n,k,seconds\n1,2,x,0.1\n", "t.csv"),
                         doctest::Contains("t.csv:3"), UserError);
    CHECK_THROWS_WITH_AS((void)parse_tables_csv("[gemm]\nm,n,kk,seconds\n", "t.csv"),
                         doctest::Contains("unknown column 'kk'"), UserError);
    CHECK_THROWS_WITH_AS((void)parse_tables_csv("[gemm]\nm,n,seconds\n", "t.csv"),
                         doctest::Contains("missing column 'k'"), UserError);
    CHECK_THROWS_WITH_AS((void)parse_tables_csv("[nope]\n", "t.csv"), doctest::Contains("unknown table"), UserError);
    CHECK_THROWS_WITH_AS((void)parse_tables_csv("1,2\n", "t.csv"), doctest::Contains("before any [table]"), UserError);
    CHECK_THROWS_AS((void)parse_tables_csv("[collective]\nop,ranks,ranks_per_node,bytes,seconds\nbcast,8,8,1,1\n", "t"),
                    UserError);
    CHECK_THROWS_AS((void)parse_tables_csv("[gemm]\nm,n,k,seconds\n1,2,3,-1\n", "t"), UserError);
    CHECK_THROWS_AS((void)parse_tables_csv("[gemm]\nm,n,k,seconds\n1,2,3\n", "t"), UserError);
    CHECK_THROWS_AS((void)read_tables_csv(kData + "does_not_exist.csv"), UserError);
    // Every prefix of a valid table parses or throws a UserError; nothing else escapes.
    const auto text = slurp(kData + "published_a100.csv");
    for (std::size_t n = 0; n < text.size(); n += 7) {
      try {
        (void)parse_tables_csv(std::string_view(text).substr(0, n), "prefix");
      } catch (const UserError&) {
      }
    }
  }

  TEST_CASE("a real PyTorch 2.11 trace of an H100: cuDNN attention calls and fused RMSNorm") {
    // calib/probes/kineto_trace.py on one H100 SXM: one training step of two Llama-style blocks
    // (hidden 2048, 16 heads, 4 KV heads, head dim 128, 2048 tokens), SDPA on cuDNN.
    const auto imp = import_trace(kData + "torch211_h100_kineto.json");
    CHECK(imp.kernels == 82);
    const auto& p = imp.profile;
    CHECK(p.meta.gpu == "NVIDIA H100 80GB HBM3");
    CHECK(p.meta.sms == 132);
    CHECK(p.gemm.size() == 9);
    REQUIRE(p.attention.size() == 2);
    for (const auto& a : p.attention) {
      CHECK(a.batch == 1);
      CHECK(a.seq == 2048);
      CHECK(a.heads == 16);
      CHECK(a.kv_heads == 4);
      CHECK(a.head_dim == 128);
    }
    // Forward: the one fprop kernel, 49.586 us in both blocks. Backward: the five kernels of
    // aten::_cudnn_attention_backward summed per call, 11.4 + 137.3 + 10.7 + 5.4 + 6.0 and
    // 11.4 + 133.9 + 10.9 + 5.3 + 6.1 us, median 169.222 us.
    CHECK(p.attention[0].pass == costmodel::AttentionPass::fwd);
    CHECK(p.attention[0].seconds == approx(49.586e-6).epsilon(1e-4));
    CHECK(p.attention[1].pass == costmodel::AttentionPass::bwd);
    CHECK(p.attention[1].seconds == approx(169.222e-6).epsilon(1e-4));
    // torch.nn.RMSNorm's kernel is named after layer norm; its op (aten::_fused_rms_norm) says
    // what it is: 2048 x 2048 bf16 read and written = 16 MiB.
    bool rmsnorm = false;
    for (const auto& m : p.memory_bound) {
      if (m.kernel != "rmsnorm") continue;
      rmsnorm = true;
      CHECK(m.bytes == 16777216.0);
    }
    CHECK(rmsnorm);
  }

  TEST_CASE("a Kineto trace gives GEMM, attention, collective and memory rows") {
    const auto imp = import_trace(kData + "kineto_small.json");
    CHECK(imp.kernels == 10);  // kernel events; the DtoD memcpy is a gpu_memcpy event
    CHECK(imp.used == 8);
    const auto& p = imp.profile;
    REQUIRE(p.gemm.size() == 2);
    // aten::linear [1, 4096, 4096] x [6144, 4096]^T -> M = 4096, N = 6144, K = 4096.
    CHECK(p.gemm[0].m == 4096);
    CHECK(p.gemm[0].n == 6144);
    CHECK(p.gemm[0].k == 4096);
    CHECK(p.gemm[0].seconds == approx(290e-6));
    // aten::mm [4096, 4096] x [4096, 14336]: three launches of 610, 630, 620 us -> median 620 us
    // (4.81e11 FLOP in 620 us = 776 TFLOP/s, an H100-like rate).
    CHECK(p.gemm[1].n == 14336);
    CHECK(p.gemm[1].seconds == approx(620e-6));
    REQUIRE(p.attention.size() == 2);
    CHECK(p.attention[0].pass == costmodel::AttentionPass::fwd);
    CHECK(p.attention[0].heads == 32);
    CHECK(p.attention[0].kv_heads == 8);
    CHECK(p.attention[0].seq == 4096);
    CHECK(p.attention[1].pass == costmodel::AttentionPass::bwd);
    CHECK(p.attention[1].kv_heads == 8);
    CHECK(p.attention[1].seconds == approx(1620e-6));
    REQUIRE(p.collective.size() == 1);
    // 33554432 bf16 elements = 64 MiB over a group of 8.
    CHECK(p.collective[0].op == "all_reduce");
    CHECK(p.collective[0].ranks == 8);
    CHECK(p.collective[0].bytes == approx(67108864.0));
    REQUIRE(p.memory_bound.size() == 2);
    // DtoD memcpy of 64 MiB: 128 MiB moved (read + write); RMSNorm over 4096 x 4096 bf16: 64 MiB.
    CHECK(p.memory_bound[0].kernel == "copy");
    CHECK(p.memory_bound[0].bytes == approx(134217728.0));
    CHECK(p.memory_bound[1].kernel == "rmsnorm");
    CHECK(p.memory_bound[1].bytes == approx(67108864.0));
    CHECK(imp.skipped.at("kernel kind not modelled") == 1);
    CHECK(imp.skipped.at("GEMM kernel without a shaped aten op") == 1);
  }

  TEST_CASE("ATen's inner flash-attention op takes [b, s, heads, d]") {
    // aten::_flash_attention_forward(q [1, 4096, 32, 128], k [1, 4096, 8, 128], v, ...)
    const std::string trace = R"json({"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "aten::_flash_attention_forward", "ts": 1, "dur": 5,
       "args": {"External id": 7, "Input Dims": [[1, 4096, 32, 128], [1, 4096, 8, 128], [1, 4096, 8, 128]],
                "Input type": ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16"]}},
      {"ph": "X", "cat": "kernel", "name": "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>, true, true>(pytorch_flash::Flash_fwd_params)",
       "ts": 2, "dur": 600.0, "args": {"External id": 7}}]})json";
    const auto imp = import_trace_text(trace, "inline");
    REQUIRE(imp.profile.attention.size() == 1);
    const auto& a = imp.profile.attention[0];
    CHECK(a.batch == 1);
    CHECK(a.seq == 4096);
    CHECK(a.heads == 32);
    CHECK(a.kv_heads == 8);
    CHECK(a.head_dim == 128);
  }

  TEST_CASE("bad traces are one-line user errors, never crashes") {
    CHECK_THROWS_WITH_AS((void)import_trace_text("", "a.json"), doctest::Contains("a.json: the trace is empty"),
                         UserError);
    CHECK_THROWS_WITH_AS((void)import_trace_text("{\"traceEvents\": [", "a.json"),
                         doctest::Contains("not valid JSON"), UserError);
    CHECK_THROWS_WITH_AS((void)import_trace_text("{\"foo\": 1}", "a.json"), doctest::Contains("not a Chrome trace"),
                         UserError);
    CHECK_THROWS_WITH_AS((void)import_trace_text("{\"traceEvents\": []}", "a.json"),
                         doctest::Contains("no GPU kernel events"), UserError);
    CHECK_THROWS_WITH_AS((void)import_trace_text(std::string("\x1f\x8b\x08\x00", 4), "a.json.gz"),
                         doctest::Contains("gzip"), UserError);
    CHECK_THROWS_AS((void)import_trace(kData + "missing.json"), UserError);
    // Wrong types everywhere: still no crash.
    const char* odd = R"({"traceEvents": [1, "x", null, {"cat": 5}, {"cat": "kernel", "dur": "abc"},
      {"cat": "kernel", "dur": 3, "name": "gemm", "args": {"External id": "q"}},
      {"cat": "cpu_op", "args": {"External id": 1, "Input Dims": [[-1, 2], "x", [1e300]]}, "name": "aten::mm"},
      {"cat": "kernel", "dur": 3, "name": "ncclKernel", "args": {"External id": 1, "Group size": -4}}]})";
    const auto imp = import_trace_text(odd, "odd.json");
    CHECK(imp.used == 0);
    // Every prefix of the recorded trace either imports or throws a UserError.
    const auto text = slurp(kData + "kineto_small.json");
    for (std::size_t n = 0; n < text.size(); n += 13) {
      try {
        (void)import_trace_text(std::string_view(text).substr(0, n), "prefix");
      } catch (const UserError&) {
      }
    }
    // Nsight Systems JSON lines: kernels are counted and classified, shapes are not available.
    const char* nsys = "{\"data\": [\"ncclDevKernel_AllReduce_Sum_bf16_RING_LL\", \"sm90_xmma_gemm\"]}\n"
                       "{\"Type\": 79, \"CudaEvent\": {\"startNs\": \"1000\", \"endNs\": \"5000\", \"kernel\": {\"shortName\": 0}}}\n"
                       "{\"Type\": 79, \"CudaEvent\": {\"startNs\": 6000, \"endNs\": 9000, \"kernel\": {\"shortName\": \"1\"}}}\n";
    const auto ns = import_trace_text(nsys, "report.json");
    CHECK(ns.kernels == 2);
    CHECK(ns.skipped.size() == 2);
    CHECK_THROWS_WITH_AS((void)import_trace_text("{\"a\": 1}\n{oops\n", "r.json"), doctest::Contains("r.json:2"),
                         UserError);
  }

  TEST_CASE("the replay sweep reproduces recorded rows") {
    const auto recorded = testing::make_synthetic();
    SweepPlan plan;
    for (const auto& r : recorded.gemm) plan.gemm.push_back({r.m, r.n, r.k});
    plan.attention = recorded.attention;
    plan.memory_bound = recorded.memory_bound;
    plan.collective_ops = {"all_reduce", "send_recv"};
    plan.collective_bytes = {8, 1 << 20};
    ReplayKernelTimer timer(recorded);
    ReplayCollectiveProbe probe(recorded);
    costmodel::Profile out;
    std::vector<std::string> notes;
    sweep_kernels(timer, plan, {}, out, [&notes](const std::string& s) { notes.push_back(s); });
    sweep_collectives(probe, plan, out);
    CHECK(notes.size() == 3);
    REQUIRE(out.gemm.size() == recorded.gemm.size());
    CHECK(out.gemm[5].seconds == recorded.gemm[5].seconds);
    CHECK(out.attention.size() == recorded.attention.size());
    // all_reduce over groups 8/8 and 16/8 (2 sizes each), send_recv over the 2/2 pair; the
    // 2/1 group recorded only all_gather, so it is skipped.
    CHECK(probe.groups().size() == 4);
    CHECK(out.collective.size() == 6);
    CHECK_THROWS_AS((void)probe.seconds("all_reduce", {3, 3}, 8), UserError);
    CHECK_THROWS_AS((void)timer.gemm_seconds({1, 2, 3}), UserError);
    CHECK(median({3, 1, 2}) == 2);
    CHECK(median({4, 1, 2, 3}) == 2.5);
  }
}

TEST_SUITE("calib") {
  TEST_CASE("the plan covers the layer op list for TP 1..8") {
    const auto plan = make_plan(PlanOptions{});
    auto has_gemm = [&plan](long long m, long long n, long long k) {
      return std::find(plan.gemm.begin(), plan.gemm.end(), GemmShape{m, n, k}) != plan.gemm.end();
    };
    // Llama-3.1-8B QKV forward at TP 1, 4096 tokens: M = 4096, N = (32 + 2*8)*128 = 6144, K = 4096
    // (Megatron layers.py); its wgrad at TP 8: M = 768, N = 4096, K = 4096.
    CHECK(has_gemm(4096, 6144, 4096));
    CHECK(has_gemm(768, 4096, 4096));
    CHECK(has_gemm(16384, 16384, 16384));
    CHECK(std::is_sorted(plan.gemm.begin(), plan.gemm.end()));
    bool gqa_tp8 = false, bwd = false;
    for (const auto& a : plan.attention) {
      if (a.heads == 4 && a.kv_heads == 1 && a.head_dim == 128) gqa_tp8 = true;  // 32/8 and 8/8 heads
      if (a.pass == costmodel::AttentionPass::bwd) bwd = true;
    }
    CHECK(gqa_tp8);
    CHECK(bwd);
    CHECK(plan.memory_bound.size() == 36);
    // 8 B .. 8 GiB by factors of 2: 2^3 .. 2^33, 31 sizes.
    REQUIRE(plan.collective_bytes.size() == 31);
    CHECK(plan.collective_bytes.front() == 8);
    CHECK(plan.collective_bytes.back() == 8.0 * (1LL << 30));
    PlanOptions quick;
    quick.quick = true;
    const auto q = make_plan(quick);
    CHECK(q.gemm.size() < plan.gemm.size());
    CHECK(q.collective_bytes.back() == 128.0 * (1 << 20));  // 8 * 4^12
    MESSAGE("plan: " << plan.gemm.size() << " GEMM shapes, " << plan.attention.size() << " attention calls; quick "
                     << q.gemm.size() << " and " << q.attention.size());
  }
}
