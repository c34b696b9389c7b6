#pragma once
/// The worker pool of `tetrasim search`, also used by the step fit: indices handed out from a
/// shared counter, so uneven work items balance themselves.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tetra::search {

/// Progress of a parallel phase: (items done so far, items in all).
using ProgressFn = std::function<void(std::size_t done, std::size_t total)>;

/// `requested` workers, or std::thread::hardware_concurrency() (at least 1) when 0 or less.
[[nodiscard]] inline int resolve_threads(int requested) {
  if (requested > 0) return requested;
  const unsigned hc = std::thread::hardware_concurrency();
  return hc > 0 ? static_cast<int>(hc) : 1;
}

/// Runs fn(worker, index) for index in [0, n) on `threads` workers that pull indices from a
/// shared counter. The first exception (by index) is rethrown after every worker stopped.
/// `progress`, when set, is called from the calling thread while the workers run.
template <typename Fn>
void parallel_for(std::size_t n, int threads, Fn&& fn, const ProgressFn& progress = {}) {
  if (n == 0) {
    if (progress) progress(0, 0);
    return;
  }
  const int workers = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(threads), n));
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> done{0};
  std::mutex error_mutex;
  std::size_t error_index = n;
  std::exception_ptr error;
  auto work = [&](int worker) {
    for (;;) {
      const std::size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= n) return;
      try {
        fn(worker, i);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(error_mutex);
        if (i < error_index) {
          error_index = i;
          error = std::current_exception();
        }
        next.store(n, std::memory_order_relaxed);  // stop handing out work
      }
      done.fetch_add(1, std::memory_order_release);
    }
  };
  if (workers == 1 && !progress) {
    work(0);
  } else {
    std::vector<std::jthread> pool;
    pool.reserve(static_cast<std::size_t>(workers));
    for (int w = 0; w < workers; ++w) pool.emplace_back(work, w);
    if (progress) {
      while (done.load(std::memory_order_acquire) < n && !error) {
        progress(done.load(std::memory_order_acquire), n);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (next.load(std::memory_order_relaxed) >= n &&
            done.load(std::memory_order_acquire) >= n) {
          break;
        }
      }
    }
    pool.clear();  // joins
    if (progress) progress(done.load(), n);
  }
  if (error) std::rethrow_exception(error);
}


}  // namespace tetra::search
