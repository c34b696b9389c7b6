#include "tetra/costmodel/data_loader.hpp"

#include <algorithm>

namespace tetra::costmodel {

LoaderSampleBytes loader_sample_bytes(parallel::LoaderMask mask, double seq_len) noexcept {
  const double s2 = seq_len * seq_len;
  switch (mask) {
    case parallel::LoaderMask::per_sample: return {10.0 * s2, 9.0 * s2, s2};
    case parallel::LoaderMask::cached: return {s2, s2, s2};
    case parallel::LoaderMask::none: break;
  }
  return {};
}

double loader_seconds_per_micro_batch(const parallel::Training& training, const parallel::Layout& layout,
                                      const hw::Host& host) noexcept {
  const LoaderSampleBytes b = loader_sample_bytes(parallel::loader_mask(training), training.seq_len);
  if (host.first_touch_Bps <= 0 || host.copy_Bps <= 0) return 0;  // no rates: nothing to price
  const double mbs = std::max(layout.mbs, 1);
  const double build = mbs * (b.fresh / host.first_touch_Bps + b.resident / host.copy_Bps);
  const double pin = mbs * b.pinned / host.copy_Bps;
  if (training.dataloader_workers <= 0) return build + pin;
  return std::max(build / training.dataloader_workers, pin);
}

}  // namespace tetra::costmodel
