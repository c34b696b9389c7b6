#include <doctest/doctest.h>
#include "support/approx.hpp"

#include <stdexcept>
#include <string>

#include "tetra/base/units.hpp"

using tetra::test::approx;
using namespace tetra::units;

namespace {
std::string error_of(double (*parse)(std::string_view), std::string_view text) {
  try {
    (void)parse(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_SUITE("hw") {
  TEST_CASE("parse_bytes: SI and binary prefixes, bits") {
    CHECK(parse_bytes("80GiB") == 80.0 * 1024 * 1024 * 1024);
    CHECK(parse_bytes("40GB") == 40e9);
    CHECK(parse_bytes("512MiB") == 512.0 * 1024 * 1024);
    CHECK(parse_bytes("4096B") == 4096.0);
    CHECK(parse_bytes("1Tb") == 1e12 / 8);  // bits
    CHECK(parse_bytes("1.5 KiB") == 1536.0);
    CHECK(parse_bytes("  2kB ") == 2000.0);
    CHECK(parse_bytes("1PiB") == 1125899906842624.0);
    CHECK(parse_bytes("0B") == 0.0);
  }

  TEST_CASE("parse_bandwidth") {
    CHECK(parse_bandwidth("3.35TB/s") == approx(3.35e12));
    CHECK(parse_bandwidth("450GB/s") == 450e9);
    CHECK(parse_bandwidth("400Gb/s") == 50e9);  // 400e9 bits / 8
    CHECK(parse_bandwidth("400Gbps") == 50e9);
    CHECK(parse_bandwidth("25GiB/s") == 25.0 * 1024 * 1024 * 1024);
    CHECK(parse_bandwidth("900 GB/s") == 900e9);
  }

  TEST_CASE("parse_flop_rate") {
    CHECK(parse_flop_rate("989TFLOP/s") == 989e12);
    CHECK(parse_flop_rate("312 TFLOPS") == 312e12);
    CHECK(parse_flop_rate("1.2PFLOP/s") == approx(1.2e15));
    CHECK(parse_flop_rate("5GFLOP/s") == 5e9);
    CHECK_THROWS_AS((void)parse_flop_rate("1TiFLOP/s"), std::invalid_argument);
  }

  TEST_CASE("parse_power") {
    CHECK(parse_power("500W") == approx(500.0));
    CHECK(parse_power("1.2kW") == approx(1200.0));
    CHECK_THROWS_AS((void)parse_power("500"), std::invalid_argument);
    CHECK_THROWS_AS((void)parse_power("500 MHz"), std::invalid_argument);
  }

  TEST_CASE("parse_duration") {
    CHECK(parse_duration("2.5us") == approx(2.5e-6));
    CHECK(parse_duration("1µs") == approx(1e-6));
    CHECK(parse_duration("1 \xCE\xBCs") == approx(1e-6));
    CHECK(parse_duration("5ms") == approx(5e-3));
    CHECK(parse_duration("100ns") == approx(100e-9));
    CHECK(parse_duration("1.5s") == 1.5);
    CHECK(parse_duration("3ps") == approx(3e-12));
    CHECK(parse_duration("10min") == 600.0);
    CHECK(parse_duration("1.5h") == 5400.0);
    CHECK(parse_duration("1e3 ns") == approx(1e-6));
  }

  TEST_CASE("parse errors say what was expected") {
    CHECK(error_of(parse_bytes, "80 parsecs").find(
              "expected a size like \"80GiB\" or \"40GB\", got \"80 parsecs\"") == 0);
    CHECK(error_of(parse_bytes, "80 parsecs").find("unknown unit \"parsecs\"") !=
          std::string::npos);
    CHECK(error_of(parse_bytes, "").find("empty") != std::string::npos);
    CHECK(error_of(parse_bytes, "-1GB").find("negative") != std::string::npos);
    CHECK(error_of(parse_bytes, "80").find("missing unit") != std::string::npos);
    CHECK(error_of(parse_bandwidth, "450GB").find("expected a bandwidth") == 0);
    CHECK(error_of(parse_flop_rate, "989T").find("expected a FLOP rate") == 0);
    CHECK(error_of(parse_duration, "5 minutes").find("expected a duration") == 0);
    for (const char* bad : {"nan GB", "inf GB", "NaNGB", "GB", "80GiB extra", "80GiBs", "1e999GB",
                            "+5GB", "80 GiB/s", "--1GB", "0x10GB"}) {
      CAPTURE(bad);
      CHECK_THROWS_AS((void)parse_bytes(bad), std::invalid_argument);
    }
    for (const char* bad : {"1", "1 s s", "1sec", "-1us", "inf s"}) {
      CAPTURE(bad);
      CHECK_THROWS_AS((void)parse_duration(bad), std::invalid_argument);
    }
  }

  TEST_CASE("format helpers") {
    CHECK(format_bytes(80 * kGiB) == "80.00 GiB");
    CHECK(format_bytes(512) == "512 B");
    CHECK(format_bandwidth(3.35e12) == "3.35 TB/s");
    CHECK(format_flop_rate(989e12) == "989 TFLOP/s");
    CHECK(format_flop_rate(1.2e15) == "1.2 PFLOP/s");
    CHECK(format_duration(2.5e-6) == "2.50 us");
    CHECK(format_duration(0.0125) == "12.50 ms");
  }
}
