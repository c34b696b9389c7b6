#pragma once
/// Peak memory of every pipeline stage of one GPU (sources in src/memory.cpp and
/// costmodel/README.md; docs/memory.md explains the terms): model states,
/// activations of the micro-batches in flight, embedding/logits terms, communication and
/// working buffers, and the caching allocator. Pure functions of value types.

#include <limits>
#include <vector>

#include "tetra/hw/cluster.hpp"
#include "tetra/parallel/layout.hpp"
#include "tetra/model/model.hpp"

namespace tetra::costmodel {

/// Memory of one pipeline rank (one GPU of it), bytes.
struct StageMemory {
  int stage = 0;
  int layers = 0;
  double params_bytes = 0;       ///< weights in the training precision
  double fp8_cache_bytes = 0;    ///< quantised FP8 / FP4 copies of the linear weights (TE cache)
  double grads_bytes = 0;        ///< gradient buffer in grad_dtype
  double optimizer_bytes = 0;    ///< master weights + Adam moments, sharded by zero_stage
  double activations_bytes = 0;  ///< saved activations of in-flight micro-batches + embedding/logits
  double buffers_bytes = 0;      ///< transients, communication buffers, CUDA context, NCCL, cuBLAS
  double inflight = 0;           ///< micro-batches (of the whole stage) whose activations are held
  double allocated_bytes = 0;    ///< sum of the above (what torch.cuda.max_memory_allocated sees)
  double reserved_bytes = 0;     ///< allocated plus allocator fragmentation (what decides OOM)
  /// What torch.cuda.max_memory_reserved reports (plus the bytes outside the allocator): the
  /// allocator's cache of the per-micro-batch blocks, including free segments it would release
  /// at the device's limit; at least reserved_bytes.
  double torch_reserved_bytes = 0;

  // Parts of the totals above, for breakdowns and for a simulator that tracks activations
  // itself (see static_bytes()).
  double layer_activations_bytes = 0;  ///< saved tensors of the transformer layers (in flight)
  double logits_bytes = 0;             ///< held last-stage logits/softmax (part of activations)
  double embedding_bytes = 0;          ///< first-stage input terms (part of activations)
  double transient_bytes = 0;          ///< largest working set of one step phase (part of buffers)
  double communication_bytes = 0;      ///< NCCL buffers of the communicators (part of buffers)
  double runtime_bytes = 0;            ///< CUDA context + cuBLAS workspace (part of buffers)
  /// CUDA context and NCCL buffers: device memory outside PyTorch's caching allocator, so
  /// counted in reserved_bytes (what decides OOM) but not in torch.cuda.max_memory_reserved.
  double outside_allocator_bytes = 0;
  double fragmentation_bytes = 0;      ///< reserved - allocated
  double optimizer_step_bytes = 0;     ///< peak of the optimizer phase (activations freed)
  // Mixture of experts (parts of the totals above; 0 on a dense model).
  int moe_layers = 0;                  ///< of `layers`, those with routed experts
  /// Routed-expert weights, gradients and optimizer states on this GPU (part of params_bytes,
  /// fp8_cache_bytes, grads_bytes and optimizer_bytes): E/ep experts split over etp, their
  /// optimizer states sharded over the expert data-parallel group (Layout::edp()).
  double expert_states_bytes = 0;
  double expert_activations_bytes = 0; ///< routed experts' saved tensors (part of activations)
  double dispatch_bytes = 0;           ///< token dispatch buffers of one MoE layer (part of transient)
  double fragmentation_fraction = 0;   ///< MemoryOptions::fragmentation used for this stage
  /// Where reserved stops: the device under expandable segments (Training::expandable_segments),
  /// else no limit.
  double reserved_limit_bytes = std::numeric_limits<double>::infinity();

