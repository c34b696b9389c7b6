#pragma once
// CollectiveProbe over NCCL (nccl-tests timing and busbw conventions).

#include <memory>
#include <string>
#include <vector>

#include "tetra/calib/sweep.hpp"
#include "world.hpp"

namespace tetra::calib::gpu {

class NcclProbe final : public CollectiveProbe {
 public:
  /// Creates the communicators of every group shape (see nccl_probe.cpp) and buffers of
  /// `max_bytes` per GPU for sending and receiving.
  NcclProbe(const World& world, double max_bytes, int warmup, int iters);
  ~NcclProbe() override;
  NcclProbe(const NcclProbe&) = delete;
  NcclProbe& operator=(const NcclProbe&) = delete;
  [[nodiscard]] std::vector<GroupShape> groups() const override;
  [[nodiscard]] double seconds(const std::string& op, const GroupShape& group, double bytes) override;
  /// NCCL version as "major.minor.patch".
  [[nodiscard]] static std::string version();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tetra::calib::gpu
