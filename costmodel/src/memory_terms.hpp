#pragma once
// Private to costmodel: the per-layer terms of the memory model (layer_memory.cpp): the
// shapes of one micro-batch, the saved and transient bytes of one layer, the bytes per
// parameter of the model states, and the shares that pipelining, offloading and the caching
// allocator leave resident.

#include "tetra/costmodel/memory.hpp"
#include "tetra/hw/cluster.hpp"
#include "tetra/model/model.hpp"
#include "tetra/parallel/execution.hpp"
#include "tetra/parallel/layout.hpp"

namespace tetra::costmodel::memory_terms {

/// Shapes of one micro-batch on one GPU.
struct Geometry {
  double s = 0;    ///< local sequence s' = s / c (F24-code; TE)
  double b = 0;    ///< micro-batch size
  double h = 0;
  double f = 0;    ///< FFN size
  double a = 0;    ///< attention heads
  double kv = 0;   ///< k / a
  double t = 1;
  double nd = 1;   ///< divisor of tensors outside the TP region: t with SP, else 1 (K22)
  double gd = 1;   ///< divisor of the saved GEMM inputs: t with SP and a sharded save
  bool sp = false;
  bool gpt = false;
};

/// Bytes per parameter of weights, gradients and optimizer states (F24-code; MLM
/// dist_optimizer.md).
struct StateBytes {
  double w = 2, g = 4, o = 12;
};

Geometry geometry(const model::Model& m, const parallel::Training& tr, const parallel::Layout& l);
bool unfused_attention(parallel::AttentionKernel k) noexcept;
double layer_saved_full(const model::Model& m, const parallel::Training& tr, const parallel::Layout& l, bool drop_s2);
double te_flash_output_copy(const model::Model& m, const hw::Gpu& gpu, const parallel::Training& tr,
                             const parallel::Layout& l);
double dense_module_savings(const model::Model& m, const parallel::Training& tr, const parallel::Layout& l);
double layer_transient(const model::Model& m, const parallel::Training& tr, const parallel::Layout& l);
/// Transformer Engine's context-parallel buffers in a layer's working set, per cp_comm_type,
/// in units of s' b h / t bytes (the term layer_transient adds when cp > 1).
double cp_transient(const Geometry& g, const parallel::Layout& l);
StateBytes state_bytes(const parallel::Training& tr);
int micro_batch_count(const parallel::Layout& l, const parallel::Training& tr);
double unsharded_gradient_share(const parallel::Layout& l, int micro_batches);
double resident_layer_share(const parallel::Layout& l, int stage_layers);
double fragmentation_share(const parallel::Training& tr, const parallel::Layout& l, const MemoryOptions& o) noexcept;

}  // namespace tetra::costmodel::memory_terms
