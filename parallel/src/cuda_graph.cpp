#include "tetra/parallel/cuda_graph.hpp"

#include "tetra/base/enum_names.hpp"

namespace tetra::parallel {
namespace {

constexpr EnumNames<CudaGraphScope, 7> kScopes = {{
    {CudaGraphScope::attn, "attn"},
    {CudaGraphScope::mlp, "mlp"},
    {CudaGraphScope::moe, "moe"},
    {CudaGraphScope::moe_router, "moe_router"},
    {CudaGraphScope::moe_preprocess, "moe_preprocess"},
    {CudaGraphScope::layer, "layer"},
    {CudaGraphScope::full_iteration, "full_iteration"},
}};

}  // namespace

CudaGraphsParse parse_cuda_graphs(std::string_view text) {
  CudaGraphsParse out;
  if (text.empty() || text == "none") return out;
  out.unknown = read_plus_joined(kScopes, text, out.graphs);
  return out;
}

std::string cuda_graph_scope_names() { return all_spellings(kScopes); }

}  // namespace tetra::parallel
