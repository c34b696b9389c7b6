// Fused scaled-dot-product attention through cuDNN's graph (backend) API, bf16 Q/K/V/O in
// [batch, heads, seq, head_dim] layout, fp32 softmax statistics, GQA through K/V having fewer
// heads than Q (the batched matmuls broadcast a K/V head over heads / kv_heads query heads; the
// backward sums dK and dV over that group with a reduction).
//
// The operation graph is the "fused flash attention" pattern that cuDNN's runtime-fused SDPA
// engines recognise, written out op by op as cudnn-frontend lowers its sdpa / sdpa_backward
// nodes (NVIDIA/cudnn-frontend: include/cudnn_frontend/node/scaled_dot_product_flash_attention.h,
// CompositeSDPANode and CompositeSDPABackwardNode; node/softmax.h; node/diagonal_band_mask.h;
// utils/attn_score_modifiers.h):
//   forward   S = Q @ K^T * scale, causal mask (row index >= column index keeps the score, else
//             -inf), softmax with stats = max + log(sum exp), O = P @ V.
//   backward  softmax_sum = rowsum(dO .* O); P = exp(mask(Q @ K^T * scale) - stats);
//             dV = P^T @ dO; dS = P .* (dO @ V^T - softmax_sum) * scale; dK = dS^T @ Q; dQ = dS @ K.
// A row that asks for full attention gets the same graph without the mask. When no engine plans
// the masked graph, the unmasked single-node SDPA operation (OPERATION_SDPA_FWD / SDPA_BWD,
// which has no causal mask) is timed instead and the row is recorded as non-causal
// (AttentionRunner::timed_causal).
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <cudnn.h>

#include "benches.hpp"
#include "check.hpp"
#include "fill.hpp"

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
  void set_desc(cudnnBackendAttributeName_t name, cudnnBackendDescriptor_t other, const char* what) {
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &other, 1, what);
  }
  void set_desc(cudnnBackendAttributeName_t name, const Desc& other, const char* what) {
    set_desc(name, other.get(), what);
  }
  void finalize(const char* what) { check_dnn(cudnnBackendFinalize(d_), what); }
  /// Destroys the descriptor now (before the handle it was planned on).
  void reset() {
    if (d_ != nullptr) cudnnBackendDestroyDescriptor(d_);
    d_ = nullptr;
  }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

using Dims = std::array<int64_t, 4>;

Dims packed(const Dims& d) { return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}; }
std::size_t elems(const Dims& d) { return static_cast<std::size_t>(d[0] * d[1] * d[2] * d[3]); }

/// A tensor of a graph under construction: its descriptor and shape.
struct Tensor {
  cudnnBackendDescriptor_t desc = nullptr;
  Dims dims{};
  Dims strides{};
};

