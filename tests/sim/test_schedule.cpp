// Schedule generators: Megatron's interleaved order and warm-up, 1F1B, ZB-H1, layered.
#include <doctest/doctest.h>

#include <vector>

#include "tetra/sim/schedule.hpp"

using namespace tetra::sim;
using tetra::parallel::Schedule;

namespace {
std::vector<int> mbs_of(const std::vector<ScheduleItem>& v, StepPass pass) {
  std::vector<int> r;
  for (const auto& it : v) {
    if (it.pass == pass) r.push_back(it.micro_batch);
  }
  return r;
}
std::vector<int> chunks_of(const std::vector<ScheduleItem>& v, StepPass pass) {
  std::vector<int> r;
  for (const auto& it : v) {
    if (it.pass == pass) r.push_back(it.chunk);
  }
  return r;
}
}  // namespace

TEST_SUITE("sim") {
  TEST_CASE("interleaved: Megatron's group order (schedules.py get_schedule_table)") {
    // PP2, VP2, group 2, m = 4: micro-batches 0 1 0 1 2 3 2 3, chunks 0 0 1 1 0 0 1 1.
    auto o = pipeline_order(Schedule::interleaved, 2, 2, 4, 0);
    CHECK(mbs_of(o, StepPass::forward) == std::vector<int>{0, 1, 0, 1, 2, 3, 2, 3});
    CHECK(chunks_of(o, StepPass::forward) == std::vector<int>{0, 0, 1, 1, 0, 0, 1, 1});
    // Backward walks chunks in reverse.
    CHECK(chunks_of(o, StepPass::backward) == std::vector<int>{1, 1, 0, 0, 1, 1, 0, 0});
    // Warm-up on rank 0: (p - 0 - 1)·2 + (v - 1)·p = 2 + 2 = 4 forwards before the first backward.
    CHECK(interleaved_warmup(2, 2, 4, 0, 2) == 4);
    int first_b = 0;
    while (o[static_cast<std::size_t>(first_b)].pass == StepPass::forward) ++first_b;
    CHECK(first_b == 5);  // warm-up 4, then the steady state starts with one forward
    CHECK(interleaved_warmup(4, 2, 8, 3, 4) == 4);
    CHECK(interleaved_warmup(4, 3, 4, 0, 4) == 12);  // capped at m·v
  }

  TEST_CASE("1f1b: warm-up p - rank - 1 then alternate then cool-down") {
    auto o = pipeline_order(Schedule::one_f_one_b, 4, 1, 6, 1);
    REQUIRE(o.size() == 12);
    CHECK(o[0] == ScheduleItem{0, 0, StepPass::forward});
    CHECK(o[1] == ScheduleItem{1, 0, StepPass::forward});
    CHECK(o[2] == ScheduleItem{2, 0, StepPass::forward});
    CHECK(o[3] == ScheduleItem{0, 0, StepPass::backward});
    CHECK(o[11] == ScheduleItem{5, 0, StepPass::backward});
  }

  TEST_CASE("zb-h1: every micro-batch has F and B and W with W after its B and rank r deferring r Ws") {
    const int p = 4, m = 8;
    for (int r = 0; r < p; ++r) {
      auto o = pipeline_order(Schedule::zb_h1, p, 1, m, r);
      CHECK(o.size() == static_cast<std::size_t>(3 * m));
      std::vector<int> b_pos(m, -1), w_pos(m, -1);
      for (int i = 0; i < static_cast<int>(o.size()); ++i) {
        const auto& it = o[static_cast<std::size_t>(i)];
        if (it.pass == StepPass::backward_input) b_pos[static_cast<std::size_t>(it.micro_batch)] = i;
        if (it.pass == StepPass::backward_weight) w_pos[static_cast<std::size_t>(it.micro_batch)] = i;
      }
      for (int i = 0; i < m; ++i) CHECK(w_pos[static_cast<std::size_t>(i)] > b_pos[static_cast<std::size_t>(i)]);
      // Trailing Ws after the last B: exactly the deferred count.
      int trailing = 0;
      for (auto it = o.rbegin(); it != o.rend() && it->pass == StepPass::backward_weight; ++it) ++trailing;
      CHECK(trailing == r + 1);  // the W right after the last B plus the r deferred
    }
  }

  TEST_CASE("layered: all forwards of a chunk with chunks in order then backward in reverse chunk order") {
    auto o = pipeline_order(Schedule::layered, 2, 2, 3, 0);
    CHECK(chunks_of(o, StepPass::forward) == std::vector<int>{0, 0, 0, 1, 1, 1});
    CHECK(chunks_of(o, StepPass::backward) == std::vector<int>{1, 1, 1, 0, 0, 0});
  }
}
