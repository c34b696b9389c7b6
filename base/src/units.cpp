#include "tetra/base/units.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace tetra::units {

namespace {

/// One accepted unit spelling and the factor that turns its number into the base unit.
struct UnitEntry {
  std::string_view suffix;
  double factor;
};

/// SI prefixes are powers of 1000, binary ones powers of 1024 (IEC 80000-13).
constexpr std::array<UnitEntry, 11> kPrefixes = {{
    {"", 1.0},
    {"k", 1e3},
    {"M", 1e6},
    {"G", 1e9},
    {"T", 1e12},
    {"P", 1e15},
    {"Ki", 1024.0},
    {"Mi", 1024.0 * 1024.0},
    {"Gi", 1024.0 * 1024.0 * 1024.0},
    {"Ti", 1024.0 * 1024.0 * 1024.0 * 1024.0},
    {"Pi", 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0},
}};

bool is_space(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

[[noreturn]] void fail(std::string_view what, std::string_view text, std::string_view why) {
  std::string msg = "expected ";
  msg += what;
  msg += ", got \"";
  msg += text;
  msg += "\"";
  if (!why.empty()) {
    msg += " (";
    msg += why;
    msg += ")";
  }
  throw std::invalid_argument(msg);
}

/// Splits "  2.5 us" into 2.5 and "us". The number must be a plain non-negative decimal
/// (optionally with an exponent); signs, "inf" and "nan" are rejected.
std::pair<double, std::string_view> split(std::string_view text, std::string_view what) {
  const std::string_view s = trim(text);
  if (s.empty()) fail(what, text, "empty value");
  const char c0 = s.front();
  if (c0 == '-') fail(what, text, "negative values are not allowed");
  if (!((c0 >= '0' && c0 <= '9') || c0 == '.')) fail(what, text, "it must start with a number");
  double value = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc()) fail(what, text, "the number is not finite or out of range");
  if (!std::isfinite(value)) fail(what, text, "the number is not finite");
  std::string_view unit(ptr, static_cast<std::size_t>(s.data() + s.size() - ptr));
  while (!unit.empty() && is_space(unit.front())) unit.remove_prefix(1);
  return {value, unit};
}

/// Factor for `prefix + base` where prefix is any of kPrefixes, or 0 when it does not match.
double prefixed(std::string_view unit, std::string_view base) {
  if (unit.size() < base.size() || unit.substr(unit.size() - base.size()) != base) return 0;
  const std::string_view prefix = unit.substr(0, unit.size() - base.size());
  for (const auto& p : kPrefixes) {
    if (p.suffix == prefix) return p.factor;
  }
  return 0;
}

/// Byte factor of a size unit: "B" (bytes) or "b" (bits, 1/8 byte) with a prefix.
double size_factor(std::string_view unit) {
  if (const double f = prefixed(unit, "B"); f > 0) return f;
  if (const double f = prefixed(unit, "b"); f > 0) return f / 8.0;
  return 0;
}

double checked(double value, double factor, std::string_view what, std::string_view text) {
  const double out = value * factor;
  if (!std::isfinite(out)) fail(what, text, "the value is out of range");
  return out;
}

constexpr std::string_view kSizeWhat = "a size like \"80GiB\" or \"40GB\"";
constexpr std::string_view kBandwidthWhat =
    "a bandwidth like \"3.35TB/s\", \"450GB/s\" or \"400Gb/s\"";
constexpr std::string_view kFlopWhat = "a FLOP rate like \"989TFLOP/s\" or \"312 TFLOPS\"";
constexpr std::string_view kDurationWhat = "a duration like \"2.5us\", \"5ms\" or \"1.5s\"";

std::string printf_str(const char* fmt, double v, const char* unit) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v, unit);
  return buf;
}

}  // namespace

double parse_bytes(std::string_view text) {
  const auto [value, unit] = split(text, kSizeWhat);
  if (unit.empty()) fail(kSizeWhat, text, "missing unit: B, kB..PB, KiB..PiB, or b for bits");
  const double f = size_factor(unit);
  if (f <= 0) {
    fail(kSizeWhat, text,
         "unknown unit \"" + std::string(unit) + "\": use B, kB..PB, KiB..PiB, or b for bits");
  }
  return checked(value, f, kSizeWhat, text);
}

