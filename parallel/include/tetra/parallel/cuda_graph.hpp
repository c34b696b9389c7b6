#pragma once
/// What the framework captures into CUDA graphs (Megatron-Core `cuda_graph_impl` and
/// `cuda_graph_scope`, `megatron/core/transformer/transformer_config.py`). The host issues a
/// captured region with one graph launch instead of kernel by kernel, so its kernels cost no
/// host time. Scopes: "attn", "mlp", "moe", "moe_router", "moe_preprocess" (Transformer
/// Engine's per-module graphs), "layer" (`cuda_graph_impl = "local"` with the default scope:
/// every transformer layer) and "full_iteration" (the whole forward and backward).

#include <cstdint>
#include <string>
#include <string_view>

namespace tetra::parallel {

enum class CudaGraphScope : std::uint8_t {
  attn,            ///< the attention block, input norm to the residual add
  mlp,             ///< the MLP block of a dense layer
  moe,             ///< the MoE block: router, dispatch, experts, combine
  moe_router,      ///< the pre-MLP norm and the router
  moe_preprocess,  ///< the dispatcher's preprocessing: routing map and token permutation
  layer,           ///< every transformer layer, whole
  full_iteration,  ///< the whole step's forward and backward
};

/// A set of scopes (bit i = CudaGraphScope i). Empty: no CUDA graphs.
struct CudaGraphs {
  std::uint8_t bits = 0;

  [[nodiscard]] bool has(CudaGraphScope s) const noexcept {
    return (bits >> static_cast<unsigned>(s)) & 1U;
  }
  void add(CudaGraphScope s) noexcept { bits = static_cast<std::uint8_t>(bits | (1U << static_cast<unsigned>(s))); }
  friend bool operator==(const CudaGraphs&, const CudaGraphs&) = default;
};

/// "attn+moe_router" (a TOML array's elements joined by '+', the form of a measurement row's
/// options); "" or "none" is no graphs. The first unknown name when one is not a scope.
struct CudaGraphsParse {
  CudaGraphs graphs;
  std::string unknown;
};
[[nodiscard]] CudaGraphsParse parse_cuda_graphs(std::string_view text);

/// The names, "attn, mlp, ...", for error messages.
[[nodiscard]] std::string cuda_graph_scope_names();

}  // namespace tetra::parallel
