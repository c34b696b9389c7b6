// cuBLASLt bf16 GEMM with fp32 accumulation, row-major C[M,N] = A[M,K] B[K,N] computed as the
// column-major C^T[N,M] = B^T[N,K] A^T[K,M] (no transposes needed).
#include <string>

#include <cublasLt.h>

#include "benches.hpp"
#include "check.hpp"
#include "fill.hpp"

namespace tetra::calib::gpu {
namespace {

void check_lt(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) fail(what, std::string("cuBLAS status ") + std::to_string(static_cast<int>(s)));
}

constexpr std::size_t kWorkspaceBytes = 32u << 20;

}  // namespace

struct GemmRunner::State {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
  float alpha = 1.0f, beta = 0.0f;

  void release_shape() {
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
    for (auto* l : {la, lb, lc}) {
      if (l != nullptr) cublasLtMatrixLayoutDestroy(l);
    }
    for (void* p : {a, b, c}) {
      if (p != nullptr) cudaFree(p);
    }
    op = nullptr;
    la = lb = lc = nullptr;
    a = b = c = nullptr;
  }
};

GemmRunner::GemmRunner(cudaStream_t stream) : s_(std::make_unique<State>()) {
  s_->stream = stream;
  check_lt(cublasLtCreate(&s_->handle), "cublasLtCreate");
  check_cuda(cudaMalloc(&s_->workspace, kWorkspaceBytes), "cudaMalloc (cuBLASLt workspace)");
}

GemmRunner::~GemmRunner() {
  s_->release_shape();
  cudaFree(s_->workspace);
  cublasLtDestroy(s_->handle);
}

void GemmRunner::setup(long long m, long long n, long long k) {
  auto& s = *s_;
  s.release_shape();
  const auto bytes = [](long long r, long long c) { return static_cast<std::size_t>(r) * static_cast<std::size_t>(c) * 2; };
  check_cuda(cudaMalloc(&s.a, bytes(m, k)), "cudaMalloc (GEMM A)");
  check_cuda(cudaMalloc(&s.b, bytes(k, n)), "cudaMalloc (GEMM B)");
  check_cuda(cudaMalloc(&s.c, bytes(m, n)), "cudaMalloc (GEMM C)");
  fill_uniform_bf16(s.a, bytes(m, k) / 2, 1, s.stream);
  fill_uniform_bf16(s.b, bytes(k, n) / 2, 2, s.stream);
  check_lt(cublasLtMatmulDescCreate(&s.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  // Column-major view: first operand B^T is N x K (ld N), second A^T is K x M (ld K), C^T N x M.
  check_lt(cublasLtMatrixLayoutCreate(&s.la, CUDA_R_16BF, static_cast<uint64_t>(n), static_cast<uint64_t>(k), n),
           "cublasLtMatrixLayoutCreate");
  check_lt(cublasLtMatrixLayoutCreate(&s.lb, CUDA_R_16BF, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k),
           "cublasLtMatrixLayoutCreate");
  check_lt(cublasLtMatrixLayoutCreate(&s.lc, CUDA_R_16BF, static_cast<uint64_t>(n), static_cast<uint64_t>(m), n),
           "cublasLtMatrixLayoutCreate");
  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const std::size_t ws = kWorkspaceBytes;
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
           "cublasLtMatmulPreferenceSetAttribute");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const auto st = cublasLtMatmulAlgoGetHeuristic(s.handle, s.op, s.la, s.lb, s.lc, s.lc, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  check_lt(st, "cublasLtMatmulAlgoGetHeuristic");
  if (found == 0) {
    fail("cublasLtMatmulAlgoGetHeuristic", "no algorithm for " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                                               std::to_string(k));
  }
  s.algo = result.algo;
}

void GemmRunner::launch() {
  auto& s = *s_;
  check_lt(cublasLtMatmul(s.handle, s.op, &s.alpha, s.b, s.la, s.a, s.lb, &s.beta, s.c, s.lc, s.c, s.lc, &s.algo,
                          s.workspace, kWorkspaceBytes, s.stream),
           "cublasLtMatmul");
}

std::string GemmRunner::version() {
  const std::size_t v = cublasLtGetVersion();  // major * 10000 + minor * 100 + patch
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
}

}  // namespace tetra::calib::gpu