double parse_bandwidth(std::string_view text) {
  const auto [value, unit] = split(text, kBandwidthWhat);
  if (unit.empty()) fail(kBandwidthWhat, text, "missing unit such as GB/s or Gb/s");
  double f = 0;
  if (unit.size() > 2 && unit.substr(unit.size() - 2) == "/s") {
    f = size_factor(unit.substr(0, unit.size() - 2));
  } else if (unit.size() > 2 && unit.substr(unit.size() - 2) == "ps") {
    // "400Gbps", "25GBps"
    f = size_factor(unit.substr(0, unit.size() - 2));
  }
  if (f <= 0) {
    fail(kBandwidthWhat, text,
         "unknown unit \"" + std::string(unit) + "\": use B/s or b/s with a prefix, e.g. GB/s");
  }
  return checked(value, f, kBandwidthWhat, text);
}

double parse_flop_rate(std::string_view text) {
  const auto [value, unit] = split(text, kFlopWhat);
  if (unit.empty()) fail(kFlopWhat, text, "missing unit such as TFLOP/s");
  double f = 0;
  for (std::string_view base : {"FLOP/s", "FLOPS", "FLOPs", "flop/s", "flops"}) {
    f = prefixed(unit, base);
    if (f > 0) {
      // Binary prefixes make no sense for FLOP rates.
      if (unit.size() > base.size() && unit[unit.size() - base.size() - 1] == 'i') f = 0;
      break;
    }
  }
  if (f <= 0) {
    fail(kFlopWhat, text,
         "unknown unit \"" + std::string(unit) + "\": use FLOP/s with k, M, G, T or P");
  }
  return checked(value, f, kFlopWhat, text);
}

double parse_duration(std::string_view text) {
  const auto [value, unit] = split(text, kDurationWhat);
  if (unit.empty()) fail(kDurationWhat, text, "missing unit: ps, ns, us, ms, s, min or h");
  static constexpr std::array<UnitEntry, 9> kTimes = {{
      {"ps", 1e-12},
      {"ns", 1e-9},
      {"us", 1e-6},
      {"\xC2\xB5s", 1e-6},  // U+00B5 MICRO SIGN
      {"\xCE\xBCs", 1e-6},  // U+03BC GREEK SMALL LETTER MU
      {"ms", 1e-3},
      {"s", 1.0},
      {"min", 60.0},
      {"h", 3600.0},
  }};
  for (const auto& t : kTimes) {
    if (t.suffix == unit) return checked(value, t.factor, kDurationWhat, text);
  }
  fail(kDurationWhat, text, "unknown unit \"" + std::string(unit) + "\": use ps, ns, us, ms, s, min or h");
}

double parse_power(std::string_view text) {
  static constexpr std::string_view kWhat = "a power such as \"500W\" or \"1.2kW\"";
  const auto [value, unit] = split(text, kWhat);
  if (unit == "W") return checked(value, 1.0, kWhat, text);
  if (unit == "kW") return checked(value, 1e3, kWhat, text);
  fail(kWhat, text, unit.empty() ? "missing unit: W or kW" : "unknown unit \"" + std::string(unit) + "\": use W or kW");
}

std::string format_bytes(double bytes) {
  static constexpr std::array<const char*, 6> kNames = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = bytes;
  std::size_t i = 0;
  while (i + 1 < kNames.size() && std::fabs(v) >= 1024.0) {
    v /= 1024.0;
    ++i;
  }
  return printf_str(i == 0 ? "%.0f %s" : "%.2f %s", v, kNames[i]);
}

std::string format_bandwidth(double bytes_per_s) {
  static constexpr std::array<const char*, 6> kNames = {"B/s",  "kB/s", "MB/s",
                                                        "GB/s", "TB/s", "PB/s"};
  double v = bytes_per_s;
  std::size_t i = 0;
  while (i + 1 < kNames.size() && std::fabs(v) >= 1000.0) {
    v /= 1000.0;
    ++i;
  }
  return printf_str("%.2f %s", v, kNames[i]);
}

std::string format_flop_rate(double flop_per_s) {
  static constexpr std::array<const char*, 6> kNames = {"FLOP/s",  "kFLOP/s", "MFLOP/s",
                                                        "GFLOP/s", "TFLOP/s", "PFLOP/s"};
  double v = flop_per_s;
  std::size_t i = 0;
  while (i + 1 < kNames.size() && std::fabs(v) >= 1000.0) {
    v /= 1000.0;
    ++i;
  }
  return printf_str("%.4g %s", v, kNames[i]);
}

std::string format_duration(double seconds) {
  const double a = std::fabs(seconds);
  if (a == 0) return "0.00 s";
  if (a < 1e-9) return printf_str("%.2f %s", seconds * 1e12, "ps");
  if (a < 1e-6) return printf_str("%.2f %s", seconds * 1e9, "ns");
  if (a < 1e-3) return printf_str("%.2f %s", seconds * 1e6, "us");
  if (a < 1.0) return printf_str("%.2f %s", seconds * 1e3, "ms");
  return printf_str("%.2f %s", seconds, "s");
}

}  // namespace tetra::units
