// The physical range of each cluster factor. A bound says what the hardware and software could
// possibly do, from the model's own starting point; it is never tuned to a measurement file.

#include "tetra/fit/fit.hpp"

#include <array>

namespace tetra::fit {

namespace {

using costmodel::Factor;

constexpr std::array<FactorBound, 7> kBounds{{
    {Factor::gemm, 0.5, 1.15,
     "the model's GEMM rate is the best measured matmul rate (MAMF) derated by wave "
     "quantisation and, on A100, the sustained clock; a training GEMM cannot beat it by more "
     "than the spread between boost and sustained clocks (1410/1305 = 1.08) and run-to-run "
     "spread, and throttling, odd shapes and kernels sharing the GPU rarely cost more than half"},
    {Factor::attention, 0.4, 1.6,
     "the published FlashAttention rates are for benchmark shapes; at training shapes "
     "(head size, GQA, causal blocks, older or newer kernel versions) achieved rates span about "
     "half to 1.5x of them (FlashAttention-2 is 2x FlashAttention-1 at the same shape)"},
    {Factor::memory_bound, 0.25, 1.2,
     "memory-bound kernels are priced at the measured streaming (triad) bandwidth; only data "
     "that stays in L2 runs faster, and eager-mode PyTorch kernels with strided access, "
     "type casts and launch gaps reach a quarter of it"},
    {Factor::intra_node, 0.3, 1.25,
     "NVLink collectives are priced by NCCL's tuning model or nccl-tests tables; inside a "
     "training step they share SMs and HBM with compute and reach a fraction of nccl-tests, "
     "and nothing moves faster than the NVLink line rate, about 1.2x nccl-tests' bus bandwidth"},
    {Factor::inter_node, 1.0 / 16.0, 1.2,
     "transfers across nodes are priced at every NIC of the node at its effective rate, "
     "rail-aligned; fewer NICs than GPUs, a tapered (oversubscribed) fabric or traffic from "
     "other jobs leave a fraction of it (one NIC of eight behind a 2:1 taper: 1/16), and no "
     "transfer beats the NIC line rate (the model's effective rate is 94-97 % of it)"},
    {Factor::host, 0.5, 2.0,
     "the host's costs (a kernel issued from eager PyTorch, a wait on the GPU, the data "
     "loader's mask building) were measured on particular hosts, and hosts differ by CPU, "
     "Python and PyTorch release: three GPU nodes' hosts issue a kernel in 21.6-39.0 us, "
     "0.83-1.5x the model's 32.5 us; half to twice the recorded speed spans them with room "
     "for older CPUs and releases, or loader workers crowding the cores"},
    {Factor::step_overhead, 0.0, 10.0,
     "host-side work per step outside the modelled kernels (data loading, Python dispatch, "
     "logging, loss and gradient-norm synchronisation) costs milliseconds to a few seconds; "
     "more than 10 s per step would be a stall, not a property of the cluster"},
}};

}  // namespace

const FactorBound& bound(Factor factor) noexcept {
  for (const FactorBound& b : kBounds) {
    if (b.factor == factor) return b;
  }
  return kBounds.front();
}

const char* to_string(FactorStatus s) noexcept {
  switch (s) {
    case FactorStatus::fitted: return "fitted";
    case FactorStatus::at_bound: return "at_bound";
    case FactorStatus::unconstrained: return "unconstrained";
    case FactorStatus::not_fitted: return "not_fitted";
  }
  return "?";
}

}  // namespace tetra::fit
