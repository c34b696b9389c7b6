// Memory-bound kernels of a Llama layer and the optimizer, written to stream their bytes once
// (reference/costmodels.md section 6.3): t = launch + bytes / achieved bandwidth.
#include <algorithm>
#include <cmath>

#include <cuda_bf16.h>

#include "benches.hpp"
#include "check.hpp"

namespace tetra::calib::gpu {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kHidden = 4096;   // RMSNorm row length (Llama-3.1-8B hidden)
constexpr int kHeadDim = 128;   // RoPE head dimension
constexpr int kVocab = 32768;   // cross-entropy row length (one vocab-parallel shard)
constexpr int kThreads = 256;

__global__ void copy_kernel(const uint4* __restrict__ in, uint4* __restrict__ out, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    out[i] = in[i];
  }
}

__global__ void rmsnorm_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w, bf16* __restrict__ y,
                               int cols) {
  const long long row = blockIdx.x;
  const bf16* xr = x + row * cols;
  bf16* yr = y + row * cols;
  __shared__ float partial[kThreads];
  float sum = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = __bfloat162float(xr[c]);
    sum += v * v;
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  const float inv = rsqrtf(partial[0] / static_cast<float>(cols) + 1e-5f);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    yr[c] = __float2bfloat16(__bfloat162float(xr[c]) * inv * __bfloat162float(w[c]));
  }
}

__global__ void swiglu_kernel(const bf16* __restrict__ gate, const bf16* __restrict__ up, bf16* __restrict__ out,
                              long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const float g = __bfloat162float(gate[i]);
    out[i] = __float2bfloat16(g / (1.0f + __expf(-g)) * __bfloat162float(up[i]));
  }
}

/// In-place rotary embedding on [tokens, heads, head_dim] (pairs (i, i + d/2)).
__global__ void rope_kernel(bf16* __restrict__ x, long long pairs, int heads) {
  const int half = kHeadDim / 2;
  for (long long p = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; p < pairs;
       p += static_cast<long long>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(p % half);
    const long long vec = p / half;
    const long long token = vec / heads;
    const float angle = static_cast<float>(token % 8192) * __powf(500000.0f, -2.0f * i / kHeadDim);
    float s = 0, c = 0;
    __sincosf(angle, &s, &c);
    bf16* base = x + vec * kHeadDim;
    const float a = __bfloat162float(base[i]);
    const float b = __bfloat162float(base[i + half]);
    base[i] = __float2bfloat16(a * c - b * s);
    base[i + half] = __float2bfloat16(a * s + b * c);
  }
}

/// Fused Adam on fp32 master weights with a bf16 copy: reads p, g, m, v; writes p, m, v and
/// the bf16 parameter (30 bytes per parameter).
__global__ void adam_kernel(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m,
                            float* __restrict__ v, bf16* __restrict__ p16, long long n) {
  const float lr = 1e-4f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const float gi = g[i];
    const float mi = b1 * m[i] + (1 - b1) * gi;
    const float vi = b2 * v[i] + (1 - b2) * gi * gi;
    const float pi = p[i] - lr * (mi / (sqrtf(vi) + eps) + wd * p[i]);
    m[i] = mi;
    v[i] = vi;
    p[i] = pi;
    p16[i] = __float2bfloat16(pi);
  }
}

/// Cross entropy forward + gradient per row of logits: softmax - one-hot, written in bf16.
__global__ void cross_entropy_kernel(const bf16* __restrict__ logits, bf16* __restrict__ grad, int cols) {
  const long long row = blockIdx.x;
  const bf16* lr = logits + row * cols;
  bf16* gr = grad + row * cols;
  __shared__ float red[kThreads];
  float mx = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) mx = fmaxf(mx, __bfloat162float(lr[c]));
  red[threadIdx.x] = mx;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  mx = red[0];
  __syncthreads();
  float sum = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += __expf(__bfloat162float(lr[c]) - mx);
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  const float inv = 1.0f / red[0];
  const int target = static_cast<int>(row % cols);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float p = __expf(__bfloat162float(lr[c]) - mx) * inv;
    gr[c] = __float2bfloat16(p - (c == target ? 1.0f : 0.0f));
  }
}

