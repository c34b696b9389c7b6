#pragma once
/// The [search] table of a scenario: which values of each layout knob to try.

#include <string>
#include <vector>

#include "tetra/parallel/layout.hpp"

namespace tetra::search {

struct SearchSpace {
  std::vector<int> tp{1, 2, 4, 8};
  std::vector<int> cp{1};
  std::vector<int> pp;                 ///< empty with pp_divisors: every pp that fits (see below)
  bool pp_divisors = true;             ///< pp = "divisors": divisors of the layer count, plus
                                       ///< the powers of two that an uneven first/last split
                                       ///< serves where they do not divide (search::pp_values)
  std::vector<int> mbs{1, 2, 4};
  std::vector<int> vp{1};
  std::vector<parallel::Recompute> recompute{parallel::Recompute::none, parallel::Recompute::selective,
                                          parallel::Recompute::full};
  std::vector<parallel::Schedule> schedule{parallel::Schedule::one_f_one_b};
  std::vector<bool> sp{true};          ///< sp values tried where tp > 1 (sp is off at tp == 1)
  /// Rank orders tried (parallel::Layout rank_order); empty: the [layout] order only. On a
  /// fabric of pods the order decides which groups cross them.
  std::vector<std::string> rank_order;
  /// HSDP replica counts (framework fsdp, zero_stage 3): dp = dp_shard x dp_replicate; a count
  /// that does not divide dp is rejected by the dp-split rule.
  std::vector<int> dp_replicate{1};
  /// Checkpoint frequencies tried under recompute = selective_layer.
  std::vector<int> ac_freq{2};
  /// Expert-parallel and expert-tensor-parallel sizes tried on a MoE model (parallel::Layout ep,
  /// etp; the layout rules reject what does not divide the experts or the tp·cp·dp ranks).
  /// A dense model is searched at ep = etp = 1 whatever they say.
  std::vector<int> ep{1};
  std::vector<int> etp{1};
  /// Context-parallel exchanges tried where cp > 1 (parallel::CpComm, Megatron-Core
  /// `cp_comm_type`); empty: the [layout] one only.
  std::vector<parallel::CpComm> cp_comm;
  /// torch.compile on / off (framework fsdp). Empty: the scenario's [training] compile only.
  std::vector<bool> compile;
  /// Memory knobs a recipe turns (empty: the scenario's own setting only). Activation
  /// offloading (Layout::offload_layers) is tried where Megatron-Core allows it: pp = 1, no
  /// recompute. FP8 parameter gather is tried on the FP8 precisions; gradient dtypes on all.
  std::vector<int> offload_layers;
  std::vector<bool> fp8_param_gather;
  std::vector<parallel::Precision> grad_dtype;
  /// Usable share of GPU memory for pruning. 1: the estimate already carries the allocator's
  /// reserve and the runtime buffers, which Fujii et al.'s 80 % rule stands in for in an
  /// estimator without them (docs/memory.md).
  double memory_fraction = 1.0;
  /// Precisions to try: `none` = the training precision (bf16), a recipe = FP8 linears under
  /// it. Empty: the scenario's [training] precision only.
  std::vector<parallel::Fp8Recipe> precision;
};

}  // namespace tetra::search
