// Event queue order, cancellation, streams, shared links and graph errors.
#include <doctest/doctest.h>
#include "support/approx.hpp"

#include <string>
#include <vector>

#include "tetra/sim/engine.hpp"
#include "tetra/sim/layer.hpp"

using tetra::test::approx;
using namespace tetra::sim;

TEST_SUITE("sim") {
  TEST_CASE("time: one conversion point rounding to the nearest picosecond") {
    CHECK(Duration::from_seconds(1.5e-12).count_ps() == 2);
    CHECK(Duration::from_seconds(2.5e-6) == Duration::ns(2500));
    CHECK(Duration::from_seconds(1.0).count_ps() == 1000000000000LL);
    CHECK_THROWS((void)Duration::from_seconds(1e300));
    CHECK((Time::zero() + Duration::us(3)) - Time::zero() == Duration::us(3));
  }

  TEST_CASE("event queue: equal times run in insertion order and cancellation leaves a tombstone") {
    EventQueue q;
    std::string log;
    q.schedule_at(Time::ps(10), [&] { log += 'b'; });
    q.schedule_at(Time::ps(5), [&] { log += 'a'; });
    auto c = q.schedule_at(Time::ps(10), [&] { log += 'X'; });
    q.schedule_at(Time::ps(10), [&] { log += 'c'; });
    q.schedule_at(Time::ps(10), [&] {
      log += 'd';
      q.schedule_in(Duration{}, [&] { log += 'e'; });  // same time, after everything queued
    });
    q.cancel(c);
    q.run();
    CHECK(log == "abcde");
    CHECK(q.now() == Time::ps(10));
    CHECK(q.executed() == 5);
  }

  TEST_CASE("event queue: plain calls and handlers share one order, clear() resets the count") {
    EventQueue q;
    std::string log;
    auto call = [](void* ctx, std::uint32_t arg) {
      *static_cast<std::string*>(ctx) += static_cast<char>('a' + arg);
    };
    q.schedule_call_at(Time::ps(10), call, &log, 1);  // b
    q.schedule_at(Time::ps(10), [&] { log += 'c'; });
    q.schedule_call_at(Time::ps(5), call, &log, 0);  // a
    const auto x = q.schedule_call_at(Time::ps(10), call, &log, 23);  // 'x', cancelled
    q.schedule_call_at(Time::ps(10), call, &log, 3);  // d
    q.cancel(x);
    q.run();
    CHECK(log == "abcd");
    CHECK(q.executed() == 4);
    // A reused queue counts only its new events (StepOutcome::events of a reused Simulator).
    q.clear();
    CHECK(q.executed() == 0);
    CHECK(q.now() == Time::zero());
    q.schedule_at(Time::ps(1), [&] { log += 'e'; });
    q.schedule_call_at(Time::ps(2), call, &log, 5);  // f
    q.run();
    CHECK(log == "abcdef");
    CHECK(q.executed() == 2);
  }

  TEST_CASE("engine: flows in separate link groups keep their rates when another group changes") {
    // Link 0: A (1 s) and B (2 s) share it: 0.5 each until A ends at 2 s, then B alone at
    // full rate ends at 2 + (2 - 1) = 3 s. Link 1: C (1 s) alone throughout: ends at 1 s; D
    // (1 s, joins at 1.5 s) alone again: ends at 2.5 s. The re-solve of one group leaves the
    // other untouched.
    TaskGraph g;
    const auto l0 = g.add_link("nic 0");
    const auto l1 = g.add_link("nic 1");
    TaskSpec one;
    one.work_s = 1.0;
    TaskSpec two;
    two.work_s = 2.0;
    TaskSpec late = one;
    late.duration = Duration::from_seconds(1.5);
    const auto a = g.add_task(one, {l0});
    const auto b = g.add_task(two, {l0});
    const auto c = g.add_task(one, {l1});
    const auto d = g.add_task(late, {l1});
    Engine e;
    EventQueue q;
    e.run(q, g);
    CHECK(e.timings()[a].end == Time::ps(2000000000000LL));
    CHECK(e.timings()[b].end == Time::ps(3000000000000LL));
    CHECK(e.timings()[c].end == Time::ps(1000000000000LL));
    CHECK(e.timings()[d].end == Time::ps(2500000000000LL));
    // The engine is reusable: the same graph again gives the same timeline.
    e.run(q, g);
    CHECK(e.timings()[b].end == Time::ps(3000000000000LL));
    CHECK(e.timings()[d].end == Time::ps(2500000000000LL));
  }

  TEST_CASE("event queue: run_until stops at the horizon") {
    EventQueue q;
    int n = 0;
    q.schedule_at(Time::ps(1), [&] { ++n; });
    q.schedule_at(Time::ps(100), [&] { ++n; });
    q.run_until(Time::ps(50));
    CHECK(n == 1);
    CHECK(q.now() == Time::ps(50));
    CHECK_FALSE(q.empty());
  }

  TEST_CASE("engine: stream FIFO order and dependencies") {
    TaskGraph g;
    const auto s0 = g.add_stream("compute", 0);
    const auto s1 = g.add_stream("comm", 0);
    TaskSpec a;
    a.stream = s0;
    a.duration = Duration::ps(10);
    const auto t0 = g.add_task(a);
    const auto t1 = g.add_task(a);  // after t0 on the stream
    TaskSpec c;
    c.stream = s1;
    c.duration = Duration::ps(25);
    const auto t2 = g.add_task(c);
    g.add_dep(t0, t2);
    TaskSpec d = a;
    const auto t3 = g.add_task(d);
    g.add_dep(t2, t3);
    Engine e;
    EventQueue q;
    e.run(q, g);
    CHECK(e.timings()[t1].start == Time::ps(10));
    CHECK(e.timings()[t2].start == Time::ps(10));
    CHECK(e.timings()[t2].end == Time::ps(35));
    CHECK(e.timings()[t3].start == Time::ps(35));
    CHECK(e.makespan() == Time::ps(45));
  }

  TEST_CASE("engine: two transfers on one link share it max-min fairly") {
    // Two 1 s transfers on one link start together: each runs at half rate, both end at 2 s.
    // A third transfer on another link is unaffected and ends at 1 s.
    TaskGraph g;
    const auto l0 = g.add_link("nic");
    const auto l1 = g.add_link("other");
    TaskSpec t;
    t.work_s = 1.0;
    const auto a = g.add_task(t, {l0});
    const auto b = g.add_task(t, {l0});
    const auto c = g.add_task(t, {l1});
    Engine e;
    EventQueue q;
    e.run(q, g);
    CHECK(e.timings()[a].end == Time::ps(2000000000000LL));
    CHECK(e.timings()[b].end == Time::ps(2000000000000LL));
    CHECK(e.timings()[c].end == Time::ps(1000000000000LL));
  }

  TEST_CASE("engine: a late transfer slows an earlier one only while they overlap") {
    // A: 1 s of work from 0. B: 0.5 s of work joining at 0.5 s (latency). From 0.5 s both run
    // at half rate: A has 0.5 left -> needs 1 s -> would end at 1.5; B has 0.5 -> also 1.5.
    TaskGraph g;
    const auto l = g.add_link("nic");
    TaskSpec ta;
    ta.work_s = 1.0;
    TaskSpec tb;
    tb.work_s = 0.5;
    tb.duration = Duration::from_seconds(0.5);
    const auto a = g.add_task(ta, {l});
    const auto b = g.add_task(tb, {l});
    Engine e;
    EventQueue q;
    e.run(q, g);
    CHECK(e.timings()[a].end.seconds() == approx(1.5));
    CHECK(e.timings()[b].end.seconds() == approx(1.5));
  }

  TEST_CASE("engine: memory pools track allocation at start and release at end") {
    TaskGraph g;
    const auto s = g.add_stream("compute", 0);
    TaskSpec f;
    f.stream = s;
    f.duration = Duration::ps(5);
    f.pool = 0;
    f.alloc_bytes = 100;
    g.add_task(f);
    g.add_task(f);
    TaskSpec b = f;
    b.alloc_bytes = 0;
    b.free_bytes = 100;
    g.add_task(b);
    g.add_task(b);
    Engine e;
    EventQueue q;
    e.run(q, g, 1, true);
    CHECK(e.pool_peak_bytes()[0] == approx(200));
    CHECK(e.pool_samples()[0].back().bytes == approx(0));
  }

  TEST_CASE("engine: a cycle is reported naming stage and micro-batch and task") {
    TaskGraph g;
    const auto s = g.add_stream("compute", 2);
    TaskSpec t;
    t.stream = s;
    t.duration = Duration::ps(1);
    t.stage = 2;
    t.micro_batch = 3;
    t.role = TaskRole::backward;
    t.name = g.intern("B");
    const auto a = g.add_task(t);
    t.micro_batch = 4;
    t.name = g.intern("F");
    const auto b = g.add_task(t);
    g.add_dep(b, a);  // a before b on the stream, but a waits for b
    Engine e;
    EventQueue q;
    CHECK_THROWS_AS(e.run(q, g), GraphError);
    std::string msg;
    try {
      g.check_acyclic();
    } catch (const GraphError& err) {
      msg = err.what();
    }
    CHECK(msg.find("cycle") != std::string::npos);
    CHECK(msg.find("stage 2") != std::string::npos);
    CHECK(msg.find("micro-batch") != std::string::npos);
    CHECK(msg.find("task") != std::string::npos);
  }
}

