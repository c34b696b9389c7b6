// Pseudo-random bf16 operands for the timed kernels (fill.hpp).
#include <algorithm>

#include <cuda_bf16.h>

#include "check.hpp"
#include "fill.hpp"

namespace tetra::calib::gpu {
namespace {

/// A 32-bit integer hash with full avalanche (the "lowbias32" finaliser).
__device__ unsigned hash32(unsigned x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

__global__ void fill_kernel(__nv_bfloat16* __restrict__ out, unsigned long long n, unsigned seed) {
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<unsigned long long>(gridDim.x) * blockDim.x) {
    const unsigned h = hash32(static_cast<unsigned>(i) ^ hash32(static_cast<unsigned>(i >> 32) + seed * 0x9e3779b9U));
    const float u = static_cast<float>(h >> 8) * (1.0f / 16777216.0f);  // [0, 1)
    out[i] = __float2bfloat16(2.0f * u - 1.0f);
  }
}

}  // namespace

void fill_uniform_bf16(void* data, std::size_t count, unsigned seed, cudaStream_t stream) {
  if (count == 0) return;
  constexpr int kThreads = 256;
  const auto blocks = static_cast<int>(std::min<std::size_t>((count + kThreads - 1) / kThreads, 65535U * 8U));
  fill_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(data), count, seed);
  check_cuda(cudaGetLastError(), "kernel launch (operand fill)");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (operand fill)");
}

}  // namespace tetra::calib::gpu
