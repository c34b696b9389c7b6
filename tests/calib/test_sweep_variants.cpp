// Forced NCCL (algorithm, protocol) variants: the plan, the sweep over a replayed table, and
// one fitted line per variant.
#include <algorithm>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include "support/approx.hpp"

#include "tetra/calib/curve_fit.hpp"
#include "tetra/calib/sweep.hpp"

using tetra::test::approx;
using namespace tetra;
using namespace tetra::calib;

namespace {

bool has(const std::vector<CollectiveVariant>& v, const std::string& algorithm, const std::string& protocol) {
  return std::find(v.begin(), v.end(), CollectiveVariant{algorithm, protocol}) != v.end();
}

/// t(S) = latency + S * f / busbw, f = 2 (n - 1) / n for all_reduce (NVIDIA/nccl-tests:
/// doc/PERFORMANCE.md).
double line_seconds(double latency_s, double busbw_Bps, int ranks, double bytes) {
  return latency_s + bytes * 2.0 * (ranks - 1) / ranks / busbw_Bps;
}

struct Truth {
  std::string algorithm, protocol;
  double latency_s, busbw_Bps;
};

/// NCCL's choice and two forced variants of all_reduce over 8 GPUs of one node.
const std::vector<Truth> kTruth = {
    {"", "", 12e-6, 360e9}, {"ring", "ll", 8e-6, 40e9}, {"tree", "simple", 25e-6, 300e9}};
const std::vector<double> kSizes = {1 << 20, 1 << 22, 1 << 24, 1 << 26};

costmodel::Profile recorded_table() {
  costmodel::Profile p;
  for (const auto& t : kTruth) {
    for (double s : kSizes) {
      p.collective.push_back({"all_reduce", 8, 8, s, line_seconds(t.latency_s, t.busbw_Bps, 8, s), t.algorithm,
                              t.protocol});
    }
  }
  return p;
}

/// A probe that knows only NCCL's choice (the interface's default for forced variants).
class ChoiceOnlyProbe final : public CollectiveProbe {
 public:
  [[nodiscard]] std::vector<GroupShape> groups() const override { return {{2, 2}}; }
  [[nodiscard]] double seconds(const std::string& /*op*/, const GroupShape& /*group*/, double bytes) override {
    return 1e-5 + bytes * 1e-11;
  }
};

}  // namespace

