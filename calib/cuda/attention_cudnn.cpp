// Fused scaled-dot-product attention through cuDNN's graph (backend) API: one
// CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR or ..._SDPA_BWD_DESCRIPTOR node, bf16 Q/K/V/O in
// [batch, heads, seq, head_dim] layout, fp32 softmax statistics, GQA through K/V having fewer
// heads than Q. The single-node SDPA operation carries no causal mask, so every call is timed
// as full (non-causal) attention and reported as such.
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include <cudnn.h>

#include "benches.hpp"
#include "check.hpp"

namespace tetra::calib::gpu {
namespace {

void check_dnn(cudnnStatus_t s, const char* what) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  char last[256] = {0};
  cudnnGetLastErrorString(last, sizeof last);
  fail(what, std::string(cudnnGetErrorString(s)) + (last[0] != 0 ? std::string(" (") + last + ")" : ""));
}

/// Owns one backend descriptor.
class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) {
    check_dnn(cudnnBackendCreateDescriptor(type, &d_), "cudnnBackendCreateDescriptor");
  }
  ~Desc() {
    if (d_ != nullptr) cudnnBackendDestroyDescriptor(d_);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  Desc(Desc&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
  Desc& operator=(Desc&& o) noexcept {
    std::swap(d_, o.d_);
    return *this;
  }
  cudnnBackendDescriptor_t get() const { return d_; }
  template <typename T>
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T* values, int64_t count,
           const char* what) {
    check_dnn(cudnnBackendSetAttribute(d_, name, type, count, values), what);
  }
  void set_desc(cudnnBackendAttributeName_t name, const Desc& other, const char* what) {
    cudnnBackendDescriptor_t h = other.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &h, 1, what);
  }
  void finalize(const char* what) { check_dnn(cudnnBackendFinalize(d_), what); }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

/// A packed [b, h, s, d] tensor descriptor.
Desc tensor(int64_t uid, cudnnDataType_t type, std::array<int64_t, 4> dims, bool by_value = false) {
  Desc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const std::array<int64_t, 4> strides = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
  const int64_t align = 16;
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type, 1, "tensor data type");
  t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), 4, "tensor dimensions");
  t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), 4, "tensor strides");
  t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid, 1, "tensor uid");
  t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &align, 1, "tensor alignment");
  if (by_value) {
    const bool yes = true;
    t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &yes, 1, "tensor by value");
  }
  t.finalize("cudnnBackendFinalize (tensor)");
  return t;
}

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kScale, kDO, kDQ, kDK, kDV };

}  // namespace

struct AttentionRunner::State {
  cudaStream_t stream = nullptr;
  cudnnHandle_t handle = nullptr;
  std::vector<void*> buffers;
  void* workspace = nullptr;
  Desc plan{CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR};
  Desc pack{CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR};
  float scale = 1.0f;

  void release() {
    for (void* p : buffers) cudaFree(p);
    buffers.clear();
    if (workspace != nullptr) cudaFree(workspace);
    workspace = nullptr;
  }
  void* alloc(std::size_t bytes) {
    void* p = nullptr;
    check_cuda(cudaMalloc(&p, bytes), "cudaMalloc (attention)");
    check_cuda(cudaMemset(p, 0, bytes), "cudaMemset");
    buffers.push_back(p);
    return p;
  }
};

AttentionRunner::AttentionRunner(cudaStream_t stream) : s_(std::make_unique<State>()) {
  s_->stream = stream;
  check_dnn(cudnnCreate(&s_->handle), "cudnnCreate");
  check_dnn(cudnnSetStream(s_->handle, stream), "cudnnSetStream");
}

AttentionRunner::~AttentionRunner() {
  s_->release();
  cudnnDestroy(s_->handle);
}

bool AttentionRunner::available() { return true; }

std::string AttentionRunner::version() {
  const std::size_t v = cudnnGetVersion();  // major * 10000 + minor * 100 + patch (cuDNN 9)
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
}