/// The operations of one cuDNN operation graph. Owns every descriptor it creates (tensors,
/// operations, the graph) so they outlive the execution plan built from them.
class GraphBuilder {
 public:
  /// A 4-d tensor; non-virtual tensors are bound by `uid` in the variant pack.
  Tensor tensor(int64_t uid, cudnnDataType_t type, const Dims& dims, const Dims& strides, bool is_virtual = false,
                bool by_value = false) {
    Desc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t align = 16;
    t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type, 1, "tensor data type");
    t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), 4, "tensor dimensions");
    t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), 4, "tensor strides");
    t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid, 1, "tensor uid");
    t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &align, 1, "tensor alignment");
    if (is_virtual) {
      const bool yes = true;
      t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &yes, 1, "tensor virtual");
    }
    if (by_value) {
      const bool yes = true;
      t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &yes, 1, "tensor by value");
    }
    t.finalize("cudnnBackendFinalize (tensor)");
    return Tensor{keep(std::move(t)), dims, strides};
  }
  /// A host fp32 scalar passed by value, broadcast over every dimension.
  Tensor scalar(int64_t uid) { return tensor(uid, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true); }
  /// An intermediate tensor that never reaches memory.
  Tensor virt(cudnnDataType_t type, const Dims& dims, const Dims& strides) {
    return tensor(next_virtual_uid_++, type, dims, strides, true);
  }
  Tensor virt(cudnnDataType_t type, const Dims& dims) { return virt(type, dims, packed(dims)); }

  /// y = mode(x[, b[, t]]), computed in `precision`; `axis` only for GEN_INDEX.
  void pointwise(cudnnPointwiseMode_t mode, const Tensor& x, const Tensor* b, const Tensor* t, const Tensor& y,
                 cudnnDataType_t precision = CUDNN_DATA_FLOAT, int64_t axis = -1) {
    Desc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode, 1, "pointwise mode");
    pw.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &precision, 1, "pointwise precision");
    if (mode == CUDNN_POINTWISE_GEN_INDEX) pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, &axis, 1, "gen-index axis");
    pw.finalize("cudnnBackendFinalize (pointwise)");
    Desc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw, "pointwise descriptor");
    op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x.desc, "pointwise x");
    if (b != nullptr) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b->desc, "pointwise b");
    if (t != nullptr) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t->desc, "pointwise t");
    op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y.desc, "pointwise y");
    const float one = 1.0f;
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, &one, 1, "pointwise alpha1");
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, &one, 1, "pointwise alpha2");
    op.finalize("cudnnBackendFinalize (pointwise operation)");
    keep(std::move(pw));
    add_op(std::move(op));
  }
  /// A new virtual tensor of x's shape = mode(x[, b]).
  Tensor pointwise(cudnnPointwiseMode_t mode, const Tensor& x, const Tensor* b = nullptr,
                   cudnnDataType_t out_type = CUDNN_DATA_FLOAT) {
    Tensor y = virt(out_type, x.dims, x.strides);
    pointwise(mode, x, b, nullptr, y);
    return y;
  }

  /// c = a * b over the last two dimensions, batched (and broadcast) over the first two; fp32 accumulation.
  void matmul(const Tensor& a, const Tensor& b, const Tensor& c) {
    Desc mm(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    mm.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &comp, 1, "matmul compute type");
    mm.finalize("cudnnBackendFinalize (matmul)");
    Desc op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a.desc, "matmul a");
    op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b.desc, "matmul b");
    op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c.desc, "matmul c");
    op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm, "matmul descriptor");
    op.finalize("cudnnBackendFinalize (matmul operation)");
    keep(std::move(mm));
    add_op(std::move(op));
  }

  /// y = reduce(x) down to the dimensions of y (extent 1, or kv_heads from heads), in fp32.
  void reduction(cudnnReduceTensorOp_t mode, const Tensor& x, const Tensor& y) {
    Desc red(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    red.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &mode, 1, "reduction operator");
    red.set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &comp, 1, "reduction compute type");
    red.finalize("cudnnBackendFinalize (reduction)");
    Desc op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, red, "reduction descriptor");
    op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x.desc, "reduction x");
    op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y.desc, "reduction y");
    op.finalize("cudnnBackendFinalize (reduction operation)");
    keep(std::move(red));
    add_op(std::move(op));
  }

  /// y = x seen with y's dimensions and strides (a transposed view, no data movement).
  void reshape(const Tensor& x, const Tensor& y) {
    Desc op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x.desc, "reshape x");
    op.set_desc(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y.desc, "reshape y");
    op.finalize("cudnnBackendFinalize (reshape operation)");
    add_op(std::move(op));
  }

  /// Adds an operation built elsewhere (the single-node SDPA operation).
  void add_op(Desc op) {
    ops_.push_back(op.get());
    keep(std::move(op));
  }

  /// Finalizes the operation graph of every operation added so far.
  const Desc& finalize(cudnnHandle_t handle) {
    Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops_.data(),
              static_cast<int64_t>(ops_.size()), "graph ops");
    graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle, 1, "graph handle");
    graph.finalize("cudnnBackendFinalize (operation graph)");
    graph_ = std::make_unique<Desc>(std::move(graph));
    return *graph_;
  }

 private:
  cudnnBackendDescriptor_t keep(Desc d) {
    owned_.push_back(std::move(d));
    return owned_.back().get();
  }

  std::vector<Desc> owned_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  std::unique_ptr<Desc> graph_;
  int64_t next_virtual_uid_ = 1000;
};

