#pragma once
// CUPTI Activity recorder (CUDA 13 cupti_activity.h, docs.nvidia.com/cupti): concurrent-kernel
// records delivered through buffer callbacks, tagged with an external correlation id per timed
// iteration, so one "call" that launches several kernels (split-K, cuDNN graphs) is timed
// from its first kernel's start to its last kernel's end.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tetra::calib::gpu {

/// One kernel as CUPTI reports it (ns on the CUPTI clock).
struct KernelRecord {
  std::string name;
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  std::uint32_t correlation = 0;
  std::uint32_t stream = 0;
};

/// Process-wide CUPTI subscription (CUPTI has one activity subscriber per process).
class CuptiRecorder {
 public:
  /// Registers the buffer callbacks and enables CONCURRENT_KERNEL, RUNTIME, DRIVER and
  /// EXTERNAL_CORRELATION activity. Throws UserError when CUPTI refuses (another profiler
  /// holds the subscription, or the driver is older than CUPTI needs).
  CuptiRecorder();
  /// Disables the activity kinds and flushes.
  ~CuptiRecorder();
  CuptiRecorder(const CuptiRecorder&) = delete;
  CuptiRecorder& operator=(const CuptiRecorder&) = delete;

  /// Times `call` `iters` times after `warmup` untimed runs: each timed run is tagged with its
  /// own external id; returns the per-run spans in seconds (first kernel start to last
  /// kernel end), in run order. Synchronises the device and flushes CUPTI.
  std::vector<double> time_runs(const std::function<void()>& call, int warmup, int iters);

  /// Kernel records dropped by CUPTI since construction (buffer overflow).
  [[nodiscard]] std::size_t dropped() const;
};

}  // namespace tetra::calib::gpu