TEST_SUITE("calib") {
  TEST_CASE("quick plans sweep NCCL's choice only, full plans add the documented variants") {
    PlanOptions quick;
    quick.quick = true;
    const auto q = make_plan(quick);
    REQUIRE(!q.collective_ops.empty());
    for (const auto& op : q.collective_ops) {
      const auto v = variants_of(q, op);
      REQUIRE(v.size() == 1);
      CHECK(v[0].is_default());
    }

    const auto full = make_plan(PlanOptions{});
    for (const auto& op : full.collective_ops) {
      const auto v = variants_of(full, op);
      REQUIRE(v.size() > 1);
      CHECK(v.front() == CollectiveVariant{});  // NCCL's choice first
    }
    const auto ar = variants_of(full, "all_reduce");
    for (const char* algo : {"ring", "tree"}) {
      for (const char* proto : {"ll", "ll128", "simple"}) CHECK(has(ar, algo, proto));
    }
    // NVLS, NVLSTree and the CollNet algorithms run Simple only; PAT is no AllReduce algorithm
    // (NVIDIA/nccl: src/graph/tuning.cc ncclTopoTuneModel).
    CHECK(has(ar, "nvls", "simple"));
    CHECK(has(ar, "nvls_tree", "simple"));
    CHECK(has(ar, "collnet_direct", "simple"));
    CHECK(has(ar, "collnet_chain", "simple"));
    CHECK_FALSE(has(ar, "nvls", "ll"));
    CHECK_FALSE(has(ar, "pat", "simple"));
    CHECK(ar.size() == 1 + 6 + 4);
    for (const char* op : {"all_gather", "reduce_scatter"}) {
      const auto v = variants_of(full, op);
      CHECK(std::none_of(v.begin(), v.end(), [](const auto& x) { return x.algorithm == "tree"; }));
      CHECK(has(v, "ring", "ll128"));
      CHECK(has(v, "nvls", "simple"));
      CHECK(has(v, "pat", "simple"));
      CHECK_FALSE(has(v, "pat", "ll"));
    }
    for (const char* op : {"send_recv", "all_to_all"}) {
      const auto v = variants_of(full, op);
      CHECK(std::all_of(v.begin(), v.end(), [](const auto& x) { return x.algorithm.empty(); }));
      CHECK(has(v, "", "ll"));
      CHECK(has(v, "", "simple"));
    }
    // One mapping to NCCL's spellings (NVIDIA/nccl: src/enqueue.cc ncclAlgoStr / ncclProtoStr).
    CHECK(nccl_algo_name("nvls_tree") == "NVLSTree");
    CHECK(nccl_algo_name("collnet_direct") == "CollNetDirect");
    CHECK(nccl_algo_name("pat") == "PAT");
    CHECK(nccl_algo_name("Ring").empty());  // profile names are lowercase
    CHECK(nccl_algo_name("").empty());
    CHECK(nccl_proto_name("ll128") == "LL128");
    CHECK(nccl_proto_name("simple") == "Simple");
    CHECK(describe(CollectiveVariant{"ring", "ll"}) == "ring/ll");
    CHECK(describe(CollectiveVariant{"", "ll128"}) == "ll128");
    CHECK(describe(CollectiveVariant{}) == "nccl");
  }

  TEST_CASE("the sweep records each variant's algorithm and protocol and skips variants the probe lacks") {
    SweepPlan plan;
    plan.collective_ops = {"all_reduce"};
    plan.collective_bytes = kSizes;
    plan.collective_variants["all_reduce"] = {{"", ""}, {"ring", "ll"}, {"nvls", "simple"}, {"tree", "simple"}};
    ReplayCollectiveProbe probe(recorded_table());
    // Replay: a recorded row, 0 for a size the variant lacks, unsupported for a variant
    // without rows. Hand value: 8e-6 + 2^20 * 1.75 / 40e9 = 8e-6 + 45.875e-6 = 53.875e-6 s.
    CHECK(probe.variant_seconds("all_reduce", {8, 8}, 1 << 20, {"ring", "ll"}) == approx(53.875e-6));
    CHECK(probe.variant_seconds("all_reduce", {8, 8}, 1 << 21, {"ring", "ll"}) == 0);
    CHECK(probe.variant_seconds("all_reduce", {8, 8}, 1 << 20, {"nvls", "simple"}) < 0);
    CHECK(probe.seconds("all_reduce", {8, 8}, 1 << 20) == approx(line_seconds(12e-6, 360e9, 8, 1 << 20)));

    costmodel::Profile out;
    std::vector<std::string> notes;
    sweep_collectives(probe, plan, out, [&notes](const std::string& s) { notes.push_back(s); });
    REQUIRE(out.collective.size() == kTruth.size() * kSizes.size());
    for (const auto& t : kTruth) {
      const auto n = std::count_if(out.collective.begin(), out.collective.end(), [&t](const auto& r) {
        return r.algorithm == t.algorithm && r.protocol == t.protocol;
      });
      CHECK(n == static_cast<long>(kSizes.size()));
    }
    CHECK(std::none_of(out.collective.begin(), out.collective.end(),
                       [](const auto& r) { return r.algorithm == "nvls"; }));
    // Rows in plan order: the variant loop sits inside the op loop, sizes innermost.
    CHECK(out.collective[4].algorithm == "ring");
    CHECK(out.collective[4].protocol == "ll");
    CHECK(out.collective[4].bytes == kSizes[0]);
    CHECK(out.collective[4].seconds == approx(53.875e-6));
    // One note for the group, one for the skipped variant.
    REQUIRE(notes.size() == 2);
    CHECK(notes[1].find("nvls/simple") != std::string::npos);
    CHECK(notes[1].find("skipped") != std::string::npos);

    SUBCASE("the fit gives one line per variant") {
      const auto lines = fit_collectives(out.collective);
      REQUIRE(lines.size() == kTruth.size());
      // Sorted by (op, ranks, ranks_per_node, algorithm, protocol): "", ring, tree.
      for (std::size_t i = 0; i < kTruth.size(); ++i) {
        const auto& f = lines[i].fit;
        CHECK(f.algorithm == kTruth[i].algorithm);
        CHECK(f.protocol == kTruth[i].protocol);
        CHECK(f.latency_s == approx(kTruth[i].latency_s).epsilon(1e-6));
        CHECK(f.busbw_Bps == approx(kTruth[i].busbw_Bps).epsilon(1e-6));
      }
    }
  }

  TEST_CASE("a probe without forced variants records NCCL's choice and notes the rest once each") {
    PlanOptions options;
    options.max_collective_bytes = 1024;
    SweepPlan plan = make_plan(options);
    plan.collective_ops = {"send_recv"};
    ChoiceOnlyProbe probe;
    costmodel::Profile out;
    std::vector<std::string> notes;
    sweep_collectives(probe, plan, out, [&notes](const std::string& s) { notes.push_back(s); });
    // 8 B .. 1 KiB by factors of 2: 8 sizes, NCCL's choice only.
    REQUIRE(out.collective.size() == 8);
    CHECK(std::all_of(out.collective.begin(), out.collective.end(),
                      [](const auto& r) { return r.algorithm.empty() && r.protocol.empty(); }));
    // The group note plus one per forced protocol (ll, ll128, simple).
    CHECK(notes.size() == 1 + 3);
  }
}
