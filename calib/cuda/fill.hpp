#pragma once
// Operands of the timed GEMM and attention calls. Tensor cores draw less power on zeros than on
// trained-model data and then hold a higher clock, so zero-filled operands overstate the rate a
// training step sees (NVIDIA H100 SXM, cuBLASLt bf16 4096^3: 899 TFLOP/s on zeros, 803 on data).

#include <cstddef>

#include <cuda_runtime.h>

namespace tetra::calib::gpu {

/// Fills `count` bf16 values with a fixed pseudo-random sequence, uniform in [-1, 1).
void fill_uniform_bf16(void* data, std::size_t count, unsigned seed, cudaStream_t stream = nullptr);

}  // namespace tetra::calib::gpu
