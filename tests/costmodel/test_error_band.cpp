// Error bands of predicted step times (costmodel/error_band.hpp): quantiles, the interval
// around a prediction, the regime (framework) of each band, and the notes when there is no band.
#include <doctest/doctest.h>
#include "support/approx.hpp"

#include <vector>

#include "tetra/costmodel/error_band.hpp"
#include <string>

using tetra::test::approx;
using namespace tetra;
using namespace tetra::costmodel;

TEST_SUITE("costmodel") {
  TEST_CASE("error band: quantiles interpolate between order statistics (type 7)") {
    // Sorted: 1 2 3 4 5; q = 0.1 sits at position 0.4 -> 1.4; q = 0.9 at 3.6 -> 4.6.
    const std::vector<double> v{5, 1, 4, 2, 3};
    CHECK(quantile(v, 0.0) == 1.0);
    CHECK(quantile(v, 1.0) == 5.0);
    CHECK(quantile(v, 0.5) == 3.0);
    CHECK(quantile(v, 0.1) == approx(1.4).epsilon(1e-12));
    CHECK(quantile(v, 0.9) == approx(4.6).epsilon(1e-12));
    CHECK(quantile({7.0}, 0.9) == 7.0);
  }

  TEST_CASE("error band: the 10th and 90th percentile of ten or more errors, nothing below") {
    // -0.20 -0.10 ... +0.70 (ten values): positions 0.9 and 8.1.
    std::vector<double> e;
    for (int i = 0; i < 10; ++i) e.push_back(-0.2 + 0.1 * i);
    const ErrorBand b = band_of_errors(e);
    CHECK(b.available());
    CHECK(b.rows == 10);
    CHECK(b.low_error == approx(-0.11).epsilon(1e-12));
    CHECK(b.high_error == approx(0.61).epsilon(1e-12));
    e.pop_back();
    const ErrorBand few = band_of_errors(e);
    CHECK_FALSE(few.available());
    CHECK(few.rows == 9);
  }

  TEST_CASE("error band: measured = predicted / (1 + e) gives the interval") {
    CHECK(signed_error(12.0, 10.0) == approx(0.2).epsilon(1e-12));
    CHECK(signed_error(8.0, 10.0) == approx(-0.2).epsilon(1e-12));
    ErrorBand b;
    b.rows = 20;
    b.low_error = -0.2;   // the model is at worst 20 % fast: measured up to 10 / 0.8 = 12.5
    b.high_error = 0.25;  // and at worst 25 % slow: measured down to 10 / 1.25 = 8
    const StepInterval iv = band_interval(b, 10.0);
    CHECK(iv.low_s == approx(8.0).epsilon(1e-12));
    CHECK(iv.high_s == approx(12.5).epsilon(1e-12));
  }

  TEST_CASE("error band: one regime per framework, named for sentences") {
    CHECK(std::string(regime_name(parallel::Framework::megatron)) == "Megatron-Core");
    CHECK(std::string(regime_name(parallel::Framework::deepspeed)) == "DeepSpeed");
    CHECK(std::string(regime_name(parallel::Framework::fsdp)) == "PyTorch FSDP");
  }

  TEST_CASE("error band: a framework with too few rows gets the pooled band, named \"all\"") {
    RegimeBands bands;
    ErrorBand megatron;
    megatron.rows = 4;
    bands.entries = {{parallel::Framework::megatron, megatron}};
    bands.pooled.rows = 30;
    bands.pooled.low_error = -0.2;
    bands.pooled.high_error = 0.1;
    const StepBand b = zero_shot_band(bands, parallel::Framework::megatron);
    CHECK(b.regime == "all");
    CHECK(b.note.empty());
    REQUIRE(b.interval(1.0));
    CHECK(b.interval(1.0)->high_s == approx(1.0 / 0.8).epsilon(1e-12));
    bands.pooled.rows = 5;  // too few altogether: no band, and the note names the framework
    CHECK(zero_shot_band(bands, parallel::Framework::megatron).note ==
          "too few published rows for Megatron-Core (4, a band needs 10)");
  }

  TEST_CASE("error band: a framework with too few rows says so instead of a band") {
    RegimeBands bands;
    ErrorBand ampere;
    ampere.rows = 12;
    ampere.low_error = -0.1;
    ampere.high_error = 0.05;
    ErrorBand blackwell;
    blackwell.rows = 4;
    bands.entries = {{parallel::Framework::megatron, ampere}, {parallel::Framework::fsdp, blackwell}};

    const StepBand a = zero_shot_band(bands, parallel::Framework::megatron);
    CHECK(a.basis == "zero-shot");
    CHECK(a.regime == "megatron");
    CHECK(a.note.empty());
    REQUIRE(a.interval(2.0));
    CHECK(a.interval(2.0)->low_s == approx(2.0 / 1.05).epsilon(1e-12));
    CHECK(a.interval(2.0)->high_s == approx(2.0 / 0.9).epsilon(1e-12));

    const StepBand b = zero_shot_band(bands, parallel::Framework::fsdp);
    CHECK_FALSE(b.interval(2.0));
    CHECK(b.note == "too few published rows for PyTorch FSDP (4, a band needs 10)");
    const StepBand h = zero_shot_band(bands, parallel::Framework::deepspeed);
    CHECK(h.note == "too few published rows for DeepSpeed (0, a band needs 10)");
  }

  TEST_CASE("error band: a fitted file's band, or why there is none") {
    ErrorBand b;
    b.rows = 16;
    b.low_error = -0.05;
    b.high_error = 0.04;
    const StepBand f = fitted_band(b, "f.toml", parallel::Framework::megatron);
    CHECK(f.basis == "fit");
    REQUIRE(f.interval(1.0));
    CHECK(f.interval(1.0)->high_s == approx(1.0 / 0.95).epsilon(1e-12));
    const StepBand old = fitted_band(std::nullopt, "old.toml", parallel::Framework::megatron);
    CHECK_FALSE(old.interval(1.0));
    CHECK(old.note == "old.toml has no [band] table (fitted before bands were recorded; fit again)");
    b.rows = 6;
    CHECK(fitted_band(b, "f.toml", parallel::Framework::megatron).note ==
          "too few cross-validated rows in f.toml (6, a band needs 10)");
  }
}
