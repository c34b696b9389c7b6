// The step fit (fit/include/tetra/fit/fit.hpp): recovery of known factors from steps the
// simulator generated, unconstrained factors, bounds, bad inputs, the --take design and the
// cross-validation folds.
#include <doctest/doctest.h>
#include "support/approx.hpp"

#include <algorithm>
#include <deque>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tetra/costmodel/factors.hpp"
#include "tetra/fit/fit.hpp"
#include "tetra/base/error.hpp"
#include "tetra/hw/presets.hpp"
#include "tetra/model/presets.hpp"
#include "tetra/parallel/data_loader.hpp"
#include "tetra/parallel/validate.hpp"

using tetra::test::approx;
using namespace tetra;
using costmodel::Factor;
using costmodel::Factors;

namespace {

/// Steps of Llama-2-7B on DGX A100 nodes under a spread of layouts; the cases point into it.
struct Rows {
  model::Model model;
  std::deque<hw::Cluster> clusters;
  std::deque<parallel::Training> trainings;
  std::vector<fit::StepCase> cases;

  Rows() { model = *model::find_model_preset("llama2-7b"); }

  void add(int nodes, int tp, int pp, int mbs, parallel::Recompute rc, int seq, bool fused_norm = true,
           std::optional<parallel::LoaderMask> mask = std::nullopt) {
    hw::Cluster c = *hw::find_cluster_preset("dgx-a100-80gb");
    c.nodes = nodes;
    clusters.push_back(c);
    parallel::Training t;
    t.seq_len = seq;
    t.global_batch = 64;
    t.fused_rmsnorm = fused_norm;
    t.dataloader_mask = mask;
    trainings.push_back(t);
    parallel::Layout l;
    l.tp = tp;
    l.pp = pp;
    l.dp = 8 * nodes / (tp * pp);
    l.mbs = mbs;
    l.sp = tp > 1;
    l.recompute = rc;
    REQUIRE_FALSE(parallel::check_layout(model, 8LL * nodes, t, l));
    fit::StepCase s;
    s.id = "row" + std::to_string(cases.size());
    s.group = nodes == 1 ? "one node" : "nodes";
    s.model = &model;
    s.cluster = &clusters.back();
    s.training = &trainings.back();
    s.layout = l;
    cases.push_back(s);
  }

  /// Sets every case's measured time to the simulated step under `truth`.
  void measure(const Factors& truth) {
    const auto p = fit::predict_steps(cases, truth, 2);
    for (std::size_t i = 0; i < cases.size(); ++i) {
      REQUIRE(p[i].failure.empty());
      cases[i].measured_s = p[i].seconds;
    }
  }
};

Rows spread() {
  using parallel::Recompute;
  Rows r;
  r.add(2, 1, 1, 1, Recompute::none, 2048);
  r.add(2, 2, 1, 2, Recompute::none, 2048, false);
  r.add(2, 4, 2, 1, Recompute::selective, 2048);
  r.add(2, 8, 2, 1, Recompute::none, 4096);
  r.add(2, 2, 4, 1, Recompute::full, 2048);
  r.add(2, 1, 2, 2, Recompute::full, 2048, false);
  r.add(4, 2, 2, 1, Recompute::none, 4096);
  r.add(4, 4, 4, 1, Recompute::none, 2048, false);
  r.add(4, 8, 1, 1, Recompute::selective, 8192);
  r.add(4, 1, 4, 1, Recompute::none, 2048);
  r.add(1, 8, 1, 2, Recompute::none, 8192, false);
  r.add(1, 4, 2, 1, Recompute::full, 4096);
  r.add(1, 2, 1, 1, Recompute::none, 8192);
  r.add(1, 1, 1, 4, Recompute::none, 2048, false);
  // Megatron-LM's loader building an s x s mask per sample (costmodel/data_loader.hpp): at
  // TP 8 the GPUs finish a 16k sample before the host's workers build the next one, so these
  // steps follow the host.
  r.add(1, 8, 1, 1, Recompute::none, 16384, true, parallel::LoaderMask::per_sample);
  r.add(2, 8, 2, 1, Recompute::none, 16384, true, parallel::LoaderMask::per_sample);
  return r;
}

/// Single-node layouts only: nothing crosses a NIC.
Rows one_node() {
  using parallel::Recompute;
  Rows r;
  r.add(1, 8, 1, 2, Recompute::none, 8192, false);
  r.add(1, 4, 2, 1, Recompute::full, 4096);
  r.add(1, 2, 1, 1, Recompute::none, 8192);
  r.add(1, 1, 1, 4, Recompute::none, 2048, false);
  r.add(1, 2, 4, 1, Recompute::selective, 2048);
  r.add(1, 8, 1, 1, Recompute::none, 2048);
  r.add(1, 1, 2, 2, Recompute::full, 4096, false);
  return r;
}

/// A fit of `factors` (none: the default set) on two threads.
fit::FitSummary fit_on(const std::vector<fit::StepCase>& cases, std::vector<Factor> factors = {}) {
  fit::FitOptions o;
  o.factors = std::move(factors);
  o.threads = 2;
  return fit::fit_factors(cases, o);
}

/// Every factor, host included.
std::vector<Factor> every_factor() { return {costmodel::kFactors.begin(), costmodel::kFactors.end()}; }

const fit::FactorFit& factor(const fit::FitSummary& s, Factor f) {
  const auto it = std::find_if(s.per_factor.begin(), s.per_factor.end(),
                               [f](const fit::FactorFit& x) { return x.factor == f; });
  REQUIRE(it != s.per_factor.end());
  return *it;
}

}  // namespace

