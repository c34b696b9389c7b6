#pragma once
/// Quantities with units, as scenario and profile files write them: "80GiB", "3.35TB/s",
/// "400Gb/s", "989TFLOP/s", "2.5us". SI prefixes (k M G T P) are powers of 1000, binary
/// prefixes (Ki Mi Gi Ti Pi) powers of 1024; "B" is bytes and "b" bits.
/// Parsers throw std::invalid_argument whose message says what was expected; scenarios
/// wraps it into a UserError with the file position.

#include <string>
#include <string_view>

namespace tetra::units {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kGB = 1e9;

/// "80GiB", "40GB", "512MiB", "4096B", "1Tb" (bits) -> bytes.
[[nodiscard]] double parse_bytes(std::string_view text);
/// "3.35TB/s", "450GB/s", "400Gb/s" (bits), "25GiB/s" -> bytes per second.
[[nodiscard]] double parse_bandwidth(std::string_view text);
/// "989TFLOP/s", "312 TFLOPS", "1.2PFLOP/s" -> FLOP per second.
[[nodiscard]] double parse_flop_rate(std::string_view text);
/// "2.5us", "1µs", "5ms", "100ns", "1.5s", "3ps", "10min", "2h" -> seconds.
[[nodiscard]] double parse_duration(std::string_view text);
/// "500W", "1.2kW" -> watts.
[[nodiscard]] double parse_power(std::string_view text);

/// Human-readable forms used by tables: "80.00 GiB", "3.35 TB/s", "989 TFLOP/s", "2.50 us".
[[nodiscard]] std::string format_bytes(double bytes);
[[nodiscard]] std::string format_bandwidth(double bytes_per_s);
[[nodiscard]] std::string format_flop_rate(double flop_per_s);
[[nodiscard]] std::string format_duration(double seconds);

}  // namespace tetra::units
