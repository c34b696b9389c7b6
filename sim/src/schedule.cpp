// Pipeline schedule generators (Megatron-LM `megatron/core/pipeline_parallel/schedules.py`;
// Qi et al., arXiv 2401.10241; Lamy-Poirier, arXiv 2106.02679 and ServiceNow Fast-LLM's
// modular placement; sources per schedule in schedule.hpp).

#include "tetra/sim/schedule.hpp"

#include <algorithm>

namespace tetra::sim {

const char* to_string(StepPass p) noexcept {
  switch (p) {
    case StepPass::forward: return "F";
    case StepPass::backward: return "B";
    case StepPass::backward_input: return "B";
    case StepPass::backward_weight: return "W";
  }
  return "?";
}

bool splits_backward(parallel::Schedule schedule) noexcept {
  return schedule == parallel::Schedule::zb_h1;
}

int interleaved_warmup(int p, int v, int m, int rank, int group) noexcept {
  const int w = (p - rank - 1) * 2 + (v - 1) * group;
  return std::min(w, m * v);
}

namespace {

void gpipe(int m, std::vector<ScheduleItem>& out) {
  for (int i = 0; i < m; ++i) out.push_back({i, 0, StepPass::forward});
  for (int i = 0; i < m; ++i) out.push_back({i, 0, StepPass::backward});
}

void one_f_one_b(int p, int m, int rank, std::vector<ScheduleItem>& out) {
  const int warm = std::min(p - rank - 1, m);
  for (int i = 0; i < warm; ++i) out.push_back({i, 0, StepPass::forward});
  for (int i = 0; i < m - warm; ++i) {
    out.push_back({warm + i, 0, StepPass::forward});
    out.push_back({i, 0, StepPass::backward});
  }
  for (int i = m - warm; i < m; ++i) out.push_back({i, 0, StepPass::backward});
}

void zb_h1(int p, int m, int rank, std::vector<ScheduleItem>& out) {
  const int warm = std::min(p - rank - 1, m);
  // Rank r holds back r Ws: the later ranks run their input-gradient passes first so the
  // gradient reaches rank 0 at B speed, and the held Ws fill their cool-down (the bubble
  // becomes (p − 1)(t_F + t_B − t_W), Qi et al. Table 2).
  const int defer = std::min(rank, m);
  int next_w = 0;
  auto after_b = [&](int b) {
    if (b - next_w >= defer) out.push_back({next_w++, 0, StepPass::backward_weight});
  };
  for (int i = 0; i < warm; ++i) out.push_back({i, 0, StepPass::forward});
  for (int i = 0; i < m - warm; ++i) {
    out.push_back({warm + i, 0, StepPass::forward});
    out.push_back({i, 0, StepPass::backward_input});
    after_b(i);
  }
  for (int i = m - warm; i < m; ++i) {
    out.push_back({i, 0, StepPass::backward_input});
    after_b(i);
  }
  while (next_w < m) out.push_back({next_w++, 0, StepPass::backward_weight});
}

void interleaved(int p, int v, int m, int rank, std::vector<ScheduleItem>& out) {
  const int group = p;  // microbatch_group_size_per_vp_stage default
  const int total = m * v;
  // Virtual micro-batch k -> (micro-batch, chunk), forward order.
  const int full = m / group;  // groups of `group` micro-batches; the last may be smaller
  auto fwd = [&](int k, bool backward) {
    // Chunk-major inside a group: group gi holds virtual micro-batches [gi·group·v, ...).
    int base = 0;
    int left = k;
    int g = group;
    if (k < full * group * v) {
      base = (k / (group * v)) * group;
      left = k % (group * v);
    } else {
      base = full * group;
      left = k - full * group * v;
      g = m - base;
    }
    int chunk = left / g;
    const int mb = base + left % g;
    if (backward) chunk = v - 1 - chunk;
    return ScheduleItem{mb, chunk, backward ? StepPass::backward : StepPass::forward};
  };
  const int warm = interleaved_warmup(p, v, m, rank, group);
  for (int k = 0; k < warm; ++k) out.push_back(fwd(k, false));
  for (int k = 0; k < total - warm; ++k) {
    out.push_back(fwd(warm + k, false));
    out.push_back(fwd(k, true));
  }
  for (int k = total - warm; k < total; ++k) out.push_back(fwd(k, true));
}

void layered(int v, int m, std::vector<ScheduleItem>& out) {
  for (int c = 0; c < v; ++c) {
    for (int i = 0; i < m; ++i) out.push_back({i, c, StepPass::forward});
  }
  for (int c = v - 1; c >= 0; --c) {
    for (int i = 0; i < m; ++i) out.push_back({i, c, StepPass::backward});
  }
}

}  // namespace

void pipeline_order(parallel::Schedule schedule, int p, int v, int m, int rank,
                    std::vector<ScheduleItem>& out) {
  out.clear();
  switch (schedule) {
    case parallel::Schedule::gpipe: gpipe(m, out); break;
    case parallel::Schedule::one_f_one_b: one_f_one_b(p, m, rank, out); break;
    case parallel::Schedule::zb_h1: zb_h1(p, m, rank, out); break;
    case parallel::Schedule::interleaved:
      if (v > 1) {
        interleaved(p, v, m, rank, out);
      } else {
        one_f_one_b(p, m, rank, out);
      }
      break;
    case parallel::Schedule::layered: layered(v, m, out); break;
  }
}

std::vector<ScheduleItem> pipeline_order(parallel::Schedule schedule, int p, int v, int m, int rank) {
  std::vector<ScheduleItem> out;
  pipeline_order(schedule, p, v, m, rank, out);
  return out;
}

}  // namespace tetra::sim
