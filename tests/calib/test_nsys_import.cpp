// Nsight Systems JSON export with PyTorch NVTX ranges (trace_import.hpp).
//
// tests/data/calib/nsys_nvtx_small.json is hand-built, one JSON object per line, in the layout
// of `nsys export --type json --line-by-line` (events, then `{"type": "String"}` records):
//   - NVTX push/pop ranges `{"Type": 59, "NvtxEvent": {"Timestamp", "EndTimestamp", "Text",
//     "GlobalTid"}}` whose texts follow PyTorch's emit_nvtx(record_shapes=True) format
//     (pytorch/pytorch: torch/csrc/profiler/util.cpp, getNvtxStr / shapesToStr),
//   - CUDA API calls `{"Type": 48, "TraceProcessEvent": {"startNs", "endNs", "correlationId",
//     "globalTid"}}` and kernels `{"Type": 79, "CudaEvent": {"startNs", "endNs",
//     "correlationId", "globalPid", "kernel": {"shortName", ...}}}` linked by correlation id,
// following the Nsight Systems export documentation (SQLite schema: NVTX_EVENTS,
// CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_KERNEL) and published JSON exports.
// Thread ids encode process 0x0a16cf: main thread 0x00010a16cf0a16cf, autograd thread
// 0x00010a16cf0a1b18, process 0x00010a16cf000000. Every kernel starts 100 us after its launch.
// The file holds, in order:
//   1. three GEMMs in aten::mm ranges of sizes [[2048, 5120], [5120, 15360]], 540, 2500, 600 us;
//   2. one GEMM in an aten::mm range [[4096, 4096], [4096, 1024]], 60 us;
//   3. aten::linear [[8, 512, 4096], [1024, 4096], [1024]] enclosing aten::addmm [[1024],
//      [2048, 4096], [4096, 1024], [], []] and a 30 us GEMM launched inside both; the outer
//      sizes are deliberately not those of the inner op, so outermost attribution would give
//      (4096, 1024, 4096) instead of (2048, 1024, 4096); a fill kernel in an aten::zero_ range;
//   4. a GEMM launched outside every range;
//   5. a GEMM launched by the main thread while an aten::mm [[1, 2], [2, 3]] range is open on
//      the autograd thread;
//   6. a 560 us GEMM launched by the autograd thread inside its aten::mm [[5120, 2048],
//      [2048, 15360]] range;
//   7. a 600 us flash-attention kernel in an aten::_scaled_dot_product_flash_attention range
//      with q [2, 32, 4096, 128] and k [2, 8, 4096, 128]; an NCCL kernel in an nccl:all_reduce
//      range; a GEMM in a range "forward" without sizes; an NVTX mark; a cudaStreamSynchronize.
#include <fstream>
#include <sstream>
#include <string>

#include <doctest/doctest.h>
#include "support/approx.hpp"

#include "tetra/calib/trace_import.hpp"
#include "tetra/base/error.hpp"

using tetra::test::approx;
using namespace tetra;
using namespace tetra::calib;

namespace {

const std::string kNsys = std::string(TETRA_SOURCE_DIR) + "/tests/data/calib/nsys_nvtx_small.json";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int skipped(const TraceImport& imp, const std::string& reason) {
  auto it = imp.skipped.find(reason);
  return it == imp.skipped.end() ? 0 : it->second;
}

// One line of an export: a range, a launch call and its kernel.
std::string range_line(long long start, long long end, const std::string& text, const std::string& tid) {
  return "{\"Type\":59,\"NvtxEvent\":{\"Timestamp\":\"" + std::to_string(start) + "\",\"EndTimestamp\":\"" +
         std::to_string(end) + "\",\"Text\":\"" + text + "\",\"GlobalTid\":\"" + tid + "\"}}\n";
}
std::string launch_lines(long long at, long long corr, const std::string& tid, long long gpu_ns) {
  const long long gs = at + 1000;
  return "{\"Type\":48,\"TraceProcessEvent\":{\"startNs\":\"" + std::to_string(at) + "\",\"correlationId\":" +
         std::to_string(corr) + ",\"globalTid\":\"" + tid + "\"}}\n" +
         "{\"Type\":79,\"CudaEvent\":{\"startNs\":\"" + std::to_string(gs) + "\",\"endNs\":\"" +
         std::to_string(gs + gpu_ns) + "\",\"correlationId\":" + std::to_string(corr) +
         ",\"globalPid\":\"292568055152640\",\"kernel\":{\"shortName\":\"sm90_xmma_gemm_bf16\"}}}\n";
}

}  // namespace

