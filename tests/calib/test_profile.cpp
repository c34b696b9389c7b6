// A calibrated profile (rows + fit, including the fields only calibration fills) survives the
// TOML form that `calibrate` writes and `[cluster].profile` reads.
#include <doctest/doctest.h>

#include "synthetic.hpp"
#include "tetra/calib/curve_fit.hpp"
#include "tetra/scenarios/profile_io.hpp"

using namespace tetra;

TEST_SUITE("calib") {
  TEST_CASE("a fitted profile round-trips through TOML") {
    auto p = calib::testing::make_synthetic();
    p.meta.nccl = "2.28.9";
    p.collective[3].algorithm = "ring";
    p.collective[3].protocol = "simple";
    p.fit = calib::fit_profile(p);
    const auto text = scenarios::format_profile(p);
    const auto q = scenarios::parse_profile(text, "round-trip");
    CHECK(scenarios::format_profile(q) == text);
    REQUIRE(q.gemm.size() == p.gemm.size());
    CHECK(q.gemm[17].seconds == p.gemm[17].seconds);
    CHECK(q.meta.sms == 132);
    CHECK(q.collective[3].algorithm == "ring");
    CHECK(q.collective[3].protocol == "simple");
    CHECK(q.fit.valid);
    CHECK(q.fit.gemm_peak_flops == p.fit.gemm_peak_flops);
    CHECK(q.fit.gemm_wave_s == p.fit.gemm_wave_s);
    REQUIRE(q.fit.collectives.size() == p.fit.collectives.size());
    CHECK(q.fit.collectives[2].busbw_Bps == p.fit.collectives[2].busbw_Bps);
    REQUIRE(q.fit.memory_bound.size() == p.fit.memory_bound.size());
    CHECK(q.fit.memory_bound[0].Bps == p.fit.memory_bound[0].Bps);
  }
}