enum Uid : int64_t {
  kQ = 1, kK, kV, kO, kStats, kScale, kDO, kDQ, kDK, kDV,
  kNegInf, kOne, kSoftmaxSum, kDQAccum,
};

}  // namespace

struct AttentionRunner::State {
  cudaStream_t stream = nullptr;
  cudnnHandle_t handle = nullptr;
  std::vector<void*> buffers;
  void* workspace = nullptr;
  void* dq_accum = nullptr;         ///< fp32 dQ accumulator of the masked backward graph
  std::size_t dq_accum_bytes = 0;   ///< zeroed before each call on cuDNN < 9.6
  std::unique_ptr<GraphBuilder> graph;  // declared before plan and pack: destroyed after them
  Desc plan{CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR};
  Desc pack{CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR};
  // Host scalars passed by value through the variant pack.
  float scale = 1.0f;
  float one = 1.0f;
  float neg_inf = -std::numeric_limits<float>::infinity();

  void release() {
    for (void* p : buffers) cudaFree(p);
    buffers.clear();
    if (workspace != nullptr) cudaFree(workspace);
    workspace = nullptr;
    dq_accum = nullptr;
    dq_accum_bytes = 0;
  }
  void* alloc(std::size_t bytes) {
    void* p = nullptr;
    check_cuda(cudaMalloc(&p, bytes), "cudaMalloc (attention)");
    check_cuda(cudaMemset(p, 0, bytes), "cudaMemset");
    buffers.push_back(p);
    return p;
  }
};

namespace {

/// Shapes of one attention call: Q/O/dQ [b, h, s, d], K/V/dK/dV [b, h_kv, s, d], stats [b, h, s, 1].
struct Shapes {
  Dims q, kv, stats, scores;
  Dims kt, kt_strides;  ///< K^T (and V^T) as a transposed view of the packed K (V) buffer

  explicit Shapes(const costmodel::AttentionRow& r)
      : q{r.batch, r.heads, r.seq, r.head_dim},
        kv{r.batch, r.kv_heads, r.seq, r.head_dim},
        stats{r.batch, r.heads, r.seq, 1},
        scores{r.batch, r.heads, r.seq, r.seq},
        kt{r.batch, r.kv_heads, r.head_dim, r.seq},
        kt_strides{packed(kv)[0], packed(kv)[1], 1, packed(kv)[2]} {}
};

/// Replaces `s` by -inf where column > row (top-left aligned causal mask): GEN_INDEX along the
/// rows (axis 2) and columns (axis 3) as int32, CMP_GE(row, col) as a boolean, BINARY_SELECT
/// keeping s where true (cudnn-frontend node/diagonal_band_mask.h, right bound 0).
Tensor causal_mask(GraphBuilder& g, const Tensor& s, const Tensor& neg_inf) {
  const Tensor row = g.virt(CUDNN_DATA_INT32, s.dims, s.strides);
  const Tensor col = g.virt(CUDNN_DATA_INT32, s.dims, s.strides);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, row, CUDNN_DATA_FLOAT, 2);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, col, CUDNN_DATA_FLOAT, 3);
  const Tensor keep = g.virt(CUDNN_DATA_BOOLEAN, s.dims, s.strides);
  g.pointwise(CUDNN_POINTWISE_CMP_GE, row, &col, nullptr, keep, CUDNN_DATA_BOOLEAN);
  const Tensor masked = g.virt(CUDNN_DATA_FLOAT, s.dims, s.strides);
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, s, &neg_inf, &keep, masked);
  return masked;
}