int grid_for(long long n) {
  return static_cast<int>(std::clamp<long long>((n + kThreads - 1) / kThreads, 1, 65535LL * 8));
}

}  // namespace

struct MemoryRunner::State {
  cudaStream_t stream = nullptr;
  double max_bytes = 0;
  void* a = nullptr;  // each buffer holds max_bytes / 2 (bytes moved are at least read + write)
  void* b = nullptr;
  void* c = nullptr;
  void* d = nullptr;
  void* e = nullptr;
  std::string kernel;
  long long n = 0;
};

MemoryRunner::MemoryRunner(double max_bytes, cudaStream_t stream) : s_(std::make_unique<State>()) {
  s_->stream = stream;
  s_->max_bytes = max_bytes;
  const auto half = static_cast<std::size_t>(max_bytes / 2) + 4096;
  for (void** p : {&s_->a, &s_->b, &s_->c, &s_->d, &s_->e}) {
    check_cuda(cudaMalloc(p, half), "cudaMalloc (memory-bound buffers)");
    check_cuda(cudaMemset(*p, 0, half), "cudaMemset");
  }
}

MemoryRunner::~MemoryRunner() {
  for (void* p : {s_->a, s_->b, s_->c, s_->d, s_->e}) cudaFree(p);
}

void MemoryRunner::setup(const std::string& kernel, double bytes) {
  if (bytes > s_->max_bytes) fail("memory-bound " + kernel, "size above the allocated buffers");
  s_->kernel = kernel;
  // Elements from bytes moved (read + write) per kernel, as the kernels above access them.
  if (kernel == "copy") {
    s_->n = static_cast<long long>(bytes / 2 / 16);  // 16-byte vectors read and written
  } else if (kernel == "rmsnorm") {
    s_->n = std::max<long long>(1, static_cast<long long>(bytes / 4 / kHidden));  // rows
  } else if (kernel == "swiglu") {
    s_->n = static_cast<long long>(bytes / 6);  // read 2 bf16, write 1
  } else if (kernel == "rope") {
    s_->n = static_cast<long long>(bytes / 4 / 2);  // pairs: read + write 2 bf16 each
  } else if (kernel == "adam") {
    s_->n = static_cast<long long>(bytes / 30);
  } else if (kernel == "cross_entropy") {
    s_->n = std::max<long long>(1, static_cast<long long>(bytes / 4 / kVocab));  // rows
  } else {
    fail("memory-bound kernel", "unknown kernel '" + kernel + "'");
  }
}

void MemoryRunner::launch() {
  const auto& s = *s_;
  const auto n = s.n;
  if (s.kernel == "copy") {
    copy_kernel<<<grid_for(n), kThreads, 0, s.stream>>>(static_cast<const uint4*>(s.a), static_cast<uint4*>(s.b), n);
  } else if (s.kernel == "rmsnorm") {
    rmsnorm_kernel<<<static_cast<unsigned>(n), kThreads, 0, s.stream>>>(
        static_cast<const bf16*>(s.a), static_cast<const bf16*>(s.c), static_cast<bf16*>(s.b), kHidden);
  } else if (s.kernel == "swiglu") {
    swiglu_kernel<<<grid_for(n), kThreads, 0, s.stream>>>(static_cast<const bf16*>(s.a), static_cast<const bf16*>(s.b),
                                                           static_cast<bf16*>(s.c), n);
  } else if (s.kernel == "rope") {
    rope_kernel<<<grid_for(n), kThreads, 0, s.stream>>>(static_cast<bf16*>(s.a), n, 32);
  } else if (s.kernel == "adam") {
    adam_kernel<<<grid_for(n), kThreads, 0, s.stream>>>(static_cast<float*>(s.a), static_cast<const float*>(s.b),
                                                         static_cast<float*>(s.c), static_cast<float*>(s.d),
                                                         static_cast<bf16*>(s.e), n);
  } else if (s.kernel == "cross_entropy") {
    cross_entropy_kernel<<<static_cast<unsigned>(n), kThreads, 0, s.stream>>>(static_cast<const bf16*>(s.a),
                                                                              static_cast<bf16*>(s.b), kVocab);
  }
  check_cuda(cudaGetLastError(), "kernel launch (memory-bound)");
}

}  // namespace tetra::calib::gpu
