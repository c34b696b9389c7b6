#pragma once
// Error checks of the GPU target: every failing library call becomes a one-line
// tetra::UserError "calibrate: <call>: <library's error string>".

#include <string>

#include <cuda_runtime.h>

#include "tetra/base/error.hpp"

namespace tetra::calib::gpu {

[[noreturn]] inline void fail(const std::string& what, const std::string& why) {
  throw UserError("calibrate: " + what + ": " + why);
}

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail(what, cudaGetErrorString(e));
}

}  // namespace tetra::calib::gpu
