#pragma once
/// Cluster factors: what a cluster does not publish and a few measured steps reveal
/// (`tetrasim fit`, fit/README.md). Each factor scales the speed of one part of the cost model
/// relative to what the model predicts, so 1 (0 s for the overhead) leaves the model as it is.
/// The compute and communication functions read their factor from `ComputeParams` /
/// `CommParams`; `apply_factors` sets them all at once.

#include <array>
#include <optional>
#include <string_view>

namespace tetra::costmodel {

/// The factors a step-time fit can learn.
enum class Factor { gemm, attention, memory_bound, intra_node, inter_node, host, step_overhead };

inline constexpr std::array<Factor, 7> kFactors{Factor::gemm,         Factor::attention,
                                                Factor::memory_bound, Factor::intra_node,
                                                Factor::inter_node,   Factor::host,
                                                Factor::step_overhead};

/// The name used on the command line and in fitted files ("gemm", "inter_node", ...).
[[nodiscard]] const char* to_string(Factor f) noexcept;
/// Inverse of to_string; nothing for an unknown name.
[[nodiscard]] std::optional<Factor> parse_factor(std::string_view name) noexcept;

/// Values of every factor.
struct Factors {
  double gemm = 1.0;             ///< GEMM kernels run at gemm × the modelled rate
  double attention = 1.0;        ///< attention kernels (forward and backward)
  double memory_bound = 1.0;     ///< memory-bound kernels (norms, activations, optimizer, copies)
  double intra_node = 1.0;       ///< collectives and transfers inside one node (TP, and
                                 ///< CP / PP / DP groups that stay on NVLink)
  double inter_node = 1.0;       ///< collectives and transfers that cross nodes (the NICs)
  double host = 1.0;             ///< the host CPU: issuing kernels, waiting on the GPU, and the
                                 ///< data loader's workers, at host × the recorded hosts' speed
  double step_overhead_s = 0.0;  ///< fixed time added to every step (framework, host, logging)

  /// The value of one factor (seconds for step_overhead).
  [[nodiscard]] double get(Factor f) const noexcept;
  void set(Factor f, double value) noexcept;
  /// The value that leaves the model unchanged: 1, or 0 for step_overhead.
  [[nodiscard]] static double neutral(Factor f) noexcept;
  bool operator==(const Factors&) const = default;
};

struct CostParams;  // builtin_profiles.hpp

/// Sets the rate factors on both parameter sets and the step overhead on `costs` (the
/// simulator adds it to the step). Preconditions: every rate factor > 0.
void apply_factors(const Factors& factors, CostParams& costs) noexcept;

}  // namespace tetra::costmodel