/// Forward graph; `uids` receives the uids of its non-virtual tensors.
void build_forward(GraphBuilder& g, const Shapes& sh, bool causal, std::vector<int64_t>& uids) {
  const Tensor q = g.tensor(kQ, CUDNN_DATA_BFLOAT16, sh.q, packed(sh.q));
  const Tensor kt = g.tensor(kK, CUDNN_DATA_BFLOAT16, sh.kt, sh.kt_strides);
  const Tensor v = g.tensor(kV, CUDNN_DATA_BFLOAT16, sh.kv, packed(sh.kv));
  const Tensor o = g.tensor(kO, CUDNN_DATA_BFLOAT16, sh.q, packed(sh.q));
  const Tensor stats = g.tensor(kStats, CUDNN_DATA_FLOAT, sh.stats, packed(sh.stats));
  const Tensor scale = g.scalar(kScale);
  uids = {kQ, kK, kV, kO, kStats, kScale};

  // S = Q @ K^T * scale: [b, h, s, s]; a K head serves heads / kv_heads query heads.
  const Tensor s = g.virt(CUDNN_DATA_FLOAT, sh.scores);
  g.matmul(q, kt, s);
  Tensor scores = g.pointwise(CUDNN_POINTWISE_MUL, s, &scale);
  if (causal) {
    const Tensor neg_inf = g.scalar(kNegInf);
    uids.push_back(kNegInf);
    scores = causal_mask(g, scores, neg_inf);
  }
  // Softmax with statistics (cudnn-frontend node/softmax.h): m = max, e = exp(S - m),
  // l = sum e, stats = m + log l, P = e / l in bf16 (the second matmul's input type).
  const Tensor m = g.virt(CUDNN_DATA_FLOAT, sh.stats);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, scores, m);
  const Tensor e = g.pointwise(CUDNN_POINTWISE_EXP, g.pointwise(CUDNN_POINTWISE_SUB, scores, &m));
  const Tensor l = g.virt(CUDNN_DATA_FLOAT, sh.stats);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, l);
  const Tensor log_l = g.pointwise(CUDNN_POINTWISE_LOG, l);
  g.pointwise(CUDNN_POINTWISE_ADD, m, &log_l, nullptr, stats);
  const Tensor p = g.pointwise(CUDNN_POINTWISE_DIV, e, &l, CUDNN_DATA_BFLOAT16);
  // O = P @ V.
  g.matmul(p, v, o);
}

