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

// ---- issue 34: .json.gz, linking on every Kineto version, dtypes, datasheet bounds ----------

#include <zlib.h>

#include "tetra/calib/bounded_fit.hpp"

namespace {

/// gzip of `text` (zlib deflate with a gzip wrapper, windowBits 16 + 15; zlib manual).
std::string gzip(const std::string& text) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&zs, static_cast<uLong>(text.size())) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

const std::string kTraces = std::string(TETRA_SOURCE_DIR) + "/tests/data/traces/";

const costmodel::GemmRow* find_gemm(const costmodel::Profile& p, long long m, long long n, long long k,
                                    const std::string& dtype) {
  for (const auto& r : p.gemm) {
    if (r.m == m && r.n == n && r.k == k && r.dtype == dtype) return &r;
  }
  return nullptr;
}

int count_dtype(const costmodel::Profile& p, const std::string& dtype) {
  return static_cast<int>(std::count_if(p.gemm.begin(), p.gemm.end(), [&](const auto& r) { return r.dtype == dtype; }));
}

/// Every row and every fitted value of a bounded profile within `dev`'s datasheet.
void check_within_datasheet(const BoundedFit& b, const DeviceSpec& dev) {
  const auto& p = b.profile;
  for (const auto& r : p.gemm) {
    const double peak = peak_flops(dev, r.dtype);
    CHECK(peak > 0);
    CHECK(2.0 * static_cast<double>(r.m) * static_cast<double>(r.n) * static_cast<double>(r.k) / r.seconds <= peak);
  }
  for (const auto& r : p.attention) CHECK(attention_flops(r) / r.seconds <= dev.bf16_flops);
  for (const auto& r : p.memory_bound) CHECK(r.bytes / r.seconds <= dev.hbm_Bps);
  for (const auto& r : p.collective) CHECK((dev.link_Bps == 0 || busbw_Bps(r) <= dev.link_Bps));
  CHECK(p.fit.gemm_peak_flops <= dev.bf16_flops);
  CHECK(p.fit.attention_fwd_flops <= dev.bf16_flops);
  CHECK(p.fit.attention_bwd_flops <= dev.bf16_flops);
  CHECK(p.fit.hbm_Bps <= dev.hbm_Bps);
  for (const auto& m : p.fit.memory_bound) CHECK(m.Bps <= dev.hbm_Bps);
  for (const auto& c : p.fit.collectives) CHECK(c.busbw_Bps <= dev.link_Bps);
  // A fitted table used at least its minimum of rows (BoundedFitOptions defaults).
  for (const auto& t : b.tables) {
    if (t.fitted) CHECK(t.fitted_rows >= 3);
  }
}

const TableReport& table(const BoundedFit& b, const std::string& name) {
  for (const auto& t : b.tables) {
    if (t.table == name) return t;
  }
  FAIL("no table " << name);
  return b.tables.front();
}

}  // namespace

