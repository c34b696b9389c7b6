// Host memory rates of one thread (host_rates.hpp). POSIX: mmap gives fresh pages the way
// glibc serves an allocation above its mmap threshold (32 MiB at most, malloc(3) M_MMAP_THRESHOLD).

#include "tetra/calib/host_rates.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

namespace tetra::calib {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Writes `bytes` into a fresh anonymous mapping and unmaps it; the seconds it took.
double first_touch_pass(std::size_t bytes) {
  const auto t0 = std::chrono::steady_clock::now();
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
  std::memset(p, 1, bytes);
  const double s = seconds_since(t0);
  munmap(p, bytes);
  return s;
}

}  // namespace

HostRates measure_host_rates(std::size_t bytes, int repeats) {
  bytes = std::max<std::size_t>(bytes, 1 << 20);
  repeats = std::max(repeats, 1);
  double fresh = std::numeric_limits<double>::infinity();
  double copy = std::numeric_limits<double>::infinity();
  std::vector<char> a(bytes, 1), b(bytes, 2);  // resident: touched here
  for (int r = 0; r < repeats; ++r) {
    fresh = std::min(fresh, first_touch_pass(bytes));
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    copy = std::min(copy, seconds_since(t0));
    a[static_cast<std::size_t>(r) % bytes] = b[bytes - 1];  // keep the copy observable
  }
  return {static_cast<double>(bytes) / fresh, static_cast<double>(bytes) / copy};
}

}  // namespace tetra::calib