void AttentionRunner::setup(const costmodel::AttentionRow& r) {
  auto& s = *s_;
  s.release();
  if (r.heads <= 0 || r.kv_heads <= 0 || r.heads % r.kv_heads != 0) fail("attention", "heads must be a multiple of kv_heads");
  const std::array<int64_t, 4> qd = {r.batch, r.heads, r.seq, r.head_dim};
  const std::array<int64_t, 4> kd = {r.batch, r.kv_heads, r.seq, r.head_dim};
  const std::array<int64_t, 4> sd = {r.batch, r.heads, r.seq, 1};
  const auto elems = [](const std::array<int64_t, 4>& d) { return static_cast<std::size_t>(d[0] * d[1] * d[2] * d[3]); };
  const bool bwd = r.pass == costmodel::AttentionPass::bwd;
  s.scale = 1.0f / std::sqrt(static_cast<float>(r.head_dim));

  auto q = tensor(kQ, CUDNN_DATA_BFLOAT16, qd);
  auto k = tensor(kK, CUDNN_DATA_BFLOAT16, kd);
  auto v = tensor(kV, CUDNN_DATA_BFLOAT16, kd);
  auto o = tensor(kO, CUDNN_DATA_BFLOAT16, qd);
  auto stats = tensor(kStats, CUDNN_DATA_FLOAT, sd);
  auto scale = tensor(kScale, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, true);
  std::vector<int64_t> uids = {kQ, kK, kV, kO, kStats, kScale};
  std::vector<void*> ptrs = {s.alloc(elems(qd) * 2), s.alloc(elems(kd) * 2), s.alloc(elems(kd) * 2),
                             s.alloc(elems(qd) * 2), s.alloc(elems(sd) * 4), &s.scale};

  Desc op(bwd ? CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR : CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR);
  if (!bwd) {
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, q, "SDPA fwd Q");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, k, "SDPA fwd K");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, v, "SDPA fwd V");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, o, "SDPA fwd O");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC, stats, "SDPA fwd stats");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, scale, "SDPA fwd scale");
    op.finalize("cudnnBackendFinalize (SDPA forward)");
  }
  // Backward tensors (declared outside the branch so they live until the graph is final).
  auto dout = tensor(kDO, CUDNN_DATA_BFLOAT16, qd);
  auto dq = tensor(kDQ, CUDNN_DATA_BFLOAT16, qd);
  auto dk = tensor(kDK, CUDNN_DATA_BFLOAT16, kd);
  auto dv = tensor(kDV, CUDNN_DATA_BFLOAT16, kd);
  if (bwd) {
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_QDESC, q, "SDPA bwd Q");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_KDESC, k, "SDPA bwd K");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_VDESC, v, "SDPA bwd V");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_ODESC, o, "SDPA bwd O");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_STATSDESC, stats, "SDPA bwd stats");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_SCALEDESC, scale, "SDPA bwd scale");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_DODDESC, dout, "SDPA bwd dO");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_DQDESC, dq, "SDPA bwd dQ");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_DKDESC, dk, "SDPA bwd dK");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_DVDESC, dv, "SDPA bwd dV");
    op.finalize("cudnnBackendFinalize (SDPA backward)");
    for (int64_t uid : {kDO, kDQ, kDK, kDV}) uids.push_back(uid);
    for (std::size_t bytes : {elems(qd) * 2, elems(qd) * 2, elems(kd) * 2, elems(kd) * 2}) ptrs.push_back(s.alloc(bytes));
  }

  Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  cudnnBackendDescriptor_t op_handle = op.get();
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, &op_handle, 1, "graph ops");
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &s.handle, 1, "graph handle");
  graph.finalize("cudnnBackendFinalize (operation graph)");

  Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph, "heuristic graph");
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode, 1, "heuristic mode");
  heur.finalize("cudnnBackendFinalize (engine heuristics)");
  Desc cfg(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  cudnnBackendDescriptor_t cfg_handle = cfg.get();
  int64_t returned = 0;
  check_dnn(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                     &returned, &cfg_handle),
            "engine heuristics results");
  if (returned < 1) fail("cuDNN SDPA", "no engine supports this attention shape");

  s.plan = Desc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  s.plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &s.handle, 1, "plan handle");
  s.plan.set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg, "plan engine config");
  s.plan.finalize("cudnnBackendFinalize (execution plan)");
  int64_t ws = 0;
  check_dnn(cudnnBackendGetAttribute(s.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                     &returned, &ws),
            "plan workspace size");
  if (ws > 0) check_cuda(cudaMalloc(&s.workspace, static_cast<std::size_t>(ws)), "cudaMalloc (cuDNN workspace)");

  s.pack = Desc(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  s.pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.data(), static_cast<int64_t>(uids.size()),
             "variant pack uids");
  s.pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, ptrs.data(),
             static_cast<int64_t>(ptrs.size()), "variant pack pointers");
  s.pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &s.workspace, 1, "variant pack workspace");
  s.pack.finalize("cudnnBackendFinalize (variant pack)");
}

void AttentionRunner::launch() {
  check_dnn(cudnnBackendExecute(s_->handle, s_->plan.get(), s_->pack.get()), "cudnnBackendExecute (SDPA)");
}

}  // namespace tetra::calib::gpu
