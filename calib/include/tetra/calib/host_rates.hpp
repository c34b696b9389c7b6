#pragma once
/// The host memory rates that pace a data-loader worker (costmodel/data_loader.hpp), measured
/// on this machine by one thread: no GPU needed (`tetrasim calibrate --host`).

#include <cstddef>

namespace tetra::calib {

struct HostRates {
  /// Bytes per second written into freshly mapped anonymous memory: the page faults, the
  /// kernel zeroing each page and the write itself (what a large allocation costs on first use,
  /// e.g. every tensor of the size of an attention mask).
  double first_touch_Bps = 0;
  /// Bytes per second copied from one resident buffer into another (memcpy).
  double copy_Bps = 0;
};

/// The fastest of `repeats` passes over buffers of `bytes` each.
[[nodiscard]] HostRates measure_host_rates(std::size_t bytes, int repeats);

}  // namespace tetra::calib
