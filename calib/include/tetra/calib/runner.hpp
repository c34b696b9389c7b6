#pragma once
/// The one entry point into the GPU microbenchmarks (`tetrasim calibrate`). It is defined by
/// the GPU target `tetra::calib_cuda` when CMake finds CUDA, and otherwise by a CPU-only
/// implementation that reports that no CUDA device can be used; the CLI links whichever
/// `tetra::calib_runner` names, so no other code needs to know whether CUDA was built.

#include <functional>
#include <string>

#include "tetra/costmodel/profile.hpp"

namespace tetra::calib {

/// What `run_calibration` measures and how.
struct CalibrationOptions {
  bool gemm = true;          ///< cuBLASLt bf16 GEMM sweep (layer op-list shapes + squares)
  bool attention = true;     ///< cuDNN fused scaled-dot-product attention, fwd and bwd
  bool memory = true;        ///< memory-bound kernels (copy, RMSNorm, SwiGLU, RoPE, Adam, cross entropy)
  bool nccl = true;          ///< NCCL collective sweeps over the process groups of the job
  bool quick = false;        ///< reduced sweep that finishes within 2 minutes on one 8-GPU node
  int warmup = 5;            ///< untimed runs per shape (collectives: warm-up iterations)
  int iters = 20;            ///< timed runs per shape; the median is stored
  /// Progress notes (one line each); empty: silent. Only rank 0 of a multi-process job calls it.
  std::function<void(const std::string&)> progress;
};

/// Runs the selected microbenchmarks on this process's GPU(s) and fills `out` (meta and
/// measured rows; the fit is left to the caller). Under mpirun / srun every process must call
/// it; rows from all processes are gathered on rank 0.
/// Returns this process's rank in the calibration job (0: the process that holds the whole
/// profile and should write it).
/// Throws tetra::UserError "calibrate: no CUDA device found (cudaGetDeviceCount: <error>)"
/// when no device can be used, and other UserErrors naming the failing library call.
int run_calibration(const CalibrationOptions& options, costmodel::Profile& out);

/// True when this binary was built with the GPU target.
[[nodiscard]] bool calibration_built_with_cuda() noexcept;

}  // namespace tetra::calib
