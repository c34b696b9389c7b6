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
  /// `max_bytes` per GPU for sending and receiving. Communicators of forced variants are made
  /// on first use, one set at a time.
  NcclProbe(const World& world, double max_bytes, int warmup, int iters);
  ~NcclProbe() override;
  NcclProbe(const NcclProbe&) = delete;
  NcclProbe& operator=(const NcclProbe&) = delete;
  [[nodiscard]] std::vector<GroupShape> groups() const override;
  [[nodiscard]] double seconds(const std::string& op, const GroupShape& group, double bytes) override;
  /// Times `op` on communicators made with NCCL_ALGO / NCCL_PROTO set to `variant`;
  /// `variant_unsupported` when NCCL rejects the variant over `group` (every process agrees).
  [[nodiscard]] double variant_seconds(const std::string& op, const GroupShape& group, double bytes,
                                       const CollectiveVariant& variant) override;
  /// NCCL version as "major.minor.patch".
  [[nodiscard]] static std::string version();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tetra::calib::gpu
