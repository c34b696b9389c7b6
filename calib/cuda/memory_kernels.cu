// Memory-bound kernels of a Llama layer and the optimizer, written to stream their bytes once:
// t = launch + bytes / achieved bandwidth.
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

constexpr int kRowThreads = 1024;  // cross entropy: one block per vocab row, 32 values per thread

/// Eight bf16 values in one 16-byte access: the kernels below move every byte once, in
/// 16-byte loads and stores as fused framework kernels do.
union Pack8 {
  uint4 raw;
  bf16 v[8];
};

/// Block-wide reduction of `v` with `op` (identity `id`); every thread gets the result.
template <class Op>
__device__ float block_reduce(float v, Op op, float id) {
  __shared__ float warp_part[32];
  for (int o = 16; o > 0; o /= 2) v = op(v, __shfl_xor_sync(0xffffffffU, v, o));
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int warp = static_cast<int>(threadIdx.x / 32);
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / 32) ? warp_part[lane] : id;
  for (int o = 16; o > 0; o /= 2) v = op(v, __shfl_xor_sync(0xffffffffU, v, o));
  __syncthreads();  // warp_part is reused by the next reduction
  return v;
}

struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

/// RMSNorm of rows of kHidden values: each thread keeps its 16 values in registers.
__global__ void rmsnorm_kernel(const uint4* __restrict__ x, const uint4* __restrict__ w, uint4* __restrict__ y) {
  constexpr int kPerRow = kHidden / 8;             // 16-byte packs per row
  constexpr int kPerThread = kPerRow / kThreads;   // 2
  static_assert(kPerThread * kThreads == kPerRow, "a row must split evenly over the block");
  const long long row = blockIdx.x;
  Pack8 in[kPerThread];
  float sum = 0;
  for (int j = 0; j < kPerThread; ++j) {
    in[j].raw = x[row * kPerRow + j * kThreads + threadIdx.x];
    for (float e : in[j].v) sum += e * e;
  }
  const float inv = rsqrtf(block_reduce(sum, Add{}, 0.0f) / static_cast<float>(kHidden) + 1e-5f);
  for (int j = 0; j < kPerThread; ++j) {
    Pack8 wt, out;
    wt.raw = w[j * kThreads + threadIdx.x];
    for (int e = 0; e < 8; ++e) out.v[e] = __float2bfloat16(__bfloat162float(in[j].v[e]) * inv * __bfloat162float(wt.v[e]));
    y[row * kPerRow + j * kThreads + threadIdx.x] = out.raw;
  }
}

/// SwiGLU over `packs` groups of 8: out = silu(gate) * up.
__global__ void swiglu_kernel(const uint4* __restrict__ gate, const uint4* __restrict__ up, uint4* __restrict__ out,
                              long long packs) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < packs;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    Pack8 g, u, o;
    g.raw = gate[i];
    u.raw = up[i];
    for (int e = 0; e < 8; ++e) {
      const float gv = __bfloat162float(g.v[e]);
      o.v[e] = __float2bfloat16(gv / (1.0f + __expf(-gv)) * __bfloat162float(u.v[e]));
    }
    out[i] = o.raw;
  }
}

/// In-place rotary embedding on [tokens, heads, head_dim] (pairs (i, i + d/2)); one thread
/// rotates 8 consecutive pairs of one head vector.
__global__ void rope_kernel(bf16* __restrict__ x, long long groups, int heads) {
  constexpr int half = kHeadDim / 2;
  constexpr int kGroupsPerVec = half / 8;
  for (long long g = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long vec = g / kGroupsPerVec;
    const int i0 = static_cast<int>(g % kGroupsPerVec) * 8;
    const long long token = vec / heads;
    bf16* base = x + vec * kHeadDim;
    Pack8 a, b;
    a.raw = *reinterpret_cast<const uint4*>(base + i0);
    b.raw = *reinterpret_cast<const uint4*>(base + i0 + half);
    for (int e = 0; e < 8; ++e) {
      const float angle = static_cast<float>(token % 8192) * __powf(500000.0f, -2.0f * (i0 + e) / kHeadDim);
      float sn = 0, cs = 0;
      __sincosf(angle, &sn, &cs);
      const float av = __bfloat162float(a.v[e]);
      const float bv = __bfloat162float(b.v[e]);
      a.v[e] = __float2bfloat16(av * cs - bv * sn);
      b.v[e] = __float2bfloat16(av * sn + bv * cs);
    }
    *reinterpret_cast<uint4*>(base + i0) = a.raw;
    *reinterpret_cast<uint4*>(base + i0 + half) = b.raw;
  }
}

