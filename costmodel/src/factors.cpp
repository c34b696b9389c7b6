#include "tetra/costmodel/factors.hpp"

#include "tetra/costmodel/builtin_profiles.hpp"

namespace tetra::costmodel {

const char* to_string(Factor f) noexcept {
  switch (f) {
    case Factor::gemm: return "gemm";
    case Factor::attention: return "attention";
    case Factor::memory_bound: return "memory_bound";
    case Factor::intra_node: return "intra_node";
    case Factor::inter_node: return "inter_node";
    case Factor::host: return "host";
    case Factor::step_overhead: return "step_overhead";
  }
  return "?";
}

std::optional<Factor> parse_factor(std::string_view name) noexcept {
  for (Factor f : kFactors) {
    if (name == to_string(f)) return f;
  }
  return std::nullopt;
}

double Factors::get(Factor f) const noexcept {
  switch (f) {
    case Factor::gemm: return gemm;
    case Factor::attention: return attention;
    case Factor::memory_bound: return memory_bound;
    case Factor::intra_node: return intra_node;
    case Factor::inter_node: return inter_node;
    case Factor::host: return host;
    case Factor::step_overhead: return step_overhead_s;
  }
  return 0;
}

void Factors::set(Factor f, double value) noexcept {
  switch (f) {
    case Factor::gemm: gemm = value; break;
    case Factor::attention: attention = value; break;
    case Factor::memory_bound: memory_bound = value; break;
    case Factor::intra_node: intra_node = value; break;
    case Factor::inter_node: inter_node = value; break;
    case Factor::host: host = value; break;
    case Factor::step_overhead: step_overhead_s = value; break;
  }
}

double Factors::neutral(Factor f) noexcept { return f == Factor::step_overhead ? 0.0 : 1.0; }

void apply_factors(const Factors& factors, CostParams& costs) noexcept {
  costs.step_overhead_s = factors.step_overhead_s;
  costs.compute.gemm_factor = factors.gemm;
  costs.compute.attention_factor = factors.attention;
  costs.compute.memory_bound_factor = factors.memory_bound;
  costs.compute.host_factor = factors.host;
  costs.comm.intra_node_factor = factors.intra_node;
  costs.comm.inter_node_factor = factors.inter_node;
}

}  // namespace tetra::costmodel
