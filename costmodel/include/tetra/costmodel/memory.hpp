#pragma once
/// Peak memory of every pipeline stage of one GPU (reference/memory.md): model states,
/// activations of the micro-batches in flight, embedding/logits terms, communication and
/// working buffers, and the caching allocator. Pure functions of value types.

#include <vector>

#include "tetra/hw/cluster.hpp"
#include "tetra/llama/layout.hpp"
#include "tetra/llama/model.hpp"

namespace tetra::costmodel {

/// Memory of one pipeline rank (one GPU of it), bytes.
struct StageMemory {
  int stage = 0;
  int layers = 0;
  double params_bytes = 0;       ///< weights in the training precision
  double grads_bytes = 0;        ///< gradient buffer in grad_dtype
  double optimizer_bytes = 0;    ///< master weights + Adam moments, sharded by zero_stage
  double activations_bytes = 0;  ///< saved activations of in-flight micro-batches + embedding/logits
  double buffers_bytes = 0;      ///< transients, communication buffers, CUDA context, NCCL, cuBLAS
  double inflight = 0;           ///< micro-batches (of the whole stage) whose activations are held
  double allocated_bytes = 0;    ///< sum of the above (what torch.cuda.max_memory_allocated sees)
  double reserved_bytes = 0;     ///< allocated plus allocator fragmentation (what decides OOM)
};

struct MemoryReport {
  double capacity_bytes = 0;     ///< GPU memory
  double usable_bytes = 0;       ///< capacity * memory_fraction (the planning margin)
  double peak_bytes = 0;         ///< max reserved over stages
  int peak_stage = 0;
  bool fits = false;             ///< peak (reserved) <= capacity
  std::vector<StageMemory> stages;
};

/// Options that do not belong to the scenario's value types.
struct MemoryOptions {
  double memory_fraction = 0.8;  ///< usable share of capacity reported as usable_bytes
  /// In-flight micro-batches per pipeline rank as the simulator's timeline found them
  /// (units: stage micro-batches, fractional for interleaved chunks). Empty: use the
  /// schedule's warm-up rule (reference/memory.md section 5).
  std::vector<double> inflight;
};

/// Per-stage memory of the layout. Precondition: the layout was validated.
[[nodiscard]] MemoryReport estimate_memory(const llama::Model& model, const hw::Cluster& cluster,
                                           const llama::Training& training,
                                           const llama::Layout& layout,
                                           const MemoryOptions& options = {});

/// Activation bytes saved for backward by one transformer layer for one micro-batch on one GPU
/// (reference/memory.md section 4), for the layout's attention kernel, recompute mode, SP and CP.
[[nodiscard]] double activation_bytes_per_layer(const llama::Model& model,
                                                const llama::Training& training,
                                                const llama::Layout& layout);

}  // namespace tetra::costmodel