TEST_SUITE("sim") {
  TEST_CASE("engine: compute slows while a collective holds part of the SMs") {
    // Compute of 1 s on GPU 0; a collective of 0.5 s taking 20 % of the SMs runs beside it
    // from t = 0. Compute runs at 0.8 for 0.5 s (0.4 s of work), then 0.6 s at full rate:
    // it ends at 1.1 s. The collective is not slowed.
    TaskGraph g;
    const auto c = g.add_stream("compute", 0);
    const auto n = g.add_stream("comm", 0);
    TaskSpec t;
    t.stream = c;
    t.sm_group = 0;
    t.duration = Duration::from_seconds(1.0);
    const auto a = g.add_task(t);
    TaskSpec k;
    k.stream = n;
    k.sm_group = 0;
    k.sm_share = 0.2;
    k.duration = Duration::from_seconds(0.5);
    const auto b = g.add_task(k);
    Engine e;
    EventQueue q;
    e.run(q, g);
    CHECK(e.timings()[b].end.seconds() == approx(0.5));
    CHECK(e.timings()[a].end.seconds() == approx(1.1));
  }

  TEST_CASE("layer replay: paired EP exchanges run under the co-scheduled pass, blocking nothing") {
    // One forward pass: GEMM 1 ms, dispatch 0.5 ms, GEMM 2 ms, combine 0.8 ms. Blocking, the
    // exchanges sit on the critical path: 1 + 0.5 + 2 + 0.8 = 4.3 ms. Paired (Megatron-Core
    // combined 1F1B, combined_1f1b.py) the other micro-batch's compute covers them: the pass
    // takes its own compute, 3 ms, or, when the exchanges outlast it (2 x 2.5 ms), 5 ms.
    using tetra::ops::Op;
    auto ops_with = [](double exchange_ms, bool paired) {
      std::vector<Op> ops(4);
      for (std::size_t i = 0; i < ops.size(); ++i) ops[i].pass = tetra::ops::Pass::forward;
      ops[0].kind = ops[2].kind = tetra::ops::OpKind::gemm;
      ops[0].flops = 1e-3;
      ops[2].flops = 2e-3;
      for (std::size_t i : {1u, 3u}) {
        ops[i].kind = tetra::ops::OpKind::collective;
        ops[i].coll = tetra::ops::CollectiveKind::all_to_all;
        ops[i].dim = tetra::ops::CommDim::ep;
        ops[i].paired = paired;
      }
      ops[1].bytes = exchange_ms == 0 ? 0.5e-3 : exchange_ms * 1e-3;
      ops[3].bytes = exchange_ms == 0 ? 0.8e-3 : exchange_ms * 1e-3;
      return ops;
    };
    const OpPricer price = [](const Op& op) { return op.is_compute() ? op.flops : op.bytes; };
    CHECK(replay_layer(ops_with(0, false), price).forward.seconds == approx(4.3e-3));
    const LayerTimes paired = replay_layer(ops_with(0, true), price);
    CHECK(paired.forward.seconds == approx(3.0e-3));
    CHECK(paired.forward.exposed_s[static_cast<std::size_t>(CommAxis::ep)] == approx(0.0));
    const LayerTimes comm_bound = replay_layer(ops_with(2.5, true), price);
    CHECK(comm_bound.forward.seconds == approx(5.0e-3));
    CHECK(comm_bound.forward.exposed_s[static_cast<std::size_t>(CommAxis::ep)] == approx(2.0e-3));
  }

  TEST_CASE("layer replay: the host issues every kernel, and after a sync the GPU waits for it") {
    // Hand-computed (sim/layer.hpp HostCost): four compute ops of 4, 1, 1 and 1 ms; the host
    // takes 1 ms per kernel and a 0.5 ms round trip at a sync.
    using tetra::ops::Op;
    auto ops_with = [](bool sync) {
      std::vector<Op> ops(4);
      for (Op& op : ops) {
        op.kind = tetra::ops::OpKind::memory_bound;
        op.bytes = 1e-3;
      }
      ops[0].bytes = 4e-3;
      ops[1].host_wait = sync ? tetra::ops::HostWait::round_trip : tetra::ops::HostWait::none;
      return ops;
    };
    const OpPricer price = [](const Op& op) { return op.bytes; };
    const HostCost host{1e-3, 0.5e-3};
    // No sync: the host runs ahead; 4 ms of issuing under 7 ms of GPU work.
    const LayerTimes ahead = replay_layer(ops_with(false), price, false, 0, host);
    CHECK(ahead.forward.seconds == approx(7e-3));
    CHECK(ahead.forward.host_s == approx(0.0));
    // Sync before op 1: the host issues op 0 (0-1 ms), which runs 1-5 ms; the host waits for
    // it, copies (5-6.5 ms incl. issuing op 1), op 1 runs 6.5-7.5, op 2 is issued 6.5-7.5 and
    // runs 7.5-8.5, op 3 is issued 7.5-8.5 and runs 8.5-9.5. The GPU waited 1 + 1.5 ms.
    const LayerTimes synced = replay_layer(ops_with(true), price, false, 0, host);
    CHECK(synced.forward.seconds == approx(9.5e-3));
    CHECK(synced.forward.host_s == approx(2.5e-3));
    // Host-bound without a sync: 4 kernels of 0.1 ms GPU each take 4 ms to issue.
    auto tiny = ops_with(false);
    for (Op& op : tiny) op.bytes = 0.1e-3;
    const LayerTimes bound = replay_layer(tiny, price, false, 0, host);
    CHECK(bound.forward.seconds == approx(4e-3));
    CHECK(bound.forward.host_s == approx(3.6e-3));
    // Per-expert kernels multiply the issuing; CUDA graphs remove it.
    tiny[0].host_kernels = 5;
    CHECK(replay_layer(tiny, price, false, 0, host).forward.seconds == approx(8e-3));
    for (Op& op : tiny) op.graphed = true;
    CHECK(replay_layer(tiny, price, false, 0, host).forward.seconds == approx(0.4e-3));
    // At a MoE dispatch the dispatcher's own work after the wait (resume_s, 2 ms) delays the
    // next launch: op 1 is issued 5-8.5 ms and runs 8.5-9.5, op 2 9.5-10.5, op 3 10.5-11.5;
    // the GPU waited 1 + 3.5. Other waits pay the round trip alone.
    const HostCost resuming{1e-3, 0.5e-3, 2e-3};
    auto dispatch = ops_with(true);
    dispatch[1].host_wait = tetra::ops::HostWait::token_counts;
    const LayerTimes resumed = replay_layer(dispatch, price, false, 0, resuming);
    CHECK(resumed.forward.seconds == approx(11.5e-3));
    CHECK(resumed.forward.host_s == approx(4.5e-3));
    CHECK(replay_layer(ops_with(true), price, false, 0, resuming).forward.seconds == approx(9.5e-3));
    CHECK(replay_layer(ops_with(false), price, false, 0, resuming).forward.seconds == approx(7e-3));
    // No host cost given: the GPU alone.
    CHECK(replay_layer(ops_with(true), price).forward.seconds == approx(7e-3));
    // Repetitions (per-expert GEMMs) are issued one by one after the sync: op A 1-2 ms; the
    // host waits, copies and issues 3 repetitions of op B (2-5.5 ms), which run 5.5-5.8 ms.
    std::vector<Op> reps(2);
    for (Op& op : reps) op.kind = tetra::ops::OpKind::memory_bound;
    reps[0].bytes = 1e-3;
    reps[1].bytes = 0.1e-3;
    reps[1].count = 3;
    reps[1].host_wait = tetra::ops::HostWait::round_trip;
    const LayerTimes repeated = replay_layer(reps, price, false, 0, host);
    CHECK(repeated.forward.seconds == approx(5.8e-3));
    CHECK(repeated.forward.host_s == approx(4.5e-3));
    // A blocking exchange the host issues late after a sync: op A 1-2 ms; the host waits for
    // it and issues the exchange 2-3.5, which runs 3.5-4.5; op B, issued 3.5-4.5, runs
    // 4.5-5.5. B's 2.5 ms gap: 1.5 the exchange waited for the host, 1 the exchange itself.
    std::vector<Op> late(3);
    late[0].kind = late[2].kind = tetra::ops::OpKind::memory_bound;
    late[0].bytes = late[2].bytes = late[1].bytes = 1e-3;
    late[1].kind = tetra::ops::OpKind::collective;
    late[1].dim = tetra::ops::CommDim::ep;
    late[1].host_wait = tetra::ops::HostWait::round_trip;
    const LayerTimes split = replay_layer(late, price, false, 0, host);
    CHECK(split.forward.seconds == approx(5.5e-3));
    CHECK(split.forward.host_s == approx(2.5e-3));
    CHECK(split.forward.exposed_s[static_cast<std::size_t>(CommAxis::ep)] == approx(1e-3));
    // A second exchange of 1 ms right behind it on the same stream (the all-to-all
    // dispatcher's probabilities after its tokens): issued 3.5-4.5, it runs 4.5-5.5 behind
    // the first, and B, issued 4.5-5.5, runs 5.5-6.5. B's 3.5 ms gap: the 1.5 ms the first
    // exchange waited for the host is the host's, though the second exchange ends it; the
    // two exchanges' 2 ms are EP time.
    std::vector<Op> queued(4);
    queued[0] = late[0];
    queued[1] = late[1];
    queued[2] = late[1];
    queued[2].host_wait = tetra::ops::HostWait::none;
    queued[3] = late[2];
    const LayerTimes behind = replay_layer(queued, price, false, 0, host);
    CHECK(behind.forward.seconds == approx(6.5e-3));
    CHECK(behind.forward.host_s == approx(2.5e-3));
    CHECK(behind.forward.exposed_s[static_cast<std::size_t>(CommAxis::ep)] == approx(2e-3));
  }
}
