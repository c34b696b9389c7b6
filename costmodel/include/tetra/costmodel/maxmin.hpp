#pragma once
/// Max-min fair sharing of link bandwidth between concurrent flows (progressive filling).
///
/// A flow crosses a set of resources (a NIC's send side, a peer's receive side, an NVLink
/// port). Every resource has a capacity; every flow may also have its own rate bound. The
/// max-min fair allocation raises all unfrozen flows' rates together until a resource
/// saturates or a flow reaches its bound; the flows through a saturated resource freeze, and
/// filling continues with the rest (Bertsekas & Gallager, *Data Networks*, 2nd ed., §6.5.2;
/// the same allocation SimGrid's LMM solver computes, `simgrid/simgrid: src/kernel/lmm/
/// maxmin.cpp`). Pure function: no state, no I/O.

#include <cstdint>
#include <span>
#include <vector>

namespace tetra::costmodel {

/// One flow of a sharing problem: the resources it crosses and an optional own bound.
struct MaxMinFlow {
  std::vector<std::uint32_t> resources;  ///< indices into the capacity array (may be empty)
  double bound = -1;                     ///< the flow's own rate limit; < 0 means none
};

/// Reusable work buffers so that repeated solves allocate nothing after the first call.
struct MaxMinWorkspace {
  std::vector<double> remaining;
  std::vector<std::uint32_t> active_count;
  std::vector<char> frozen;
  std::vector<std::uint32_t> used;      ///< resources crossed by a constrained flow
  std::vector<std::uint32_t> unfrozen;  ///< flows still rising, in flow order
};

/// Max-min fair rates. `capacity[r]` is resource r's capacity (same unit as the rates,
/// e.g. bytes/s, or 1.0 for "the whole link"); `rates` gets one value per flow. A flow
/// with no resources and no bound gets rate 0 (it is not limited by anything modelled;
/// callers treat that as "not a transfer"). Complexity O(R + (F·R_f + R_used)·k) with k ≤
/// number of distinct bottlenecks: each round visits only the resources some flow crosses and
/// the flows not yet frozen.
/// Precondition: every resource index < capacity.size(); capacities ≥ 0.
void max_min_rates(std::span<const double> capacity, std::span<const MaxMinFlow> flows,
                   std::vector<double>& rates, MaxMinWorkspace& work);

/// Convenience overload with its own workspace.
[[nodiscard]] std::vector<double> max_min_rates(std::span<const double> capacity,
                                                std::span<const MaxMinFlow> flows);

}  // namespace tetra::costmodel
