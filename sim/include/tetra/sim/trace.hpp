#pragma once
/// How much of a simulated step its Chrome trace holds (Simulator::write_chrome_trace,
/// docs/cli.md "tetrasim simulate"). A full trace of hundreds of micro-batches runs to hundreds
/// of MB, which trace viewers load slowly or not at all; the aggregated trace keeps the
/// warm-up and the cool-down slice by slice and folds the steady state between them.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tetra::sim {

enum class TraceDetail : std::uint8_t {
  /// Every slice of every stream.
  full,
  /// Every slice of the first and the last kTraceKeptMicroBatches micro-batches; each stage's
  /// steady state between them as one slice per (stream, kind, name), as long as the slices
  /// it stands for together (their summed duration), laid end to end from where they began.
  aggregated,
  /// full when the full trace is estimated under kTraceAutoBytes, aggregated otherwise.
  automatic,
};

/// Micro-batches at each end of the step that an aggregated trace keeps slice by slice.
inline constexpr int kTraceKeptMicroBatches = 4;

/// Above this estimated size (bytes) of the full trace, `automatic` writes the aggregated one.
inline constexpr std::size_t kTraceAutoBytes = 50'000'000;

/// One stream of a stage's trace (a Chrome trace thread): its id and name.
struct TraceStream {
  int id = 0;
  std::string_view name;
};

/// One slice of a step's trace: where it ran (stage, stream id), when (seconds into the step)
/// and its kind (the trace's category: "forward", "tp", ...).
struct TraceSlice {
  int stage = 0;
  int stream = 0;
  double start_s = 0, end_s = 0;
  std::string_view kind;
};

/// "full" | "aggregated" | "auto".
[[nodiscard]] const char* to_string(TraceDetail detail) noexcept;
/// The detail named by to_string's words; nullopt for any other word.
[[nodiscard]] std::optional<TraceDetail> parse_trace_detail(std::string_view word) noexcept;

}  // namespace tetra::sim