TEST_SUITE("calib") {
  TEST_CASE("Nsight export with emit_nvtx ranges gives GEMM and attention rows") {
    const auto imp = import_trace(kNsys);
    CHECK(imp.kernels == 12);
    CHECK(imp.used == 7);
    const auto& g = imp.profile.gemm;
    REQUIRE(g.size() == 4);  // rows sorted by (m, n, k)
    // Nested aten::linear -> aten::addmm: the innermost range (addmm, mat1 [2048, 4096], mat2
    // [4096, 1024]) gives M = 2048, N = 1024, K = 4096, 30 us.
    CHECK(g[0].m == 2048);
    CHECK(g[0].n == 1024);
    CHECK(g[0].k == 4096);
    CHECK(g[0].seconds == approx(30e-6));
    // aten::mm [[2048, 5120], [5120, 15360]]: M = 2048, K = 5120, N = 15360; the median of
    // 540, 2500 and 600 us is 600 us.
    CHECK(g[1].m == 2048);
    CHECK(g[1].n == 15360);
    CHECK(g[1].k == 5120);
    CHECK(g[1].seconds == approx(600e-6));
    // aten::mm [[4096, 4096], [4096, 1024]]: one sample, 60 us (an outermost attribution of the
    // nested case would add its 30 us here and make the median 45 us).
    CHECK(g[2].m == 4096);
    CHECK(g[2].n == 1024);
    CHECK(g[2].k == 4096);
    CHECK(g[2].seconds == approx(60e-6));
    // The autograd thread's own range: [[5120, 2048], [2048, 15360]], 560 us.
    CHECK(g[3].m == 5120);
    CHECK(g[3].n == 15360);
    CHECK(g[3].k == 2048);
    CHECK(g[3].seconds == approx(560e-6));
    // SDPA q [b=2, heads=32, s=4096, d=128], k [2, kv_heads=8, 4096, 128]; no is_causal in NVTX
    // text, so causal as for a Kineto op without concrete inputs.
    REQUIRE(imp.profile.attention.size() == 1);
    const auto& a = imp.profile.attention[0];
    CHECK(a.batch == 2);
    CHECK(a.seq == 4096);
    CHECK(a.heads == 32);
    CHECK(a.kv_heads == 8);
    CHECK(a.head_dim == 128);
    CHECK(a.causal);
    CHECK(a.pass == costmodel::AttentionPass::fwd);
    CHECK(a.seconds == approx(600e-6));
    CHECK(imp.profile.collective.empty());
    CHECK(imp.profile.meta.source == "import-trace " + kNsys);
  }

  TEST_CASE("Nsight kernels outside a range of their launching thread are skipped with a reason") {
    const auto imp = import_trace(kNsys);
    // Case 4 (no range at all) and case 5 (a range open only on another thread).
    CHECK(skipped(imp, "GEMM kernel outside any NVTX range of its launching thread") == 2);
    // The range "forward" is the kernel's op, and it is not a GEMM op.
    CHECK(skipped(imp, "GEMM-named kernel under a non-GEMM op (forward)") == 1);
    CHECK(skipped(imp, "NCCL kernel (Nsight export carries no message sizes)") == 1);
    CHECK(skipped(imp, "kernel kind not modelled") == 1);
    // The other thread's [[1, 2], [2, 3]] range gives no row.
    for (const auto& r : imp.profile.gemm) CHECK(r.m != 1);
  }

  TEST_CASE("Nsight: the innermost enclosing range wins, ranges are matched per thread") {
    const std::string t1 = "292568055813839";
    const std::string t2 = "292568055814936";
    // Outer range without sizes, inner aten::mm ending before the second launch: the first
    // kernel gets the inner shape, the second (after the inner range closed) the outer range
    // only, which has no sizes.
    std::string text = range_line(0, 10000, "aten::matmul", t1) +
                       range_line(100, 2000, "aten::mm, seq = 1, op_id = 2, sizes = [[64, 32], [32, 16]]", t1) +
                       launch_lines(500, 1, t1, 3000) + launch_lines(5000, 2, t1, 4000) +
                       // Same times on another thread: its range must not capture t1's launch.
                       range_line(5500, 6500, "aten::mm, seq = 3, op_id = 4, sizes = [[8, 8], [8, 8]]", t2) +
                       launch_lines(6000, 3, t1, 5000);
    const auto imp = import_trace_text(text, "mini.json");
    CHECK(imp.kernels == 3);
    REQUIRE(imp.profile.gemm.size() == 1);
    CHECK(imp.profile.gemm[0].m == 64);
    CHECK(imp.profile.gemm[0].n == 16);
    CHECK(imp.profile.gemm[0].k == 32);
    CHECK(imp.profile.gemm[0].seconds == approx(3e-6));
    CHECK(skipped(imp, "GEMM kernel without a shaped aten op") == 2);
    // aten::bmm [[4, 128, 64], [4, 64, 256]] is four GEMMs with four B operands, not one
    // (4*128) x 256 x 64 GEMM (which reads B once): the GEMM table has no batch column, so no row.
    const auto bmm = import_trace_text(
        range_line(0, 100, "aten::bmm, seq = 9, op_id = 9, sizes = [[4, 128, 64], [4, 64, 256]]", t1) +
            launch_lines(10, 7, t1, 1000),
        "bmm.json");
    CHECK(bmm.profile.gemm.empty());
    CHECK(skipped(bmm, "batched GEMM op (aten::bmm, baddbmm, grouped): no batch column in [[gemm]]") == 1);
  }

  TEST_CASE("Nsight exports without NVTX keep the name-only classification") {
    const std::string t1 = "292568055813839";
    const auto imp = import_trace_text(launch_lines(10, 1, t1, 1000) + launch_lines(20, 2, t1, 1000), "plain.json");
    CHECK(imp.kernels == 2);
    CHECK(imp.used == 0);
    CHECK(skipped(imp, "GEMM kernel (Nsight export carries no shapes; use a Kineto trace)") == 2);
  }

  TEST_CASE("malformed NVTX texts and ids never crash and give no guessed rows") {
    const std::string t1 = "292568055813839";
    const char* bad_texts[] = {
        "aten::mm, sizes = [[2048, 5120], [5120, 15360]",     // unterminated
        "aten::mm, sizes = [[-1, 5120], [5120, 15360]]",      // negative
        "aten::mm, sizes = [[99999999999999999999, 1], [1, 1]]",  // beyond any dimension
        "aten::mm, sizes = [[[1]], [1]]",                      // nested deeper than PyTorch writes
        "aten::mm, sizes = [[2048 5120], [5120, 15360]]",      // missing comma
        "aten::mm, sizes = []",                                // no inputs
        ", op_id = 3, sizes = [[2, 3], [3, 4]]",               // no name
    };
    for (const char* t : bad_texts) {
      const auto imp = import_trace_text(range_line(0, 100, t, t1) + launch_lines(10, 1, t1, 1000), "bad.json");
      CHECK_MESSAGE(imp.profile.gemm.empty(), t);
      CHECK(imp.kernels == 1);
    }
    // Ids and times of every type and range: numbers beyond 64 bits, floats, garbage strings,
    // ranges whose end precedes their start, overlapping non-nested ranges.
    const std::string odd =
        "{\"NvtxEvent\":{\"Timestamp\":1e300,\"EndTimestamp\":\"x\",\"Text\":5,\"GlobalTid\":[]}}\n"
        "{\"NvtxEvent\":{\"Timestamp\":\"99999999999999999999\",\"EndTimestamp\":\"-5\",\"GlobalTid\":1}}\n"
        "{\"NvtxEvent\":{\"Timestamp\":\"50\",\"EndTimestamp\":\"10\",\"Text\":\"aten::mm\",\"GlobalTid\":1}}\n"
        "{\"NvtxEvent\":{\"Timestamp\":0,\"EndTimestamp\":60,\"Text\":\"aten::mm, sizes = [[1, 2], [2, 3]]\","
        "\"GlobalTid\":1}}\n"
        "{\"NvtxEvent\":{\"Timestamp\":40,\"EndTimestamp\":100,\"Text\":\"aten::mm, sizes = [[5, 2], [2, 3]]\","
        "\"GlobalTid\":1}}\n"
        "{\"NvtxEvent\":{\"Timestamp\":0,\"EndTimestamp\":9,\"TextId\":18446744073709551615,\"GlobalTid\":1}}\n"
        "{\"TraceProcessEvent\":{\"startNs\":70,\"correlationId\":18446744073709551615,\"globalTid\":1}}\n"
        "{\"TraceProcessEvent\":{\"startNs\":70,\"correlationId\":2.5e30,\"globalTid\":1}}\n"
        "{\"TraceProcessEvent\":{\"startNs\":70,\"correlationId\":\"7\",\"globalTid\":1}}\n"
        "{\"TraceProcessEvent\":{\"startNs\":\"1e400\",\"correlationId\":8,\"globalTid\":1}}\n"
        "{\"CudaEvent\":{\"startNs\":1,\"endNs\":2,\"correlationId\":\"7\",\"kernel\":{\"shortName\":\"gemm\"}}}\n"
        "{\"CudaEvent\":{\"startNs\":1,\"endNs\":2,\"correlationId\":8,\"globalPid\":-1,\"kernel\":{\"shortName\":\"gemm\"}}}\n"
        "{\"CudaEvent\":{\"startNs\":1,\"endNs\":2,\"correlationId\":-3e300,\"kernel\":{\"shortName\":\"gemm\"}}}\n";
    const auto imp = import_trace_text(odd, "odd.json");
    CHECK(imp.kernels == 3);
    CHECK(skipped(imp, "GEMM kernel without its CUDA launch call in the export") == 2);
    // The launch at 70 ns on thread 1 lies in the [40, 100] range only (the [0, 60] one ended):
    // mat1 [5, 2], mat2 [2, 3] gives M = 5, N = 3, K = 2.
    REQUIRE(imp.profile.gemm.size() == 1);
    CHECK(imp.profile.gemm[0].m == 5);
    CHECK(imp.profile.gemm[0].n == 3);
    CHECK(imp.profile.gemm[0].k == 2);
    // Every prefix of the recorded export either imports or throws a UserError.
    const auto text = slurp(kNsys);
    for (std::size_t n = 0; n < text.size(); n += 11) {
      try {
        (void)import_trace_text(std::string_view(text).substr(0, n), "prefix");
      } catch (const UserError&) {
      }
    }
  }

  TEST_CASE("Nsight attribution stays fast for 1e5 nested ranges and kernels") {
    // 50 000 outer ranges each holding one inner aten::mm range and one launch: a quadratic
    // search would take minutes; the sweep is O(n log n).
    const std::string t1 = "292568055813839";
    std::string text;
    text.reserve(1 << 25);
    for (long long i = 0; i < 50000; ++i) {
      const long long base = i * 1000;
      text += range_line(base, base + 900, "module", t1);
      text += range_line(base + 10, base + 800, "aten::mm, seq = 1, op_id = 2, sizes = [[128, 64], [64, 32]]", t1);
      text += launch_lines(base + 20, i + 1, t1, 2000 + (i % 3) * 1000);
    }
    const auto imp = import_trace_text(text, "big.json");
    CHECK(imp.kernels == 50000);
    CHECK(imp.used == 50000);
    REQUIRE(imp.profile.gemm.size() == 1);
    CHECK(imp.profile.gemm[0].seconds == approx(3e-6));  // median of 2, 3, 4 us
  }
}