/// Backward graph (cudnn-frontend CompositeSDPABackwardNode, no dropout, no bias).
void build_backward(GraphBuilder& g, const Shapes& sh, bool causal, std::vector<int64_t>& uids) {
  const bool gqa = sh.kv[1] != sh.q[1];
  const Tensor q = g.tensor(kQ, CUDNN_DATA_BFLOAT16, sh.q, packed(sh.q));
  const Tensor kt = g.tensor(kK, CUDNN_DATA_BFLOAT16, sh.kt, sh.kt_strides);
  const Tensor vt = g.tensor(kV, CUDNN_DATA_BFLOAT16, sh.kt, sh.kt_strides);
  const Tensor o = g.tensor(kO, CUDNN_DATA_BFLOAT16, sh.q, packed(sh.q));
  const Tensor dout = g.tensor(kDO, CUDNN_DATA_BFLOAT16, sh.q, packed(sh.q));
  const Tensor stats = g.tensor(kStats, CUDNN_DATA_FLOAT, sh.stats, packed(sh.stats));
  const Tensor dq = g.tensor(kDQ, CUDNN_DATA_BFLOAT16, sh.q, packed(sh.q));
  const Tensor dk = g.tensor(kDK, CUDNN_DATA_BFLOAT16, sh.kv, packed(sh.kv));
  const Tensor dv = g.tensor(kDV, CUDNN_DATA_BFLOAT16, sh.kv, packed(sh.kv));
  const Tensor softmax_sum = g.tensor(kSoftmaxSum, CUDNN_DATA_FLOAT, sh.stats, packed(sh.stats));
  const Tensor dq_accum = g.tensor(kDQAccum, CUDNN_DATA_FLOAT, sh.q, packed(sh.q));
  const Tensor scale = g.scalar(kScale);
  const Tensor one = g.scalar(kOne);
  uids = {kQ, kK, kV, kO, kDO, kStats, kDQ, kDK, kDV, kSoftmaxSum, kDQAccum, kScale, kOne};

  // softmax_sum = rowsum(dO .* O) * 1 (the 1 is the dropout-scale slot), kept in memory.
  const Tensor row_sum = g.virt(CUDNN_DATA_FLOAT, sh.stats);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, g.pointwise(CUDNN_POINTWISE_MUL, dout, &o), row_sum);
  g.pointwise(CUDNN_POINTWISE_MUL, row_sum, &one, nullptr, softmax_sum);

  // P = exp(mask(Q @ K^T * scale - stats)), recomputed from the forward statistics.
  const Tensor s = g.virt(CUDNN_DATA_FLOAT, sh.scores);
  g.matmul(q, kt, s);
  Tensor scores = g.pointwise(CUDNN_POINTWISE_SUB, g.pointwise(CUDNN_POINTWISE_MUL, s, &scale), &stats);
  if (causal) {
    const Tensor neg_inf = g.scalar(kNegInf);
    uids.push_back(kNegInf);
    scores = causal_mask(g, scores, neg_inf);
  }
  const Tensor p = g.pointwise(CUDNN_POINTWISE_EXP, scores);

  // P^T and dS^T [b, h, s_kv, s_q] as bf16 transposed views of [b, h, s_q, s_kv].
  const Dims scores_t = {sh.scores[0], sh.scores[1], sh.scores[3], sh.scores[2]};
  const Dims scores_t_strides = {sh.scores[1] * sh.scores[2] * sh.scores[3], sh.scores[2] * sh.scores[3], 1,
                                 sh.scores[3]};
  // X^T @ Y into `out`; with GQA through full-head [b, h, s, d] bf16 and a sum over each group of
  // heads / kv_heads query heads.
  const auto transposed_matmul = [&](const Tensor& x, const Tensor& y, const Tensor& out) {
    const Tensor xt = g.virt(CUDNN_DATA_BFLOAT16, scores_t, scores_t_strides);
    g.reshape(x, xt);
    if (!gqa) {
      g.matmul(xt, y, out);
      return;
    }
    const Tensor full = g.virt(CUDNN_DATA_BFLOAT16, sh.q);
    g.matmul(xt, y, full);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, full, out);
  };
  transposed_matmul(p, dout, dv);  // dV = P^T @ dO

  // dS = P .* (dO @ V^T - softmax_sum) * scale.
  const Tensor dp = g.virt(CUDNN_DATA_FLOAT, sh.scores);
  g.matmul(dout, vt, dp);
  const Tensor ds_unscaled = g.pointwise(CUDNN_POINTWISE_MUL, g.pointwise(CUDNN_POINTWISE_SUB, dp, &softmax_sum), &p);
  const Tensor ds = g.pointwise(CUDNN_POINTWISE_MUL, ds_unscaled, &scale);
  transposed_matmul(ds, q, dk);  // dK = dS^T @ Q

  // dQ = dS @ K through the fp32 accumulator, K seen back from its K^T view.
  const Tensor k = g.virt(CUDNN_DATA_FLOAT, sh.kv, {sh.kt_strides[0], sh.kt_strides[1], sh.kt_strides[3], 1});
  g.reshape(kt, k);
  g.matmul(ds, k, dq_accum);
  g.pointwise(CUDNN_POINTWISE_IDENTITY, dq_accum, nullptr, nullptr, dq);
}

