// The ops of a step outside the layers: the pipeline boundary, the data-parallel gradient
// reduction (dense and expert), the optimizer, and the names of op enums.
#include <algorithm>

#include "ops_builders.hpp"
#include "tetra/ops/ops.hpp"
#include "tetra/parallel/params.hpp"

namespace tetra::ops {

using model::Model;
using parallel::Layout;
using parallel::StageParams;
using parallel::Training;
using parallel::bytes_of;
using parallel::execution_traits;
using parallel::params_per_layer;
using parallel::stage_params;

namespace {

/// Full buckets beyond this many are merged into this many larger ones: only a stage of
/// hundreds of trillions of parameters gets there, and the replay prices every bucket.
constexpr long long kMaxBuckets = 100000;

/// `total` elements cut into `full` buckets of `size` and a `last` remainder, as the
/// framework's gradient buffer does (one bucket of everything when `one_bucket`).
struct BucketSplit {
  double size = 0;
  int full = 0;
  double last = 0;
};

BucketSplit split_buckets(double total, double size, bool one_bucket) {
  if (one_bucket) return {size, 0, total};
  long long full = static_cast<long long>(total / size);
  if (full > kMaxBuckets) {
    size = total / static_cast<double>(kMaxBuckets);
    full = kMaxBuckets;
  }
  return {size, static_cast<int>(full), std::max(0.0, total - static_cast<double>(full) * size)};
}

}  // namespace

using namespace detail;

double pp_boundary_bytes(const Model& model, const Training& training,
                         const Layout& layout) noexcept {
  const Dims d = dims_of(model, training, layout);
  return d.act * static_cast<double>(d.tokens_sp) * static_cast<double>(d.h);
}

std::vector<Op> dp_gradient_ops(const Model& model, const Training& training, const Layout& layout,
                                int stage) {
  std::vector<Op> ops;
  const int dpc = std::max(1, layout.dp) * std::max(1, layout.cp);
  if (dpc <= 1) return ops;
  const auto stages = stage_params(model, layout, training.seq_len);
  if (stage < 0 || stage >= static_cast<int>(stages.size())) return ops;
  const StageParams& sp = stages[static_cast<std::size_t>(stage)];
  const double grad_bytes = bytes_of(training.grad_dtype);
  const double param_bytes = gathered_param_bytes(model, training);
  const CommDim dim = layout.cp > 1 ? CommDim::dp_cp : CommDim::dp;

  if (training.zero_stage >= 3) {
    // Per-layer gradient reduce-scatter (FSDP / ZeRO-3) over the shard group, plus the
    // embedding / head shards. HSDP then all-reduces each reduced shard over the replicas
    // (FSDP2 `foreach_reduce`: all_reduce on the reduce-scatter output when an all-reduce
    // group exists, `torch/distributed/_composable/fsdp/_fsdp_collectives.py`).
    const int shard = layout.shard_dp() * std::max(1, layout.cp);
    const int replicas = std::max(1, layout.dp_replicate);
    const double per_layer = static_cast<double>(params_per_layer(model)) / std::max(1, layout.tp);
    const double rest = static_cast<double>(sp.params) - per_layer * sp.layers;
    auto push = [&](const char* rs_name, const char* ar_name, double params, int count) {
      if (shard > 1) {
        Op rs = coll(Pass::optimizer, rs_name, CollectiveKind::reduce_scatter, dim, shard,
                     grad_bytes * params, Wait::async);
        rs.count = count;
        ops.push_back(rs);
      }
      if (replicas > 1) {
        Op ar = coll(Pass::optimizer, ar_name, CollectiveKind::all_reduce, CommDim::dp_replicate,
                     replicas, grad_bytes * params / shard, Wait::async);
        ar.count = count;
        ops.push_back(ar);
      }
    };
    push("zero3_grad_rs", "hsdp_grad_ar", per_layer, std::max(1, sp.layers));
    if (rest > 0) push("zero3_grad_rs_rest", "hsdp_grad_ar_rest", rest, 1);
    return ops;
  }
  if (execution_traits(training, layout).deepspeed) {
    // Aleph Alpha's trainer (`Aleph-Alpha/scaling: src/scaling/core/optimizer/optimizer.py`
    // step, `allreduce.py`): after the last backward, the full gradient is all-reduced over
    // DP in buckets of 500M elements, each bucket cast to fp32 first
    // (`allreduce_tensor_in_float32`), on the compute stream (no overlap); with ZeRO-1 the
    // updated parameters are gathered after the optimizer step (counted as an all-gather in
    // the parameter dtype).
    const BucketSplit b = split_buckets(static_cast<double>(sp.params), 500e6, false);
    auto push = [&](CollectiveKind kind, const char* name, double elem_bytes) {
      if (b.full > 0) {
        Op op = coll(Pass::optimizer, name, kind, dim, dpc, elem_bytes * b.size, Wait::blocking);
        op.count = b.full;
        ops.push_back(op);
      }
      if (b.last > 0.5) ops.push_back(coll(Pass::optimizer, name, kind, dim, dpc, elem_bytes * b.last, Wait::blocking));
    };
    push(CollectiveKind::all_reduce, "dp_grad_ar_fp32", 4.0);
    if (training.zero_stage >= 1) push(CollectiveKind::all_gather, "dp_param_ag", param_bytes);
    return ops;
  }
  // Megatron bucket size: max(40M, 1M·dp) parameters (distributed_data_parallel_config.py),
  // dp here is the gradient group (DP x CP). Routed-expert gradients live in their own
  // buffer, reduced over the expert data-parallel group (expert_gradient_ops).
  const BucketSplit b = split_buckets(static_cast<double>(sp.params - sp.expert_params),
                                      std::max(40e6, 1e6 * dpc), !training.overlap_grad_reduce);
  const bool dist = training.zero_stage >= 1;
  auto push_buckets = [&](CollectiveKind kind, const char* name, double elem_bytes, Pass pass,
                          bool async) {
    if (b.full > 0) {
      Op op = coll(pass, name, kind, dim, dpc, elem_bytes * b.size, async_if(async));
      op.count = b.full;
      ops.push_back(op);
    }
    if (b.last > 0.5) ops.push_back(coll(pass, name, kind, dim, dpc, elem_bytes * b.last, async_if(async)));
  };
  if (dist) {
    push_buckets(CollectiveKind::reduce_scatter, "dp_grad_rs", grad_bytes, Pass::optimizer,
                 training.overlap_grad_reduce);
    push_buckets(CollectiveKind::all_gather, "dp_param_ag", param_bytes, Pass::optimizer,
                 training.overlap_param_gather);
  } else {
    push_buckets(CollectiveKind::all_reduce, "dp_grad_ar", grad_bytes, Pass::optimizer,
                 training.overlap_grad_reduce);
  }
  return ops;
}

std::vector<Op> expert_gradient_ops(const Model& model, const Training& training, const Layout& layout,
                                    int stage) {
  std::vector<Op> ops;
  const int edp = layout.edp();
  const auto stages = stage_params(model, layout, training.seq_len);
  if (stage < 0 || stage >= static_cast<int>(stages.size())) return ops;
  const double total = static_cast<double>(stages[static_cast<std::size_t>(stage)].expert_params);
  if (edp <= 1 || total <= 0 || !execution_traits(training, layout).megatron || training.zero_stage >= 3) {
    return ops;
  }
  // Megatron-Core DistributedDataParallel keeps expert parameters in separate buffers whose
  // bucket group is the expert data-parallel group (`expert_data_parallel_group`, size
  // tp·cp·dp/(ep·etp)); bucket size as for the dense buffers over that group.
  const BucketSplit b = split_buckets(total, std::max(40e6, 1e6 * edp), !training.overlap_grad_reduce);
  const double grad_bytes = bytes_of(training.grad_dtype);
  const double param_bytes = gathered_param_bytes(model, training);
  auto push_buckets = [&](CollectiveKind kind, const char* name, double elem_bytes, bool async) {
    if (b.full > 0) {
      Op op = coll(Pass::optimizer, name, kind, CommDim::expert_dp, edp, elem_bytes * b.size, async_if(async));
      op.count = b.full;
      ops.push_back(op);
    }
    if (b.last > 0.5) {
      ops.push_back(coll(Pass::optimizer, name, kind, CommDim::expert_dp, edp, elem_bytes * b.last, async_if(async)));
    }
  };
  if (training.zero_stage >= 1) {
    push_buckets(CollectiveKind::reduce_scatter, "edp_grad_rs", grad_bytes, training.overlap_grad_reduce);
    push_buckets(CollectiveKind::all_gather, "edp_param_ag", param_bytes, training.overlap_param_gather);
  } else {
    push_buckets(CollectiveKind::all_reduce, "edp_grad_ar", grad_bytes, training.overlap_grad_reduce);
  }
  return ops;
}

std::vector<Op> optimizer_ops(const Model& model, const Training& training, const Layout& layout,
                              int stage) {
  std::vector<Op> ops;
  const auto stages = stage_params(model, layout, training.seq_len);
  if (stage < 0 || stage >= static_cast<int>(stages.size())) return ops;
  double params = static_cast<double>(stages[static_cast<std::size_t>(stage)].params);
  const int dpc = std::max(1, layout.dp) * std::max(1, layout.cp);
  if (execution_traits(training, layout).deepspeed && dpc > 1 && training.zero_stage < 3) {
    // `allreduce.py`: flatten the bf16 gradients (2 act), cast to fp32 (act + 4), divide
    // (4 + 4), copy back after the all-reduce (4 + act), unflatten into the parameters'
    // gradients (2 act): 6 act + 16 bytes per local parameter.
    const double act = bytes_of(training.precision);
    ops.push_back(mem(Pass::optimizer, "grad_flatten_cast", MemoryKernel::copy,
                      (6.0 * act + 16.0) * params));
  }
  if (training.zero_stage >= 1) {
    // Routed-expert states are sharded over the expert data-parallel group.
    const double expert = static_cast<double>(stages[static_cast<std::size_t>(stage)].expert_params);
    params = std::max(0.0, params - expert) / dpc + expert / std::max(1, layout.edp());
  }
  // Gradient norm: read the fp32 (or bf16) gradient shard once.
  ops.push_back(mem(Pass::optimizer, "grad_norm", MemoryKernel::grad_norm,
                    bytes_of(training.grad_dtype) * params));
  // Fused Adam: read fp32 param, grad, m, v; write param, m, v and the bf16 copy (~30 B/param
  // with fp32 moments).
  const double moments = 2.0 * bytes_of(training.adam_moments_dtype);
  ops.push_back(mem(Pass::optimizer, "adam", MemoryKernel::adam,
                    (4.0 + 4.0 + moments + 4.0 + moments + bytes_of(training.precision)) * params));
  return ops;
}

double sum_flops(const std::vector<Op>& ops, bool include_recompute) noexcept {
  double s = 0;
  for (const Op& op : ops) {
    if (op.recompute && !include_recompute) continue;
    s += op.total_flops();
  }
  return s;
}

const char* to_string(OpKind k) noexcept {
  switch (k) {
    case OpKind::gemm: return "gemm";
    case OpKind::attention: return "attention";
    case OpKind::memory_bound: return "memory_bound";
    case OpKind::collective: return "collective";
    case OpKind::p2p: return "p2p";
  }
  return "?";
}

const char* to_string(Pass p) noexcept {
  switch (p) {
    case Pass::forward: return "forward";
    case Pass::backward_input: return "backward_input";
    case Pass::backward_weight: return "backward_weight";
    case Pass::optimizer: return "optimizer";
  }
  return "?";
}

const char* to_string(MemoryKernel k) noexcept {
  switch (k) {
    case MemoryKernel::copy: return "copy";
    case MemoryKernel::rmsnorm: return "rmsnorm";
    case MemoryKernel::layernorm: return "layernorm";
    case MemoryKernel::rope: return "rope";
    case MemoryKernel::swiglu: return "swiglu";
    case MemoryKernel::gelu: return "gelu";
    case MemoryKernel::residual_add: return "residual_add";
    case MemoryKernel::softmax: return "softmax";
    case MemoryKernel::embedding: return "embedding";
    case MemoryKernel::cross_entropy: return "cross_entropy";
    case MemoryKernel::grad_norm: return "grad_norm";
    case MemoryKernel::adam: return "adam";
    case MemoryKernel::quantize: return "quantize";
    case MemoryKernel::amax: return "amax";
  }
  return "?";
}

const char* to_string(CollectiveKind k) noexcept {
  switch (k) {
    case CollectiveKind::all_reduce: return "all_reduce";
    case CollectiveKind::all_gather: return "all_gather";
    case CollectiveKind::reduce_scatter: return "reduce_scatter";
    case CollectiveKind::send_recv: return "send_recv";
    case CollectiveKind::all_to_all: return "all_to_all";
  }
  return "?";
}

const char* to_string(CommDim d) noexcept {
  switch (d) {
    case CommDim::tp: return "tp";
    case CommDim::cp: return "cp";
    case CommDim::pp: return "pp";
    case CommDim::dp: return "dp";
    case CommDim::dp_cp: return "dp_cp";
    case CommDim::dp_replicate: return "dp_replicate";
    case CommDim::ep: return "ep";
    case CommDim::expert_dp: return "expert_dp";
    case CommDim::cp_a2a: return "cp_a2a";
    case CommDim::cp_ring: return "cp_ring";
  }
  return "?";
}

}  // namespace tetra::ops