  /// Everything that does not scale with the number of in-flight micro-batches: model
  /// states, buffers (with the fragmentation share of the transients). A simulator that
  /// tracks live activation bytes A(t) on this stage gets its reserved memory as
  /// static_bytes() + (1 + fragmentation) * A(t) (see reserved_with_activations()).
  [[nodiscard]] double static_bytes() const noexcept;
};

struct MemoryReport {
  double capacity_bytes = 0;     ///< GPU memory
  double usable_bytes = 0;       ///< capacity * memory_fraction (the planning margin)
  double peak_bytes = 0;         ///< max reserved over stages
  int peak_stage = 0;
  bool fits = false;             ///< peak (reserved) <= capacity
  /// Capacity left on the fullest stage: capacity - reserved, or capacity - allocated when
  /// the allocator runs with expandable segments (its cache then fills whatever is free).
  double headroom_bytes = 0;
  std::vector<StageMemory> stages;
};

/// Options that do not belong to the scenario's value types.
struct MemoryOptions {
  double memory_fraction = 1.0;  ///< usable share of capacity reported as usable_bytes
  /// In-flight micro-batches per pipeline rank as the simulator's timeline found them
  /// (units: stage micro-batches, fractional for interleaved chunks). Empty: use the
  /// schedule's warm-up rule (`inflight_micro_batches`).
  std::vector<double> inflight;
  /// Caching-allocator fragmentation: reserved - allocated as a fraction of the activation
  /// and transient bytes (the blocks that are allocated and freed every micro-batch), where
  /// NCCL collectives call record_stream on their tensors (Training::avoid_record_streams off);
  /// 0 where they do not. Fitted on Hagemann et al.'s 964 labelled runs (the share of highest
  /// outcome accuracy that calls at most 3 % of their measured runs out of memory) and checked
  /// on Fujii et al.'s sweep (docs/memory.md).
  double fragmentation = 0.31;
  /// What the allocator caches of those blocks where no record_stream holds them: whole free
  /// segments it reports as reserved and releases at the device's limit. Checked on
  /// torchtitan's measured max_memory_reserved (docs/memory.md).
  double cached_share = 0.25;
};

/// Per-stage memory of the layout. Precondition: the layout was validated.
[[nodiscard]] MemoryReport estimate_memory(const model::Model& model, const hw::Cluster& cluster,
                                           const parallel::Training& training,
                                           const parallel::Layout& layout,
                                           const MemoryOptions& options = {});

/// Activation bytes saved for backward by one transformer layer for one micro-batch on one GPU
/// (Fujii et al.'s Llama form of Korthikanti et al., arXiv 2205.05198, Table 2), for the
/// layout's attention kernel, recompute mode, SP and CP.
/// With full recompute this is the stored layer input only; the rebuilt layer is a transient.
[[nodiscard]] double activation_bytes_per_layer(const model::Model& model,
                                                const parallel::Training& training,
                                                const parallel::Layout& layout);

/// Saved bytes of one of the first pipeline rank's layers for one micro-batch (the dense, MoE and
/// attention parts estimate_memory counts, averaged over the rank's layers): what activation
/// offloading copies to the host per layer (costmodel/offload.hpp).
[[nodiscard]] double offloaded_bytes_per_layer(const model::Model& model, const hw::Cluster& cluster,
                                               const parallel::Training& training,
                                               const parallel::Layout& layout);

/// Micro-batches whose activations stage `stage` holds at its peak under the layout's
/// schedule (GPipe: Narayanan et al., arXiv 2104.04473 §2.2; 1F1B and interleaved: the
/// warm-up counts of `megatron/core/pipeline_parallel/schedules.py`; ZB-H1: Qi et al.,
/// arXiv 2401.10241, Table 2), in units of whole-stage micro-batches.
[[nodiscard]] double inflight_micro_batches(const parallel::Layout& layout, int micro_batches,
                                            int stage);

/// Reserved bytes of a stage whose live activations are `activation_bytes`:
/// static_bytes() + (1 + fragmentation_fraction) * activation_bytes, stopped at
/// reserved_limit_bytes (never below what is allocated).
[[nodiscard]] double reserved_with_activations(const StageMemory& stage, double activation_bytes);

}  // namespace tetra::costmodel
