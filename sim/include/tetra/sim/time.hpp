#pragma once
/// Simulated time: a strong type over int64 picoseconds (as gem5's 1 ps
/// Tick, ns-3's integer Time). Range ≈ ±106 days. Cost models work in double seconds; the only
/// conversion point is Duration::from_seconds.

#include <compare>
#include <cstdint>

namespace tetra::sim {

/// A span of simulated time in picoseconds.
class Duration {
 public:
  constexpr Duration() = default;
  /// Picoseconds.
  [[nodiscard]] static constexpr Duration ps(std::int64_t v) noexcept { return Duration(v); }
  [[nodiscard]] static constexpr Duration ns(std::int64_t v) noexcept { return Duration(v * 1000); }
  [[nodiscard]] static constexpr Duration us(std::int64_t v) noexcept {
    return Duration(v * 1000000);
  }
  /// The longest span from_seconds accepts, either sign (about 115 days of int64 picoseconds).
  static constexpr double kMaxSeconds = 1e7;
  /// The one conversion from cost-model seconds: rounded to the nearest picosecond.
  /// Throws std::range_error for NaN, negative-infinite, or beyond ±kMaxSeconds;
  /// +infinity is an error too (a transfer that never ends is a model bug).
  [[nodiscard]] static Duration from_seconds(double seconds);

  [[nodiscard]] constexpr std::int64_t count_ps() const noexcept { return ps_; }
  /// Seconds as double (for reports).
  [[nodiscard]] constexpr double seconds() const noexcept { return static_cast<double>(ps_) * 1e-12; }

  constexpr auto operator<=>(const Duration&) const = default;
  constexpr Duration operator+(Duration o) const noexcept { return Duration(ps_ + o.ps_); }
  constexpr Duration operator-(Duration o) const noexcept { return Duration(ps_ - o.ps_); }
  constexpr Duration& operator+=(Duration o) noexcept {
    ps_ += o.ps_;
    return *this;
  }
  constexpr Duration operator*(std::int64_t k) const noexcept { return Duration(ps_ * k); }

 private:
  constexpr explicit Duration(std::int64_t v) : ps_(v) {}
  std::int64_t ps_ = 0;
};

/// A point of simulated time (picoseconds since the start of the simulation).
class Time {
 public:
  constexpr Time() = default;
  [[nodiscard]] static constexpr Time ps(std::int64_t v) noexcept { return Time(v); }
  [[nodiscard]] static constexpr Time zero() noexcept { return Time(0); }
  [[nodiscard]] constexpr std::int64_t count_ps() const noexcept { return ps_; }
  /// Seconds since the start (for reports).
  [[nodiscard]] constexpr double seconds() const noexcept { return static_cast<double>(ps_) * 1e-12; }

  constexpr auto operator<=>(const Time&) const = default;
  constexpr Time operator+(Duration d) const noexcept { return Time(ps_ + d.count_ps()); }
  constexpr Time& operator+=(Duration d) noexcept {
    ps_ += d.count_ps();
    return *this;
  }
  constexpr Duration operator-(Time o) const noexcept { return Duration::ps(ps_ - o.ps_); }

 private:
  constexpr explicit Time(std::int64_t v) : ps_(v) {}
  std::int64_t ps_ = 0;
};

}  // namespace tetra::sim