TEST_SUITE("fit") {
  TEST_CASE("every bound holds the neutral value and says why") {
    for (Factor f : costmodel::kFactors) {
      const fit::FactorBound& b = fit::bound(f);
      CHECK(b.factor == f);
      CHECK(b.lower <= Factors::neutral(f));
      CHECK(b.upper >= Factors::neutral(f));
      CHECK(b.lower < b.upper);
      CHECK(std::string(b.reason).size() > 40);
      if (f != Factor::step_overhead) CHECK(b.lower > 0);
    }
  }

  TEST_CASE("steps the simulator generated with known factors: the fit recovers them within 2 %") {
    Rows r = spread();
    Factors truth;
    truth.gemm = 0.9;
    truth.attention = 0.75;
    truth.memory_bound = 0.6;
    truth.intra_node = 0.8;
    truth.inter_node = 0.3;
    truth.host = 0.7;
    truth.step_overhead_s = 0.2;
    r.measure(truth);
    const fit::FitSummary s = fit_on(r.cases, every_factor());
    for (Factor f : costmodel::kFactors) {
      CAPTURE(costmodel::to_string(f));
      CHECK(factor(s, f).status == fit::FactorStatus::fitted);
      CHECK(s.factors.get(f) == approx(truth.get(f)).epsilon(0.02));
      CHECK(factor(s, f).share > 0);
    }
    CHECK(s.rms_error < 1e-3);
    CHECK(s.rows.size() == r.cases.size());
  }

  TEST_CASE("the same rows give the same fit for every thread count") {
    Rows r = spread();
    Factors truth;
    truth.memory_bound = 0.7;
    truth.inter_node = 0.5;
    r.measure(truth);
    fit::FitOptions o;
    o.factors = {Factor::gemm, Factor::memory_bound, Factor::inter_node};
    o.threads = 1;
    const fit::FitSummary one = fit::fit_factors(r.cases, o);
    o.threads = 2;
    const fit::FitSummary two = fit::fit_factors(r.cases, o);
    CHECK(one.factors == two.factors);
    CHECK(one.iterations == two.iterations);
    CHECK(factor(one, Factor::attention).status == fit::FactorStatus::not_fitted);
    CHECK(one.factors.attention == 1.0);
  }

  TEST_CASE("a factor no row is sensitive to is unconstrained and stays neutral") {
    Rows r = one_node();
    Factors truth;
    truth.gemm = 0.85;
    truth.memory_bound = 0.7;
    r.measure(truth);
    const fit::FitSummary s = fit_on(r.cases, {Factor::gemm, Factor::memory_bound, Factor::inter_node});
    CHECK(factor(s, Factor::inter_node).status == fit::FactorStatus::unconstrained);
    CHECK(s.factors.inter_node == 1.0);
    CHECK(factor(s, Factor::inter_node).std_error < 0);
    CHECK(s.factors.gemm == approx(0.85).epsilon(0.02));
    CHECK(s.factors.memory_bound == approx(0.7).epsilon(0.02));
  }

  TEST_CASE("a factor no row depends on needs no row of its own") {
    // One node, no loader mask: no step crosses a NIC or waits for the host, so of the seven
    // factors five move the steps, and five rows fit them.
    Rows r = one_node();
    Factors truth;
    truth.gemm = 0.9;
    r.measure(truth);
    const std::vector<fit::StepCase> five(r.cases.begin(), r.cases.begin() + 5);
    const fit::FitSummary s = fit_on(five, every_factor());
    CHECK(factor(s, Factor::inter_node).status == fit::FactorStatus::unconstrained);
    CHECK(factor(s, Factor::host).status == fit::FactorStatus::unconstrained);
    CHECK(s.factors.host == 1.0);
    const std::vector<fit::StepCase> four(r.cases.begin(), r.cases.begin() + 4);
    CHECK_THROWS_WITH_AS(static_cast<void>(fit_on(four, every_factor())),
                         "fit: 4 step-time rows for 5 factors that move their steps; give at least 5 rows or fewer factors "
                         "(--factors)",
                         UserError);
  }

  TEST_CASE("a host factor that binds only below its neutral value is found from a second start") {
    // Without the pipelined row, the one loader row (16k tokens, TP 8, 64 micro-batches of one
    // sample on one node) keeps up at the recorded host's speed: 64 x 0.556 s of masks against
    // 44.8 s of GPU time, so at host = 1 no step moves with the host. Measured with a host at
    // 0.6 of that speed the loader paces the row (59.3 s); the fit finds it from its bound.
    Rows r = spread();
    r.cases.pop_back();
    Factors truth;
    truth.gemm = 0.9;
    truth.host = 0.6;
    r.measure(truth);
    const std::vector<Factor> three{Factor::gemm, Factor::memory_bound, Factor::host};
    const fit::FitSummary s = fit_on(r.cases, three);
    CHECK(factor(s, Factor::host).status == fit::FactorStatus::fitted);
    CHECK(s.factors.host == approx(0.6).epsilon(0.02));
    CHECK(s.factors.gemm == approx(0.9).epsilon(0.02));
    CHECK(s.rms_error < 1e-3);
    // Measured with the recorded host, no step moves with it: the host stays neutral.
    r.measure(Factors{});
    const fit::FitSummary plain = fit_on(r.cases, three);
    CHECK(factor(plain, Factor::host).status == fit::FactorStatus::unconstrained);
    CHECK(plain.factors.host == 1.0);
  }

  TEST_CASE("unnamed, the fit estimates every factor but host") {
    Rows r = spread();
    Factors truth;
    truth.gemm = 0.9;
    truth.host = 0.7;
    r.measure(truth);
    const fit::FitSummary s = fit_on(r.cases);
    CHECK(factor(s, Factor::host).status == fit::FactorStatus::not_fitted);
    CHECK(s.factors.host == 1.0);
    for (Factor f : fit::kDefaultFactors) {
      CAPTURE(costmodel::to_string(f));
      CHECK(factor(s, f).status != fit::FactorStatus::not_fitted);
    }
  }

  TEST_CASE("a best value beyond the physical bound stops at the bound") {
    Rows r = spread();
    Factors truth;
    truth.inter_node = 0.3;
    r.measure(truth);
    for (auto& c : r.cases) c.measured_s *= 0.5;  // twice as fast as any GEMM could run
    const fit::FitSummary s = fit_on(r.cases, {Factor::gemm});
    CHECK(s.factors.gemm == approx(fit::bound(Factor::gemm).upper));
    CHECK(factor(s, Factor::gemm).status == fit::FactorStatus::at_bound);
    CHECK(s.converged);
  }

  TEST_CASE("bad inputs: no rows, fewer rows than factors, a step time that is not positive") {
    Rows r = spread();
    r.measure(Factors{});
    fit::FitOptions o;
    CHECK_THROWS_WITH_AS(static_cast<void>(fit::fit_factors({}, o)), "fit: no usable step-time rows", UserError);
    const std::vector<fit::StepCase> three(r.cases.begin(), r.cases.begin() + 3);
    CHECK_THROWS_WITH_AS(static_cast<void>(fit::fit_factors(three, o)),
                         "fit: 3 step-time rows for 6 factors that move their steps; give at least 6 rows or fewer factors "
                         "(--factors)",
                         UserError);
    o.factors = {Factor::gemm};
    std::vector<fit::StepCase> bad = three;
    bad[1].measured_s = 0;
    CHECK_THROWS_WITH_AS(static_cast<void>(fit::fit_factors(bad, o)),
                         "fit: row row1: the measured step time must be a positive number", UserError);
  }

  TEST_CASE("a case the simulator cannot run is reported, not thrown") {
    Rows r = spread();
    const std::vector<fit::StepCase> cases(r.cases.begin(), r.cases.begin() + 2);
    const auto fine = fit::predict_steps(cases, Factors{}, 1);
    CHECK(fine[0].failure.empty());
    CHECK(fine[0].seconds > 0);
    Factors absurd;
    absurd.gemm = 1e-30;  // GEMMs longer than simulated time can hold
    const auto p = fit::predict_steps(cases, absurd, 1);
    CHECK(p[0].failure.find("cannot be simulated") == 0);
    CHECK(p[0].seconds == 0);
  }

  TEST_CASE("--take: a deterministic D-optimal pick of distinct cases that ignores what was measured") {
    Rows r = spread();
    fit::FitOptions o;
    o.threads = 2;
    const auto a = fit::spanning_cases(r.cases, 6, o);
    const auto b = fit::spanning_cases(r.cases, 6, o);
    CHECK(a == b);
    CHECK(a.size() == 6);
    CHECK(std::set<std::size_t>(a.begin(), a.end()).size() == 6);
    // The picks constrain what the design looked at: fitted on them, the factors come back.
    Factors truth;
    truth.gemm = 0.9;
    truth.memory_bound = 0.6;
    truth.inter_node = 0.4;
    r.measure(truth);
    CHECK(fit::spanning_cases(r.cases, 6, o) == a);  // measured times now set: the same picks
    o.factors = {Factor::gemm, Factor::memory_bound, Factor::inter_node};
    const auto picks = fit::spanning_cases(r.cases, 3, o);
    std::vector<fit::StepCase> chosen;
    for (std::size_t i : picks) chosen.push_back(r.cases[i]);
    const fit::FitSummary s = fit::fit_factors(chosen, o);
    CHECK(s.factors.gemm == approx(0.9).epsilon(0.02));
    CHECK(s.factors.inter_node == approx(0.4).epsilon(0.02));
    CHECK(fit::spanning_cases(r.cases, 100, o).size() == r.cases.size());
  }

  TEST_CASE("folds by position and by sweep") {
    const fit::Folds f = fit::folds_by_position(7, 3);
    CHECK(f.count == 3);
    CHECK(f.fold == std::vector<int>{0, 1, 2, 0, 1, 2, 0});
    Rows r = spread();
    const fit::Folds g = fit::folds_by_group(r.cases);
    CHECK(g.count == 2);
    for (std::size_t i = 0; i < r.cases.size(); ++i) {
      CHECK(g.fold[i] == (r.cases[i].group == "nodes" ? 0 : 1));
    }
  }

  TEST_CASE("cross-validation: no fold's rows are among the rows its factors were fitted on") {
    Rows r = spread();
    Factors truth;
    truth.gemm = 0.9;
    truth.inter_node = 0.4;
    r.measure(truth);
    fit::FitOptions o;
    o.factors = {Factor::gemm, Factor::inter_node};
    o.threads = 2;
    const fit::Folds folds = fit::folds_by_position(r.cases.size(), 3);
    const fit::CrossValidation cv = fit::cross_validate(r.cases, folds, o);
    REQUIRE(cv.fits.size() == 3);
    for (int k = 0; k < 3; ++k) {
      const auto& rows = cv.fits[static_cast<std::size_t>(k)].rows;
      for (std::size_t i = 0; i < r.cases.size(); ++i) {
        const bool fitted = std::find(rows.begin(), rows.end(), r.cases[i].id) != rows.end();
        CHECK(fitted == (folds.fold[i] != k));
      }
    }
    // Exact rows: every held-out prediction matches what was measured.
    for (std::size_t i = 0; i < r.cases.size(); ++i) {
      CHECK(cv.predicted_s[i] == approx(r.cases[i].measured_s).epsilon(0.01));
    }
    // Leave-one-out over four rows leaves three to fit six factors.
    const std::vector<fit::StepCase> four(r.cases.begin(), r.cases.begin() + 4);
    CHECK_THROWS_WITH_AS(static_cast<void>(fit::cross_validate(four, fit::folds_by_position(4, 4), fit::FitOptions{})),
                         "validate --cv: fold 1 leaves 3 rows to fit 6 factors; use fewer folds or fewer factors "
                         "(--factors)",
                         UserError);
  }
}
