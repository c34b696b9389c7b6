#include "tetra/llama/cuda_graph.hpp"

#include "enum_names.hpp"

namespace tetra::llama {
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

const char* to_string(CudaGraphScope s) noexcept { return spell(kScopes, s, "attn"); }

CudaGraphsParse parse_cuda_graphs(std::string_view text) {
  CudaGraphsParse out;
  if (text.empty() || text == "none") return out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('+', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view name = text.substr(start, end - start);
    start = end + 1;
    const auto s = lookup(kScopes, name);
    if (!s) {
      out.unknown = std::string(name);
      return out;
    }
    out.graphs.add(*s);
  }
  return out;
}

std::string format_cuda_graphs(CudaGraphs graphs) {
  std::string out;
  for (const auto& [v, s] : kScopes) {
    if (!graphs.has(v)) continue;
    if (!out.empty()) out += '+';
    out += s;
  }
  return out.empty() ? "none" : out;
}

std::string cuda_graph_scope_names() {
  std::string out;
  for (const auto& [v, s] : kScopes) {
    if (!out.empty()) out += ", ";
    out += s;
  }
  return out;
}

}  // namespace tetra::llama