TEST_SUITE("calib") {
  TEST_CASE("a real Nsight Systems export of an H200 imports as the Kineto trace of the same step does") {
    // calib/probes/kineto_trace.py ... nvtx on one H200 SXM under `nsys profile -s none -t cuda,nvtx
    // --capture-range=cudaProfilerApi`, exported with `nsys export --type=json`: the training
    // step of torch211_h100_kineto.json (two Llama-style blocks, 2048 tokens, cuDNN SDPA) with
    // emit_nvtx(record_shapes=True) ranges in place of torch.profiler. The string table's
    // environment blocks are emptied (calib/README.md).
    const auto nsys = import_trace(kData + "h200_torch211_nsys_nvtx.json.gz");
    const auto kineto = import_trace(kData + "torch211_h100_kineto.json");
    CHECK(nsys.kernels == 82);
    CHECK(nsys.linked_by_time == 82);  // every kernel's launch lies in an NVTX range of its thread
    // The op decides, as in Kineto: the same GEMM shapes and attention calls as the Kineto trace.
    REQUIRE(nsys.profile.gemm.size() == kineto.profile.gemm.size());
    for (std::size_t i = 0; i < nsys.profile.gemm.size(); ++i) {
      CHECK(nsys.profile.gemm[i].m == kineto.profile.gemm[i].m);
      CHECK(nsys.profile.gemm[i].n == kineto.profile.gemm[i].n);
      CHECK(nsys.profile.gemm[i].k == kineto.profile.gemm[i].k);
      CHECK(nsys.profile.gemm[i].dtype == "bf16");
    }
    const auto& a = nsys.profile.attention;
    REQUIRE(a.size() == 2);
    // Forward: one fprop kernel per block, 50.048 and 50.112 us. Backward: the five kernels of
    // each aten::_cudnn_attention_backward range summed, 9.504 + 135.583 + 8.704 + 4.416 + 4.512
    // = 162.719 and 9.344 + 136.383 + 9.312 + 4.384 + 4.576 = 163.999 us (by name alone the two
    // fmha_reduce_head kernels would be forward calls faster than the datasheet).
    CHECK(a[0].pass == costmodel::AttentionPass::fwd);
    CHECK(a[0].seconds == approx(50.080e-6));
    CHECK(a[1].pass == costmodel::AttentionPass::bwd);
    CHECK(a[1].seconds == approx(163.359e-6));
    // RMSNorm 2048 x 2048 in and out (16 MiB: 7.392, 5.664, 5.696, 5.696 us, median 5.696) and
    // residual adds of two 2048 x 2048 inputs and one output (24 MiB, median of seven 5.919 us),
    // taken as bf16; the fused AdamW's multi-tensor kernels and the .float() copy stay out.
    REQUIRE(nsys.profile.memory_bound.size() == 2);
    CHECK(nsys.profile.memory_bound[0].kernel == "residual_add");
    CHECK(nsys.profile.memory_bound[0].bytes == 25165824.0);
    CHECK(nsys.profile.memory_bound[0].seconds == approx(5.919e-6));
    CHECK(nsys.profile.memory_bound[1].kernel == "rmsnorm");
    CHECK(nsys.profile.memory_bound[1].bytes == 16777216.0);
    CHECK(nsys.profile.memory_bound[1].seconds == approx(5.696e-6));
    CHECK(nsys.assumed_bf16 == 24 + 4 + 7);  // the used GEMM, RMSNorm and residual-add kernels
    CHECK(nsys.skipped.at("multi-tensor kernel (one launch covers chunks of a tensor list): bytes unknown") == 5);
    const auto dev = find_device("h200");
    REQUIRE(dev.has_value());
    check_within_datasheet(fit_bounded(nsys.profile, *dev), *dev);
  }

  TEST_CASE("a .json.gz trace reads directly: fp32, split-K, FP8 and batched GEMMs of an H200 (torch 2.11)") {
    // calib/probes/kineto_trace_variants.py on one H200, written by TensorBoard's handler.
    const auto imp = import_trace(kData + "h200_torch211_kineto_variants.pt.trace.json.gz");
    CHECK(imp.kernels == 45);
    CHECK(imp.linked_by_external_id == 45);
    const auto& p = imp.profile;
    CHECK(p.meta.gpu == "NVIDIA H200");
    CHECK(p.meta.sms == 132);
    CHECK(p.meta.device_memory_bytes == 150109880320.0);
    REQUIRE(p.gemm.size() == 7);
    CHECK(count_dtype(p, "bf16") == 4);
    CHECK(count_dtype(p, "fp32") == 2);
    CHECK(count_dtype(p, "fp8_e4m3") == 1);
    // aten::mm fp32 [1024, 2048] x [2048, 1024] with TF32 off: cutlass_80_simt_sgemm 87.999 us
    // plus cuBLASLt's splitKreduce_kernel 4.992 us, one call of 92.991 us.
    const auto* simt = find_gemm(p, 1024, 1024, 2048, "fp32");
    REQUIRE(simt != nullptr);
    CHECK(simt->seconds == approx(92.991e-6));
    // aten::addmm (bias [1024], [2048, 1024] x [1024, 1024]) fp32: sm80_xmma ffma 103.583 us.
    const auto* addmm = find_gemm(p, 2048, 1024, 1024, "fp32");
    REQUIRE(addmm != nullptr);
    CHECK(addmm->seconds == approx(103.583e-6));
    // torch._scaled_mm of c10::Float8_e4m3fn operands: an fp8_e4m3 row, 7.104 us.
    const auto* fp8 = find_gemm(p, 2048, 1024, 1024, "fp8_e4m3");
    REQUIRE(fp8 != nullptr);
    CHECK(fp8->seconds == approx(7.104e-6));
    // Six bmm kernels ([4, 512, 512] x [4, 512, 1024] ...) are batched, not one 2048-row GEMM.
    CHECK(imp.skipped.at("batched GEMM op (aten::bmm, baddbmm, grouped): no batch column in [[gemm]]") == 6);
    CHECK(find_gemm(p, 2048, 1024, 512, "bf16") == nullptr);
    // The plain SiLU of the MLP is not a SwiGLU.
    CHECK(imp.skipped.at("plain SiLU (aten::silu), not SwiGLU: not modelled") == 1);
    CHECK(std::none_of(p.memory_bound.begin(), p.memory_bound.end(), [](const auto& r) { return r.kernel == "swiglu"; }));
    // The fp8 cast (aten::copy_ into Float8_e4m3fn from bf16, [2048, 1024]): 2,097,152 x (1 + 2) bytes.
    CHECK(std::any_of(p.memory_bound.begin(), p.memory_bound.end(),
                      [](const auto& r) { return r.kernel == "copy" && r.bytes == 2097152.0 * 3; }));
    // Rates within the H200 datasheet: fp8 2 * 2048 * 1024^2 / 7.104 us = 604.6 TFLOP/s <= 1,979;
    // fp32 2 * 2048 * 1024^2 / 103.583 us = 41.5 TFLOP/s <= 67.
    const auto dev = find_device(p.meta.gpu);
    REQUIRE(dev.has_value());
    CHECK(dev->key == "h200");
    const auto b = fit_bounded(p, *dev);
    CHECK(b.profile.gemm.size() == 7);
    check_within_datasheet(b, *dev);
    // The same bytes read as plain text import the same rows.
    const auto gz = slurp(kData + "h200_torch211_kineto_variants.pt.trace.json.gz");
    const auto plain = import_trace_text(gunzip_bounded(gz, "t.gz", std::size_t{64} << 20), "t.json");
    CHECK(plain.profile.gemm.size() == 7);
    CHECK(plain.used == imp.used);
  }

  TEST_CASE("gzip input is bounded, and a gzip that is not a trace is one line naming the file") {
    const std::string trace = slurp(kData + "kineto_small.json");
    const auto gz = gzip(trace);
    CHECK(import_trace_text(gz, "k.json.gz").kernels == 10);
    // Two concatenated members are one stream (gzip(1): "multiple compressed files").
    const auto half = trace.size() / 2;
    const auto two = gzip(trace.substr(0, half)) + gzip(trace.substr(half));
    CHECK(import_trace_text(two, "k2.json.gz").kernels == 10);
    CHECK_THROWS_WITH_AS((void)import_trace_text(gzip("hello, not json"), "a.json.gz"),
                         doctest::Contains("a.json.gz: the decompressed trace is not valid JSON"), UserError);
    CHECK_THROWS_WITH_AS((void)import_trace_text(gzip(""), "e.json.gz"),
                         doctest::Contains("e.json.gz: the decompressed trace is empty"), UserError);
    CHECK_THROWS_WITH_AS((void)import_trace_text(gz.substr(0, gz.size() / 2), "t.json.gz"),
                         doctest::Contains("t.json.gz: the gzip stream is truncated"), UserError);
    auto corrupt = gz;
    corrupt[3] = static_cast<char>(0xff);  // reserved FLG bits (RFC 1952 2.3.1)
    CHECK_THROWS_WITH_AS((void)import_trace_text(corrupt, "c.json.gz"),
                         doctest::Contains("c.json.gz: not a valid gzip stream"), UserError);
    CHECK_THROWS_WITH_AS((void)import_trace_text(gz + "junk", "j.json.gz"),
                         doctest::Contains("trailing bytes after the gzip stream"), UserError);
    // A bomb: 64 MiB of spaces deflate to about 64 KiB; the limit stops inflating at 1 MiB
    // whatever the gzip trailer's size field says.
    const auto bomb = gzip(std::string(std::size_t{64} << 20, ' '));
    CHECK(bomb.size() < 200000);
    TraceImportOptions small;
    small.max_bytes = std::size_t{1} << 20;
    CHECK_THROWS_WITH_AS((void)import_trace_text(bomb, "bomb.json.gz", small),
                         doctest::Contains("bomb.json.gz: the trace decompresses to more than 1 MiB, the import limit"),
                         UserError);
    // Every prefix of a gzip stream imports or throws a UserError.
    for (std::size_t n = 0; n < gz.size(); n += 97) {
      try {
        (void)import_trace_text(std::string_view(gz).substr(0, n), "prefix.gz");
      } catch (const UserError& e) {
        CHECK(std::string(e.what()).find('\n') == std::string::npos);
      }
    }
  }

  TEST_CASE("kernels link to the op enclosing their launch when External id does not name it") {
    // Kineto before PyTorch 2.0 wrote the correlation id as a kernel's External id. HTA's rule
    // (hta/common/call_stack.py): kernel -> launch call with its correlation id -> innermost
    // cpu_op whose [ts, ts + dur] holds the launch on the launching thread.
    const std::string trace = R"json({"deviceProperties": [{"name": "NVIDIA H100 80GB HBM3", "numSms": 132}],
     "traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 0, "dur": 100,
       "args": {"External id": 1, "Input Dims": [[8, 64], [32, 64], [32]], "Input type": ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16"]}},
      {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 10, "dur": 40,
       "args": {"External id": 2, "Input Dims": [[32], [8, 64], [64, 32]], "Input type": ["float", "float", "float"]}},
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 0, "dur": 100,
       "args": {"External id": 5, "Input Dims": [[16, 16], [16, 16]], "Input type": ["c10::Half", "c10::Half"]}},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 20, "dur": 3, "args": {"correlation": 900}},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 70, "dur": 3, "args": {"correlation": 901}},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 75, "dur": 3, "args": {"correlation": 902}},
      {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_32x128_tn", "pid": 0, "tid": 7, "ts": 200, "dur": 5,
       "args": {"External id": 900, "correlation": 900}},
      {"ph": "X", "cat": "kernel", "name": "ampere_bf16_s16816gemm_bf16_64x64_nn", "pid": 0, "tid": 7, "ts": 300, "dur": 4,
       "args": {"External id": 901, "correlation": 901}},
      {"ph": "X", "cat": "kernel", "name": "ampere_bf16_s16816gemm_bf16_64x64_nn", "pid": 0, "tid": 7, "ts": 400, "dur": 6,
       "args": {"External id": 5, "correlation": 902}}]})json";
    const auto imp = import_trace_text(trace, "old.json");
    // 900 and 901 name no op; 5 names tid 2's aten::mm, which does not enclose the launch at
    // ts 75 on tid 1: all three go by time.
    CHECK(imp.linked_by_external_id == 0);
    CHECK(imp.linked_by_time == 3);
    REQUIRE(imp.profile.gemm.size() == 2);
    // Launch at ts 20: innermost is aten::addmm [10, 50] (fp32 inputs): M 8, N 32, K 64.
    const auto* fp32 = find_gemm(imp.profile, 8, 32, 64, "fp32");
    REQUIRE(fp32 != nullptr);
    CHECK(fp32->seconds == approx(5e-6));
    // Launches at ts 70 and 75: only aten::linear [0, 100] encloses them: [8, 64] x [32, 64]^T
    // bf16, two calls of 4 and 6 us -> median 5 us.
    const auto* bf16 = find_gemm(imp.profile, 8, 32, 64, "bf16");
    REQUIRE(bf16 != nullptr);
    CHECK(bf16->seconds == approx(5e-6));
    CHECK(find_gemm(imp.profile, 16, 16, 16, "fp16") == nullptr);
    // With External id naming the enclosing op, that link is used.
    std::string modern = trace;
    const std::string old_ext = R"("External id": 900, "correlation": 900)";
    modern.replace(modern.find(old_ext), old_ext.size(), R"("External id": 2, "correlation": 900)");
    const auto m = import_trace_text(modern, "new.json");
    CHECK(m.linked_by_external_id == 1);
    CHECK(m.linked_by_time == 2);
  }

  TEST_CASE("the op classifies a kernel before its name does") {
    const std::string trace = R"json({"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "fbgemm::FloatToFP8RowwiseQuantized", "pid": 1, "tid": 1, "ts": 0, "dur": 10,
       "args": {"External id": 1, "Input Dims": [[4096, 4096]], "Input type": ["float"]}},
      {"ph": "X", "cat": "kernel", "name": "void fbgemm_gpu::_float_to_FP8rowwise_cuda_kernel<float>(...)", "ts": 20, "dur": 30,
       "args": {"External id": 1}},
      {"ph": "X", "cat": "cpu_op", "name": "aten::cudnn_convolution", "pid": 1, "tid": 1, "ts": 100, "dur": 10,
       "args": {"External id": 2, "Input Dims": [[32, 3, 224, 224], [768, 3, 16, 16]], "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
      {"ph": "X", "cat": "kernel", "name": "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nchw", "ts": 120, "dur": 30,
       "args": {"External id": 2}},
      {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 1, "tid": 1, "ts": 200, "dur": 10,
       "args": {"External id": 3, "Input Dims": [[1024, 1024], [1024, 1024], []], "Input type": ["c10::Float8_e5m2", "float", "Scalar"]}},
      {"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4, float8_copy_kernel>", "ts": 220, "dur": 2,
       "args": {"External id": 3}}]})json";
    const auto imp = import_trace_text(trace, "ops.json");
    CHECK(imp.profile.gemm.empty());
    CHECK(imp.skipped.at("GEMM-named kernel under a non-GEMM op (fbgemm::FloatToFP8RowwiseQuantized)") == 1);
    CHECK(imp.skipped.at("GEMM-named kernel under a non-GEMM op (aten::cudnn_convolution)") == 1);
    // A cast from fp32 into float8_e5m2 moves 4 + 1 bytes an element ("float8" is not "float").
    REQUIRE(imp.profile.memory_bound.size() == 1);
    CHECK(imp.profile.memory_bound[0].bytes == 1048576.0 * 5);
  }

  TEST_CASE("datasheets: names as drivers report them, peaks per dtype") {
    // A100-PG509-200 with 42.3 GB is the 40 GB part (A100 datasheet: 1,555 GB/s).
    const auto a100 = find_device("NVIDIA A100-PG509-200", 42297524224.0);
    REQUIRE(a100.has_value());
    CHECK(a100->key == "a100-sxm-40gb");
    CHECK(a100->hbm_Bps == 1555e9);
    CHECK(find_device("NVIDIA A100-SXM4-80GB")->hbm_Bps == 2039e9);
    CHECK(find_device("Tesla V100-SXM2-32GB")->key == "v100-sxm2");
    CHECK(find_device("NVIDIA H100 80GB HBM3")->key == "h100-sxm");
    CHECK(find_device("NVIDIA H100 PCIe")->key == "h100-pcie");
    CHECK(find_device("NVIDIA B200")->bf16_flops == 2250e12);
    CHECK(find_device("AMD Instinct MI300X VF")->key == "mi300x");
    CHECK_FALSE(find_device("AMD Radeon Graphics").has_value());
    const auto h100 = *find_device("h100-sxm");
    CHECK(peak_flops(h100, "bf16") == 989.5e12);
    CHECK(peak_flops(h100, "fp8_e4m3") == 1979e12);
    CHECK(peak_flops(h100, "fp32") == 494.5e12);  // bounded by TF32: the kernel may use it
    CHECK(peak_flops(*a100, "fp8_e4m3") == 0);    // no FP8 on Ampere
    CHECK(same_device("NVIDIA H100 80GB HBM3", "h100-sxm"));
    CHECK_FALSE(same_device("NVIDIA H100 80GB HBM3", "NVIDIA H200"));
  }

  TEST_CASE("bounded fit: rows beyond the datasheet and one-row tables never reach the profile's fit") {
    const auto dev = *find_device("h100-sxm");  // 989.5 TFLOP/s bf16, 3.35 TB/s, L2 50 MiB, 450 GB/s
    costmodel::Profile p;
    p.meta.gpu = "NVIDIA H100 80GB HBM3";
    // GEMM: 4096^3 = 1.374e11 FLOP. At 100 us that is 1,374 TFLOP/s > 989.5: dropped. Six
    // compute-bound rows at 700 TFLOP/s with a 5 us launch fit back to about 700.
    p.gemm.push_back({4096, 4096, 4096, "bf16", 100e-6});
    for (long long k : {1024, 2048, 4096, 8192, 12288, 16384}) {
      const double flops = 2.0 * 8192 * 8192 * static_cast<double>(k);
      p.gemm.push_back({8192, 8192, k, "bf16", 5e-6 + flops / 700e12});
    }
    p.gemm.push_back({1024, 1024, 1024, "fp32", 1e-4});  // 21.5 TFLOP/s: kept, not in the bf16 fit
    // Memory: 1 GiB moved in 200 us = 5.37 TB/s > 3.35: ran from cache, dropped. A 100-byte copy
    // at 71 MB/s (1.408 us) is in L2: kept, left out of the fit. Three rows above 2 x L2 at
    // 2.5 TB/s plus 4 us fit back to 2.5 TB/s.
    p.memory_bound.push_back({"copy", 1073741824.0, 200e-6});
    p.memory_bound.push_back({"copy", 100.0, 1.408e-6});
    for (double bytes : {256.0 * 1048576, 512.0 * 1048576, 1024.0 * 1048576}) {
      p.memory_bound.push_back({"copy", bytes, 4e-6 + bytes / 2.5e12});
    }
    // Attention: one forward row of 141 tokens (issue 34's 2.2 TFLOP/s) is below the minimum.
    costmodel::AttentionRow a;
    a.seq = 141;
    a.heads = 32;
    a.kv_heads = 8;
    a.head_dim = 128;
    a.seconds = attention_flops(a) / 2.2e12;
    p.attention.push_back(a);
    // Collective: all_reduce of 1 GiB over 8 ranks in 1 ms: busbw 1.074e12 x 2 x 7/8 = 1.88
    // TB/s > 450 GB/s: dropped. One all_gather row at 16 GB/s: kept, not fitted.
    p.collective.push_back({"all_reduce", 8, 8, 1073741824.0, 1e-3, "", ""});
    p.collective.push_back({"all_gather", 8, 8, 16e6, 1e-3 * 8.0 / 7.0, "", ""});
    const auto b = fit_bounded(p, dev);
    check_within_datasheet(b, dev);
    const auto& gemm = table(b, "gemm");
    CHECK(gemm.rows == 8);
    CHECK(gemm.kept == 7);
    CHECK(gemm.dropped.at("faster than the bf16 datasheet peak") == 1);
    CHECK(gemm.unfitted.at("dtype fp32 (the fit is of bf16 / fp16)") == 1);
    CHECK(gemm.fitted);
    // 8192 x 8192 in 128 x 128 tiles is 4,096 tiles, 31.03 waves of 132 SMs, counted as 32: the
    // wave model's peak is 700 x 32 x 132 / 4096 = 721.875 TFLOP/s.
    CHECK(b.profile.fit.gemm_peak_flops == approx(721.875e12).epsilon(1e-6));
    const auto& mem = table(b, "memory_bound");
    CHECK(mem.dropped.at("faster than the datasheet HBM bandwidth (ran from cache)") == 1);
    CHECK(mem.unfitted.at("moves no more than 2 x L2 (runs from cache)") == 1);
    CHECK(mem.fitted_rows == 3);
    CHECK(b.profile.fit.hbm_Bps == approx(2.5e12).epsilon(1e-6));
    CHECK(b.profile.fit.kernel_launch_s == approx(4e-6).epsilon(1e-4));
    // One-row tables: the fit stays 0 (the cost model then takes the built-in value).
    CHECK(b.profile.fit.attention_fwd_flops == 0);
    CHECK_FALSE(table(b, "attention").fitted);
    CHECK(table(b, "collective").dropped.at("bus bandwidth above the datasheet link bandwidth") == 1);
    CHECK(b.profile.collective.size() == 1);
    CHECK(b.profile.fit.collectives.empty());
    CHECK(describe_reports(b.tables).find("all_gather ranks=8: 1 rows, fewer than 3: built-in kept") != std::string::npos);
  }

  TEST_CASE("bounded fit: a GEMM fit above the datasheet keeps the built-in and the other tables still fit") {
    // 1024 x 1024 GEMMs are 64 tiles of 128 x 128 on 132 SMs: the wave model counts 132 tiles of
    // work per wave, so at an achieved 500 TFLOP/s the fitted peak is 500 x 132 / 64 = 1,031
    // TFLOP/s > 989.5: not physical, the built-in rate is kept. (Compute-bound: 4 K MiB of
    // operands at 3.35 TB/s take 1.25 K ns, under half of 2 x 1024^2 x K / 500e12 = 4.2 K ns.)
    const auto dev = *find_device("h100-sxm");
    costmodel::Profile p;
    for (long long k : {1024, 2048, 4096, 8192, 16384, 32768}) {
      p.gemm.push_back({1024, 1024, k, "bf16", 2.0 * 1024 * 1024 * static_cast<double>(k) / 500e12});
    }
    for (double bytes : {256.0 * 1048576, 512.0 * 1048576, 1024.0 * 1048576}) {
      p.memory_bound.push_back({"rmsnorm", bytes, bytes / 3e12});
    }
    const auto b = fit_bounded(p, dev);
    INFO(describe_reports(b.tables));
    CHECK_FALSE(table(b, "gemm").fitted);
    CHECK(b.profile.fit.gemm_peak_flops == 0);
    CHECK(table(b, "gemm").notes.back().find("fit gives 1031.2 TFLOP/s, outside (0, 989.5] of the bf16 datasheet: built-in kept") !=
          std::string::npos);
    CHECK(table(b, "memory_bound").fitted);
    CHECK(b.profile.fit.hbm_Bps == approx(3e12).epsilon(1e-6));
    REQUIRE(b.profile.fit.memory_bound.size() == 1);
    CHECK(b.profile.fit.memory_bound[0].kernel == "rmsnorm");
  }

  TEST_CASE("public traces: HolisticTraceAnalysis and TraceLens (tests/data/traces/README.md)") {
    struct Case {
      const char* file;
      const char* gpu;  // --gpu where the trace names none with a datasheet
      int kernels, gemm, attention, memory, collective;
    };
    const Case cases[] = {
        {"hta/sampled_rank-0.json.gz", "a100-sxm-80gb", 1154, 147, 0, 29, 1},  // all-gather: c10d op dims
        {"hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz", "mi250", 14, 2, 0, 2, 0},
        {"tracelens/h100_bert-small.json.gz", "", 60, 4, 1, 1, 0},
        {"tracelens/mi300_bert-small.json.gz", "", 60, 4, 1, 2, 0},
        {"tracelens/mi300x_torch_compile_triton.json.gz", "", 12, 3, 1, 0, 0},
        {"tracelens/h100_nsfw_image_detection.json.gz", "", 154, 4, 1, 1, 0},
    };
    for (const auto& c : cases) {
      CAPTURE(c.file);
      const auto imp = import_trace(kTraces + c.file);
      CHECK(imp.kernels == c.kernels);
      const auto dev = find_device(*c.gpu != '\0' ? c.gpu : imp.profile.meta.gpu, imp.profile.meta.device_memory_bytes);
      REQUIRE(dev.has_value());
      const auto b = fit_bounded(imp.profile, *dev);
      CHECK(b.profile.gemm.size() == static_cast<std::size_t>(c.gemm));
      CHECK(b.profile.attention.size() == static_cast<std::size_t>(c.attention));
      CHECK(b.profile.memory_bound.size() == static_cast<std::size_t>(c.memory));
      CHECK(b.profile.collective.size() == static_cast<std::size_t>(c.collective));
      check_within_datasheet(b, *dev);
      MESSAGE(std::string(c.file) << " (" << dev->key << "): " << imp.kernels << " kernels, " << imp.used << " used, linked by id "
                     << imp.linked_by_external_id << " / by time " << imp.linked_by_time << ", GEMM kernels "
                     << imp.gemm_kernels_used << " of " << imp.gemm_kernels << "\n"
                     << describe_reports(b.tables));
    }
  }

  TEST_CASE("old Kineto (HTA sampled_rank-0): GEMM kernels link by time, fbgemm kernels are not GEMMs") {
    const auto imp = import_trace(kTraces + "hta/sampled_rank-0.json.gz");
    // External ids there are correlation ids: no kernel links by id, 1,138 of 1,154 by time.
    CHECK(imp.linked_by_external_id == 0);
    CHECK(imp.linked_by_time == 1138);
    // 432 kernels are named like GEMMs; 46 of them run under fbgemm / embedding ops and are
    // not; of the 386 under GEMM ops, 40 are aten::bmm (batched) and 346 make rows: 89.6 %.
    CHECK(imp.gemm_kernels == 386);
    CHECK(imp.gemm_kernels_used == 346);
    CHECK(imp.gemm_kernels_used >= 0.8 * imp.gemm_kernels);
    int fbgemm = 0;
    for (const auto& [why, n] : imp.skipped) {
      if (why.rfind("GEMM-named kernel under a non-GEMM op", 0) == 0) fbgemm += n;
    }
    CHECK(fbgemm == 46);
    CHECK(count_dtype(imp.profile, "fp32") == 147);  // ampere_sgemm: fp32 inputs
    // Its HBM fit (copies above 2 x 40 MiB of L2) is within the A100 80GB's 2,039 GB/s.
    const auto b = fit_bounded(imp.profile, *find_device("a100-sxm-80gb"));
    CHECK(table(b, "memory_bound").fitted);
    CHECK(b.profile.fit.hbm_Bps > 1.0e12);
    CHECK(b.profile.fit.hbm_Bps <= 2039e9);
  }
}

