#include "tetra/parallel/layout.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include "tetra/base/enum_names.hpp"

namespace tetra::parallel {

namespace {

constexpr EnumNames<Recompute, 5> kRecompute = {{
    {Recompute::none, "none"},
    {Recompute::selective, "selective"},
    {Recompute::full, "full"},
    {Recompute::selective_op, "selective_op"},
    {Recompute::selective_layer, "selective_layer"}}};
constexpr EnumNames<Schedule, 5> kSchedule = {{
    {Schedule::gpipe, "gpipe"},
    {Schedule::one_f_one_b, "1f1b"},
    {Schedule::interleaved, "interleaved"},
    {Schedule::zb_h1, "zb-h1"},
    {Schedule::layered, "layered"}}};
constexpr EnumNames<AttentionKernel, 7> kAttention = {{
    {AttentionKernel::flash2, "flash2"},
    {AttentionKernel::flash3, "flash3"},
    {AttentionKernel::flash1, "flash1"},
    {AttentionKernel::cudnn, "cudnn"},
    {AttentionKernel::fused, "fused"},
    {AttentionKernel::torch, "torch"},
    {AttentionKernel::triton, "triton"}}};
constexpr EnumNames<Precision, 3> kPrecision = {{
    {Precision::bf16, "bf16"}, {Precision::fp16, "fp16"}, {Precision::fp32, "fp32"}}};
constexpr EnumNames<Framework, 3> kFramework = {{
    {Framework::megatron, "megatron"}, {Framework::deepspeed, "deepspeed"},
    {Framework::fsdp, "fsdp"}}};
constexpr EnumNames<Optimizer, 1> kOptimizer = {{{Optimizer::adam, "adam"}}};
constexpr EnumNames<MoeDispatcher, 3> kDispatcher = {{
    {MoeDispatcher::alltoall, "alltoall"}, {MoeDispatcher::allgather, "allgather"},
    {MoeDispatcher::flex, "flex"}}};
constexpr EnumNames<FlexBackend, 2> kFlexBackend = {{
    {FlexBackend::deepep, "deepep"}, {FlexBackend::hybridep, "hybridep"}}};
constexpr EnumNames<CpComm, 4> kCpComm = {{
    {CpComm::p2p, "p2p"}, {CpComm::all_gather, "all_gather"}, {CpComm::a2a, "a2a"},
    {CpComm::a2a_p2p, "a2a+p2p"}}};

}  // namespace

std::vector<BlockKind> block_kinds(const Layout& layout) {
  if (layout.recompute != Recompute::selective_layer) return {{layout.recompute, 1.0}};
  const double checkpointed = 1.0 / std::max(1, layout.ac_freq);
  if (checkpointed >= 1.0) return {{Recompute::full, 1.0}};
  return {{Recompute::none, 1.0 - checkpointed}, {Recompute::full, checkpointed}};
}

RecomputeModules recomputed_modules(const Layout& layout) noexcept {
  if (layout.recompute != Recompute::selective) return {};
  if (!layout.recompute_modules.empty()) return layout.recompute_modules;
  RecomputeModules core;
  core.add(RecomputeModule::core_attn);
  return core;
}

bool recomputes(const Layout& layout, RecomputeModule module) noexcept {
  return recomputed_modules(layout).has(module);
}

int micro_batches(const Layout& layout, const Training& training) noexcept {
  const long long per_step = static_cast<long long>(layout.mbs) * layout.dp;
  if (per_step <= 0) return 0;
  return static_cast<int>(training.global_batch / per_step);
}

int bytes_of(Precision p) noexcept {
  switch (p) {
    case Precision::bf16:
    case Precision::fp16:
      return 2;
    case Precision::fp32:
      return 4;
  }
  return 4;
}

const char* to_string(Recompute r) noexcept { return spell(kRecompute, r); }
const char* to_string(Schedule s) noexcept { return spell(kSchedule, s); }
const char* to_string(AttentionKernel a) noexcept { return spell(kAttention, a); }
const char* to_string(Precision p) noexcept { return spell(kPrecision, p); }
const char* to_string(Framework f) noexcept { return spell(kFramework, f); }
const char* to_string(Optimizer o) noexcept { return spell(kOptimizer, o); }
const char* to_string(MoeDispatcher d) noexcept { return spell(kDispatcher, d); }
const char* to_string(FlexBackend b) noexcept { return spell(kFlexBackend, b); }
const char* to_string(CpComm c) noexcept { return spell(kCpComm, c); }

std::optional<Recompute> parse_recompute(std::string_view name) noexcept {
  return lookup(kRecompute, name);
}
std::optional<Schedule> parse_schedule(std::string_view name) noexcept {
  return lookup(kSchedule, name);
}
std::optional<AttentionKernel> parse_attention(std::string_view name) noexcept {
  return lookup(kAttention, name);
}
std::optional<Precision> parse_precision(std::string_view name) noexcept {
  return lookup(kPrecision, name);
}
std::optional<Framework> parse_framework(std::string_view name) noexcept {
  return lookup(kFramework, name);
}
std::optional<Optimizer> parse_optimizer(std::string_view name) noexcept {
  return lookup(kOptimizer, name);
}
std::optional<MoeDispatcher> parse_moe_dispatcher(std::string_view name) noexcept {
  return lookup(kDispatcher, name);
}
std::optional<FlexBackend> parse_flex_backend(std::string_view name) noexcept {
  return lookup(kFlexBackend, name);
}
std::optional<CpComm> parse_cp_comm(std::string_view name) noexcept {
  if (name == "allgather") return CpComm::all_gather;
  return lookup(kCpComm, name);
}

}  // namespace tetra::parallel