/// The single-node SDPA operation (no causal mask).
void build_unmasked_sdpa(GraphBuilder& g, const Shapes& sh, bool bwd, std::vector<int64_t>& uids) {
  const Tensor q = g.tensor(kQ, CUDNN_DATA_BFLOAT16, sh.q, packed(sh.q));
  const Tensor k = g.tensor(kK, CUDNN_DATA_BFLOAT16, sh.kv, packed(sh.kv));
  const Tensor v = g.tensor(kV, CUDNN_DATA_BFLOAT16, sh.kv, packed(sh.kv));
  const Tensor o = g.tensor(kO, CUDNN_DATA_BFLOAT16, sh.q, packed(sh.q));
  const Tensor stats = g.tensor(kStats, CUDNN_DATA_FLOAT, sh.stats, packed(sh.stats));
  const Tensor scale = g.scalar(kScale);
  uids = {kQ, kK, kV, kO, kStats, kScale};
  Desc op(bwd ? CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR : CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR);
  if (!bwd) {
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, q.desc, "SDPA fwd Q");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, k.desc, "SDPA fwd K");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, v.desc, "SDPA fwd V");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, o.desc, "SDPA fwd O");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC, stats.desc, "SDPA fwd stats");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, scale.desc, "SDPA fwd scale");
    op.finalize("cudnnBackendFinalize (SDPA forward)");
  } else {
    const Tensor dout = g.tensor(kDO, CUDNN_DATA_BFLOAT16, sh.q, packed(sh.q));
    const Tensor dq = g.tensor(kDQ, CUDNN_DATA_BFLOAT16, sh.q, packed(sh.q));
    const Tensor dk = g.tensor(kDK, CUDNN_DATA_BFLOAT16, sh.kv, packed(sh.kv));
    const Tensor dv = g.tensor(kDV, CUDNN_DATA_BFLOAT16, sh.kv, packed(sh.kv));
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_QDESC, q.desc, "SDPA bwd Q");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_KDESC, k.desc, "SDPA bwd K");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_VDESC, v.desc, "SDPA bwd V");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_ODESC, o.desc, "SDPA bwd O");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_STATSDESC, stats.desc, "SDPA bwd stats");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_SCALEDESC, scale.desc, "SDPA bwd scale");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_DODDESC, dout.desc, "SDPA bwd dO");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_DQDESC, dq.desc, "SDPA bwd dQ");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_DKDESC, dk.desc, "SDPA bwd dK");
    op.set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_DVDESC, dv.desc, "SDPA bwd dV");
    op.finalize("cudnnBackendFinalize (SDPA backward)");
    for (int64_t uid : {kDO, kDQ, kDK, kDV}) uids.push_back(uid);
  }
  g.add_op(std::move(op));
}

/// Execution plan of the first engine config (heuristics mode A) that finalizes.
Desc make_plan(cudnnHandle_t handle, const Desc& graph) {
  Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph, "heuristic graph");
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode, 1, "heuristic mode");
  heur.finalize("cudnnBackendFinalize (engine heuristics)");
  int64_t count = 0;
  check_dnn(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                     &count, nullptr),
            "engine heuristics count");
  if (count < 1) fail("cuDNN SDPA", "no engine supports this attention shape");
  std::vector<Desc> cfgs;
  std::vector<cudnnBackendDescriptor_t> handles;
  for (int64_t i = 0; i < count; ++i) {
    cfgs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    handles.push_back(cfgs.back().get());
  }
  int64_t returned = 0;
  check_dnn(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                     &returned, handles.data()),
            "engine heuristics results");
  std::string last_error = "no engine supports this attention shape";
  for (int64_t i = 0; i < returned && i < count; ++i) {
    Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle, 1, "plan handle");
    plan.set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, handles[static_cast<std::size_t>(i)], "plan engine config");
    const cudnnStatus_t s = cudnnBackendFinalize(plan.get());
    if (s == CUDNN_STATUS_SUCCESS) return plan;
    last_error = cudnnGetErrorString(s);
  }
  fail("cuDNN SDPA", "no engine config finalizes (" + last_error + ")");
}

}  // namespace

AttentionRunner::AttentionRunner(cudaStream_t stream) : s_(std::make_unique<State>()) {
  s_->stream = stream;
  check_dnn(cudnnCreate(&s_->handle), "cudnnCreate");
  check_dnn(cudnnSetStream(s_->handle, stream), "cudnnSetStream");
}