/// Fused Adam on fp32 master weights with a bf16 copy: reads p, g, m, v; writes p, m, v and
/// the bf16 parameter (30 bytes per parameter), four parameters per thread.
__global__ void adam_kernel(float4* __restrict__ p, const float4* __restrict__ g, float4* __restrict__ m,
                            float4* __restrict__ v, uint2* __restrict__ p16, long long quads) {
  const float lr = 1e-4f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < quads;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    float4 pv = p[i], mv = m[i], vv = v[i];
    const float4 gv = g[i];
    float* pe = &pv.x;
    float* me = &mv.x;
    float* ve = &vv.x;
    const float* ge = &gv.x;
    union {
      uint2 raw;
      bf16 v[4];
    } half;
    for (int e = 0; e < 4; ++e) {
      me[e] = b1 * me[e] + (1 - b1) * ge[e];
      ve[e] = b2 * ve[e] + (1 - b2) * ge[e] * ge[e];
      pe[e] = pe[e] - lr * (me[e] / (sqrtf(ve[e]) + eps) + wd * pe[e]);
      half.v[e] = __float2bfloat16(pe[e]);
    }
    p[i] = pv;
    m[i] = mv;
    v[i] = vv;
    p16[i] = half.raw;
  }
}

/// Cross entropy forward + gradient per row of kVocab logits (softmax − one-hot, in bf16),
/// one read and one write of the row: each thread keeps its 32 logits in registers.
__global__ void cross_entropy_kernel(const uint4* __restrict__ logits, uint4* __restrict__ grad) {
  constexpr int kPerRow = kVocab / 8;
  constexpr int kPerThread = kPerRow / kRowThreads;  // 4
  static_assert(kPerThread * kRowThreads == kPerRow, "a row must split evenly over the block");
  const long long row = blockIdx.x;
  Pack8 in[kPerThread];
  float mx = -INFINITY;
  for (int j = 0; j < kPerThread; ++j) {
    in[j].raw = logits[row * kPerRow + j * kRowThreads + threadIdx.x];
    for (bf16 e : in[j].v) mx = fmaxf(mx, __bfloat162float(e));
  }
  mx = block_reduce(mx, Max{}, -INFINITY);
  float sum = 0;
  for (int j = 0; j < kPerThread; ++j) {
    for (bf16 e : in[j].v) sum += __expf(__bfloat162float(e) - mx);
  }
  const float inv = 1.0f / block_reduce(sum, Add{}, 0.0f);
  const int target = static_cast<int>(row % kVocab);
  for (int j = 0; j < kPerThread; ++j) {
    const int col0 = (j * kRowThreads + static_cast<int>(threadIdx.x)) * 8;
    Pack8 out;
    for (int e = 0; e < 8; ++e) {
      const float p = __expf(__bfloat162float(in[j].v[e]) - mx) * inv;
      out.v[e] = __float2bfloat16(p - (col0 + e == target ? 1.0f : 0.0f));
    }
    grad[row * kPerRow + j * kRowThreads + threadIdx.x] = out.raw;
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
    s_->n = static_cast<long long>(bytes / 6 / 8);  // packs of 8: read 2 bf16, write 1 each
  } else if (kernel == "rope") {
    s_->n = static_cast<long long>(bytes / 4 / 2 / 8);  // groups of 8 pairs: read + write 2 bf16 each
  } else if (kernel == "adam") {
    s_->n = static_cast<long long>(bytes / 30 / 4);  // groups of 4 parameters
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
        static_cast<const uint4*>(s.a), static_cast<const uint4*>(s.c), static_cast<uint4*>(s.b));
  } else if (s.kernel == "swiglu") {
    swiglu_kernel<<<grid_for(n), kThreads, 0, s.stream>>>(static_cast<const uint4*>(s.a),
                                                           static_cast<const uint4*>(s.b), static_cast<uint4*>(s.c), n);
  } else if (s.kernel == "rope") {
    rope_kernel<<<grid_for(n), kThreads, 0, s.stream>>>(static_cast<bf16*>(s.a), n, 32);
  } else if (s.kernel == "adam") {
    adam_kernel<<<grid_for(n), kThreads, 0, s.stream>>>(static_cast<float4*>(s.a), static_cast<const float4*>(s.b),
                                                         static_cast<float4*>(s.c), static_cast<float4*>(s.d),
                                                         static_cast<uint2*>(s.e), n);
  } else if (s.kernel == "cross_entropy") {
    cross_entropy_kernel<<<static_cast<unsigned>(n), kRowThreads, 0, s.stream>>>(static_cast<const uint4*>(s.a),
                                                                                 static_cast<uint4*>(s.b));
  }
  check_cuda(cudaGetLastError(), "kernel launch (memory-bound)");
}

}  // namespace tetra::calib::gpu
