// Max-min fair sharing, hand-computed cases (Bertsekas & Gallager, Data Networks §6.5.2).
#include <doctest/doctest.h>
#include "support/approx.hpp"

#include <limits>
#include <vector>

#include "tetra/costmodel/maxmin.hpp"

using tetra::test::approx;
using tetra::costmodel::max_min_rates;
using tetra::costmodel::MaxMinFlow;

TEST_SUITE("costmodel") {
  TEST_CASE("max-min: one link shared equally") {
    // Capacity 12 shared by 3 flows -> 4 each.
    std::vector<double> cap{12.0};
    std::vector<MaxMinFlow> flows(3, MaxMinFlow{{0}, -1});
    auto r = max_min_rates(cap, flows);
    REQUIRE(r.size() == 3);
    for (double x : r) CHECK(x == approx(4.0));
  }

  TEST_CASE("max-min: classic two-link line network") {
    // Links A (cap 1) and B (cap 2). Flow 0 crosses A and B, flow 1 only A, flow 2 only B.
    // Filling: A saturates at 0.5 each (flows 0, 1 freeze at 0.5); B has 2 - 0.5 = 1.5 left
    // for flow 2 -> rates {0.5, 0.5, 1.5}.
    std::vector<double> cap{1.0, 2.0};
    std::vector<MaxMinFlow> flows{{{0, 1}, -1}, {{0}, -1}, {{1}, -1}};
    auto r = max_min_rates(cap, flows);
    CHECK(r[0] == approx(0.5));
    CHECK(r[1] == approx(0.5));
    CHECK(r[2] == approx(1.5));
  }

  TEST_CASE("max-min: a flow's own bound frees capacity for the others") {
    // Capacity 10, flow 0 bounded at 2 -> flows 1 and 2 share the remaining 8 -> 4 each.
    std::vector<double> cap{10.0};
    std::vector<MaxMinFlow> flows{{{0}, 2.0}, {{0}, -1}, {{0}, -1}};
    auto r = max_min_rates(cap, flows);
    CHECK(r[0] == approx(2.0));
    CHECK(r[1] == approx(4.0));
    CHECK(r[2] == approx(4.0));
  }

  TEST_CASE("max-min: DP ring and PP send on one NIC with the receive side elsewhere") {
    // Resources: 0 = NIC tx of rank A (cap 1), 1 = NIC rx of rank A (cap 1), 2 = NIC rx of B (cap 1).
    // DP collective on A uses tx+rx of A; PP send A->B uses tx of A and rx of B.
    // Both bottleneck on A's tx: 0.5 each.
    std::vector<double> cap{1.0, 1.0, 1.0};
    std::vector<MaxMinFlow> flows{{{0, 1}, -1}, {{0, 2}, -1}};
    auto r = max_min_rates(cap, flows);
    CHECK(r[0] == approx(0.5));
    CHECK(r[1] == approx(0.5));
  }

  TEST_CASE("max-min: unbounded capacity and empty flows") {
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<double> cap{inf};
    std::vector<MaxMinFlow> flows{{{0}, -1}, {{}, -1}};
    auto r = max_min_rates(cap, flows);
    CHECK(r[0] == inf);
    CHECK(r[1] == 0.0);
  }
}