// ---- issue 34: collectives from the traces of several ranks -----------------------------------

#include "rank_traces.hpp"
#include "tetra/calib/rank_merge.hpp"

namespace {

using testing::RankTraceSpec;
using testing::rank_spec;
using testing::rank_trace_json;

MergedTraceImport merge_specs(const std::vector<RankTraceSpec>& specs) {
  std::vector<std::pair<std::string, std::string>> texts;
  for (const auto& s : specs) texts.emplace_back("rank" + std::to_string(s.rank) + ".json", rank_trace_json(s));
  return import_rank_trace_texts(texts);
}

/// The fitted all_reduce line of a bounded fit; nullptr when none.
const costmodel::CollectiveFit* all_reduce_fit(const BoundedFit& b) {
  for (const auto& c : b.profile.fit.collectives) {
    if (c.op == "all_reduce") return &c;
  }
  return nullptr;
}

}  // namespace

TEST_SUITE("calib") {
  TEST_CASE("ranks merged: each all-reduce of a synthetic pair is timed from its last arriving rank") {
    // tests/calib/rank_traces.hpp: rank 1's clock 1000 us ahead; transfers 120, 420, 1620 us.
    std::vector<RankTraceSpec> specs = {rank_spec(0), rank_spec(1)};
    SUBCASE("ranks from distributedInfo") {}
    SUBCASE("given in the other order") { std::swap(specs[0], specs[1]); }
    SUBCASE("ranks from the order given") {
      for (auto& s : specs) s.distributed_info = false;
    }
    const auto m = merge_specs(specs);
    REQUIRE(m.merge.traces.size() == 2);
    CHECK(m.merge.traces[0].rank == 0);
    CHECK(m.merge.traces[1].rank == 1);
    // Every pair overlaps for offsets in (880, 1122) us; their ends differ by 1000 us (1002 for
    // instance 4): the median, 1000.
    CHECK(m.merge.traces[1].clock_offset_us == approx(1000.0));
    REQUIRE(m.merge.instances.size() == 6);
    // In the order they ended: the table's instances 1 to 6.
    const double want_s[] = {120e-6, 420e-6, 1620e-6, 120e-6, 420e-6, 1620e-6};
    const int want_last[] = {1, 0, 1, 0, 1, 0};
    for (std::size_t i = 0; i < 6; ++i) {
      const auto& c = m.merge.instances[i];
      CAPTURE(i);
      CHECK(c.op == "all_reduce");
      CHECK(c.ranks == 2);
      CHECK(c.seconds == approx(want_s[i]).epsilon(1e-9));
      CHECK(c.last_rank == want_last[i]);
      CHECK(c.end_us == approx(10000.0 * static_cast<double>(i + 1)));
      for (double own : c.own_seconds) CHECK(c.seconds <= own);
    }
    CHECK(m.merge.instances_with_rows == 6);
    CHECK(m.merge.instances_whole_group == 6);
    CHECK(m.merge.median_end_spread_s == approx(0.0));
    CHECK(m.import.used == 12);
    const auto& p = m.import.profile;
    REQUIRE(p.collective.size() == 3);
    CHECK(p.collective[0].bytes == 10e6);
    CHECK(p.collective[0].seconds == approx(120e-6).epsilon(1e-9));
    CHECK(p.collective[2].seconds == approx(1620e-6).epsilon(1e-9));
    // The fit recovers the transfer model: 20 us + bytes / 100 GB/s.
    const auto dev = *find_device(p.meta.gpu);
    const auto b = fit_bounded(p, dev);
    check_within_datasheet(b, dev);
    const auto* fit = all_reduce_fit(b);
    REQUIRE(fit != nullptr);
    CHECK(fit->latency_s == approx(20e-6).epsilon(1e-6));
    CHECK(fit->busbw_Bps == approx(100e9).epsilon(1e-6));
  }

  TEST_CASE("ranks merged: one rank's kernel times hold the wait, the merged times do not") {
    const auto one = import_trace_text(rank_trace_json(rank_spec(0)), "rank0.json");
    const auto dev = *find_device(one.profile.meta.gpu);
    const auto alone = fit_bounded(one.profile, dev);
    const auto merged = fit_bounded(merge_specs({rank_spec(0), rank_spec(1)}).import.profile, dev);
    const auto* a = all_reduce_fit(alone);
    const auto* m = all_reduce_fit(merged);
    REQUIRE(a != nullptr);
    REQUIRE(m != nullptr);
    // Rank 0 alone: medians 270, 820, 2620 us for 10, 40, 160 MB (its waits are in them).
    REQUIRE(one.profile.collective.size() == 3);
    CHECK(one.profile.collective[0].seconds == approx(270e-6));
    CHECK(one.profile.collective[1].seconds == approx(820e-6));
    CHECK(one.profile.collective[2].seconds == approx(2620e-6));
    MESSAGE("all_reduce, 2 ranks: rank 0 alone latency " << a->latency_s * 1e6 << " us, busbw " << a->busbw_Bps / 1e9
                                                         << " GB/s; merged latency " << m->latency_s * 1e6
                                                         << " us, busbw " << m->busbw_Bps / 1e9 << " GB/s");
    CHECK(a->latency_s > 5 * m->latency_s);
    CHECK(a->busbw_Bps < m->busbw_Bps);
  }

  TEST_CASE("ranks merged: three traces, the third aligned against its own clock") {
    // A third rank that arrives with rank 1 on a clock 1500 us ahead of rank 0's: the same
    // six instances, each from three kernels, the same times.
    std::vector<RankTraceSpec> specs = {rank_spec(0), rank_spec(1), rank_spec(2)};
    for (auto& s : specs) s.world_size = 3;
    specs[2].timing_of = 1;
    specs[2].clock_shift_us = 500;
    const auto m = merge_specs(specs);
    REQUIRE(m.merge.traces.size() == 3);
    CHECK(m.merge.traces[1].clock_offset_us == approx(1000.0));
    CHECK(m.merge.traces[2].clock_offset_us == approx(1500.0));
    REQUIRE(m.merge.instances.size() == 6);
    for (const auto& c : m.merge.instances) CHECK(c.traced_ranks == std::vector<int>{0, 1, 2});
    CHECK(m.merge.instances[0].seconds == approx(120e-6).epsilon(1e-9));
    CHECK(m.merge.instances[2].seconds == approx(1620e-6).epsilon(1e-9));
    CHECK(m.import.used == 18);
  }

  TEST_CASE("ranks merged: a kernel one trace lacks leaves the others matched") {
    // Rank 1's trace starts after instance 1: its 10 MB kinds hold instance 4 only. The n-th
    // pair (1, 4) overlaps for no offset near the others; in order, 1 has no partner and 4 pairs.
    RankTraceSpec late = rank_spec(1);
    late.drop = {1};
    const auto m = merge_specs({rank_spec(0), late});
    CHECK(m.merge.traces[1].clock_offset_us == approx(1000.0));
    CHECK(m.merge.instances.size() == 5);
    CHECK(m.import.skipped.at("NCCL kernel with no overlapping kernel of its kind on every trace holding it") == 1);
    CHECK(m.import.profile.collective[0].seconds == approx(120e-6).epsilon(1e-9));
  }

  TEST_CASE("ranks merged: traces not of one run are refused on one line naming the trace") {
    auto refused = [](const std::vector<RankTraceSpec>& specs, const std::string& file, const std::string& why) {
      const std::string line = file + ": " + why;
      CAPTURE(line);
      CHECK_THROWS_WITH_AS((void)merge_specs(specs), doctest::Contains(line.c_str()), UserError);
    };
    RankTraceSpec four = rank_spec(1);
    four.world_size = 4;
    refused({rank_spec(0), four}, "rank1.json",
            "world size 4 (distributedInfo), but rank0.json has 2: not the same run");
    refused({rank_spec(0), rank_spec(0)}, "rank0.json", "rank 0 again (rank0.json is that rank too)");
    RankTraceSpec a100 = rank_spec(1);
    a100.gpu = "NVIDIA A100-SXM4-80GB";
    refused({rank_spec(0), a100}, "rank1.json",
            "recorded on NVIDIA A100-SXM4-80GB, but rank0.json on NVIDIA H100 80GB HBM3");
    RankTraceSpec quiet = rank_spec(1);
    quiet.collectives = false;
    refused({rank_spec(0), quiet}, "rank1.json", "no NCCL collective kernel (send / recv aside)");
    RankTraceSpec other_group = rank_spec(1);
    other_group.group = "7";
    refused({rank_spec(0), other_group}, "rank1.json",
            "none of its 6 NCCL kernels is of a kind (op, group, size) another trace holds: its clock "
            "cannot be aligned");
    RankTraceSpec beyond = rank_spec(2);
    refused({rank_spec(0), beyond}, "rank2.json", "rank 2 (distributedInfo) is outside world size 2");
  }

  TEST_CASE("ranks merged: HolisticTraceAnalysis's two ranks of one run (sampled_rank-0 and -1)") {
    // Both traces are samples of one step of a 128-rank job (distributedInfo), 10 NCCL kernels
    // each, every one named ncclKernel_SendRecv: the c10d op above each says what it is. By
    // hand (tests/data/traces/README.md): all-to-all of unsigned char 2 + 2, of long 1 + 1, of
    // int 1 + 1; all-reduce 4 + 4; all-gather of 1 GiB over 64 ranks 2 + 2. Once aligned (offset
    // 0: the two ranks share a host clock), 5 instances overlap on both ranks: one all-to-all,
    // the first and last all-reduce and both all-gathers. The other kernels of rank 0 and rank 1
    // are different instances the sampling kept on one rank only (hundreds of ms apart).
    const auto m = import_rank_traces({kTraces + "hta/sampled_rank-0.json.gz", kTraces + "hta/sampled_rank-1.json.gz"});
    REQUIRE(m.merge.traces.size() == 2);
    CHECK(m.merge.world_size == 128);
    CHECK(m.merge.traces[0].rank_from_trace);
    CHECK(m.merge.traces[1].rank == 1);
    CHECK(m.merge.traces[0].nccl_kernels == 10);
    CHECK(m.merge.traces[1].nccl_kernels == 10);
    CHECK(m.merge.traces[1].clock_offset_us == approx(0.0));
    REQUIRE(m.merge.instances.size() == 5);
    CHECK(m.import.skipped.at("NCCL kernel with no overlapping kernel of its kind on every trace holding it") == 10);
    int all_gather = 0, all_reduce = 0, all_to_all = 0;
    for (const auto& c : m.merge.instances) {
      CAPTURE(c.op);
      REQUIRE(c.own_seconds.size() == 2);
      for (double own : c.own_seconds) CHECK(c.seconds <= own);
      CHECK(c.seconds > 0);
      all_gather += c.op == "all_gather";
      all_reduce += c.op == "all_reduce";
      all_to_all += c.op == "all_to_all";
    }
    CHECK(all_gather == 2);
    CHECK(all_reduce == 2);
    CHECK(all_to_all == 1);
    // Only the all-gathers have sizes (c10d::_allgather_base_: 16 MiB in, 1 GiB out, 64 ranks):
    // 42.412 and 62.163 ms from the last arrival (rank 0 alone: 42.496 and 63.644 ms).
    CHECK(m.merge.instances_with_rows == 2);
    const auto& p = m.import.profile;
    REQUIRE(p.collective.size() == 1);
    CHECK(p.collective[0].op == "all_gather");
    CHECK(p.collective[0].ranks == 64);
    CHECK(p.collective[0].ranks_per_node == 64);  // no deviceProperties, no --ranks-per-node
    CHECK(p.collective[0].bytes == 1073741824.0);
    CHECK(p.collective[0].seconds == approx(0.5 * (42412e-6 + 62163e-6)).epsilon(1e-9));
    const auto one = import_trace(kTraces + "hta/sampled_rank-0.json.gz");
    REQUIRE(one.profile.collective.size() == 1);
    CHECK(one.profile.collective[0].seconds == approx(0.5 * (42496e-6 + 63644e-6)).epsilon(1e-9));
    // Within the A100's bounds; one size is not a line: the built-in curve is kept.
    const auto dev = *find_device("a100-sxm-80gb");
    BoundedFitOptions opt;
    opt.merged_ranks = 2;
    const auto b = fit_bounded(p, dev, opt);
    check_within_datasheet(b, dev);
    CHECK(b.profile.collective.size() == 1);
    CHECK_FALSE(table(b, "collective").fitted);
    // The GEMM and memory rows pool both ranks.
    CHECK(m.import.kernels == 1154 + 1104);
    TraceImportOptions per_node;
    per_node.ranks_per_node = 8;
    const auto m8 = import_rank_traces({kTraces + "hta/sampled_rank-0.json.gz", kTraces + "hta/sampled_rank-1.json.gz"},
                                       per_node);
    CHECK(m8.import.profile.collective[0].ranks_per_node == 8);
    CHECK(m8.import.ranks_per_node_from == "--ranks-per-node");
  }
}
