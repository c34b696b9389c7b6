#pragma once
// The GPU workloads a calibration times: cuBLASLt GEMMs, cuDNN attention and the memory-bound
// kernels of a Llama layer. Each runner owns its device buffers; `setup` prepares one shape
// and `launch` enqueues one call on the runner's stream (timed by CuptiRecorder).

#include <memory>
#include <string>

#include <cuda_runtime.h>

#include "tetra/costmodel/profile.hpp"

namespace tetra::calib::gpu {

/// C[M,N] = A[M,K] B[K,N] in bf16 with fp32 accumulation (cuBLASLt, first heuristic algorithm).
class GemmRunner {
 public:
  explicit GemmRunner(cudaStream_t stream);
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;
  void setup(long long m, long long n, long long k);
  void launch();
  /// cuBLASLt version as "major.minor.patch".
  [[nodiscard]] static std::string version();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

/// Fused scaled-dot-product attention (cuDNN graph API), causal, GQA, forward or backward.
class AttentionRunner {
 public:
  explicit AttentionRunner(cudaStream_t stream);
  ~AttentionRunner();
  AttentionRunner(const AttentionRunner&) = delete;
  AttentionRunner& operator=(const AttentionRunner&) = delete;
  /// False when this build has no cuDNN (attention rows are then skipped).
  [[nodiscard]] static bool available();
  /// Builds and plans the graph for `shape`; throws UserError when cuDNN supports no engine.
  void setup(const costmodel::AttentionRow& shape);
  void launch();
  [[nodiscard]] static std::string version();
  /// Whether the call prepared by the last `setup` applies the causal mask (false when the
  /// shape asked for full attention or only the unmasked SDPA node could be planned).
  [[nodiscard]] bool timed_causal() const { return causal_; }

 private:
  struct State;
  std::unique_ptr<State> s_;
  bool causal_ = false;
};

/// Memory-bound kernels written here: copy, rmsnorm, swiglu, rope, adam, cross_entropy.
/// `bytes` is what the kernel reads plus writes; the element count follows from it.
class MemoryRunner {
 public:
  /// Allocates buffers for calls of up to `max_bytes` moved.
  MemoryRunner(double max_bytes, cudaStream_t stream);
  ~MemoryRunner();
  MemoryRunner(const MemoryRunner&) = delete;
  MemoryRunner& operator=(const MemoryRunner&) = delete;
  void setup(const std::string& kernel, double bytes);
  void launch();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace tetra::calib::gpu