AttentionRunner::~AttentionRunner() {
  s_->pack.reset();
  s_->plan.reset();
  s_->graph.reset();
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
  s.pack.reset();
  s.plan.reset();
  s.graph.reset();
  s.release();
  causal_ = false;
  if (r.batch <= 0 || r.seq <= 0 || r.head_dim <= 0) fail("attention", "batch, seq and head_dim must be positive");
  if (r.heads <= 0 || r.kv_heads <= 0 || r.heads % r.kv_heads != 0) fail("attention", "heads must be a multiple of kv_heads");
  const Shapes sh(r);
  const bool bwd = r.pass == costmodel::AttentionPass::bwd;
  s.scale = 1.0f / std::sqrt(static_cast<float>(r.head_dim));
  // cudnn-frontend utils/attn_score_modifiers.h: cuDNN before 9.10 wants the lowest float as
  // the mask value, later versions -inf.
  s.neg_inf = cudnnGetVersion() < 91000 ? std::numeric_limits<float>::lowest() : -std::numeric_limits<float>::infinity();

  // The masked (or, for a full-attention row, unmasked) op-by-op graph; the single SDPA node
  // when no engine plans it.
  std::vector<int64_t> uids;
  bool fused_pattern = true;
  std::string pattern_error;
  try {
    s.graph = std::make_unique<GraphBuilder>();
    if (bwd) {
      build_backward(*s.graph, sh, r.causal, uids);
    } else {
      build_forward(*s.graph, sh, r.causal, uids);
    }
    s.plan = make_plan(s.handle, s.graph->finalize(s.handle));
  } catch (const UserError& e) {
    fused_pattern = false;
    pattern_error = e.what();
  }
  if (!fused_pattern) {
    try {
      s.graph = std::make_unique<GraphBuilder>();
      build_unmasked_sdpa(*s.graph, sh, bwd, uids);
      s.plan = make_plan(s.handle, s.graph->finalize(s.handle));
    } catch (const UserError& e) {
      throw UserError(std::string(e.what()) + "; op-by-op graph: " + pattern_error);
    }
  }

  int64_t ws = 0;
  int64_t returned = 0;
  check_dnn(cudnnBackendGetAttribute(s.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                     &returned, &ws),
            "plan workspace size");
  if (ws > 0) check_cuda(cudaMalloc(&s.workspace, static_cast<std::size_t>(ws)), "cudaMalloc (cuDNN workspace)");

  std::vector<void*> ptrs;
  for (int64_t uid : uids) {
    switch (uid) {
      case kQ: case kDO:  // inputs hold data (fill.hpp)
        ptrs.push_back(s.alloc(elems(sh.q) * 2));
        fill_uniform_bf16(ptrs.back(), elems(sh.q), static_cast<unsigned>(uid), s.stream);
        break;
      case kK: case kV:
        ptrs.push_back(s.alloc(elems(sh.kv) * 2));
        fill_uniform_bf16(ptrs.back(), elems(sh.kv), static_cast<unsigned>(uid), s.stream);
        break;
      case kO: case kDQ: ptrs.push_back(s.alloc(elems(sh.q) * 2)); break;
      case kDK: case kDV: ptrs.push_back(s.alloc(elems(sh.kv) * 2)); break;
      case kStats: case kSoftmaxSum: ptrs.push_back(s.alloc(elems(sh.stats) * 4)); break;
      case kDQAccum:
        s.dq_accum_bytes = elems(sh.q) * 4;
        s.dq_accum = s.alloc(s.dq_accum_bytes);
        ptrs.push_back(s.dq_accum);
        break;
      case kScale: ptrs.push_back(&s.scale); break;
      case kOne: ptrs.push_back(&s.one); break;
      case kNegInf: ptrs.push_back(&s.neg_inf); break;
      default: fail("attention", "unknown tensor uid " + std::to_string(uid));
    }
  }
  // cuDNN from 9.6 zeroes the dQ accumulator itself (cudnn-frontend CompositeSDPABackwardNode).
  if (cudnnGetVersion() >= 90600) s.dq_accum = nullptr;

  s.pack = Desc(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  s.pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.data(), static_cast<int64_t>(uids.size()),
             "variant pack uids");
  s.pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, ptrs.data(),
             static_cast<int64_t>(ptrs.size()), "variant pack pointers");
  s.pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &s.workspace, 1, "variant pack workspace");
  s.pack.finalize("cudnnBackendFinalize (variant pack)");
  causal_ = fused_pattern && r.causal;
}

void AttentionRunner::launch() {
  if (s_->dq_accum != nullptr) {
    check_cuda(cudaMemsetAsync(s_->dq_accum, 0, s_->dq_accum_bytes, s_->stream), "cudaMemsetAsync (dQ accumulator)");
  }
  check_dnn(cudnnBackendExecute(s_->handle, s_->plan.get(), s_->pack.get()), "cudnnBackendExecute (SDPA)");
}

}  // namespace tetra::calib::gpu
