// Error statistics of tetrasim validate, checked on small hand-computed cases.

#include <doctest/doctest.h>
#include "support/approx.hpp"

#include <string>
#include <vector>

#include "stats.hpp"

using tetra::test::approx;
using namespace tetra::cli;

TEST_SUITE("cli") {

TEST_CASE("absolute percentage errors and their summary") {
  CHECK(ape(2.0, 3.0) == approx(0.5));
  CHECK(ape(4.0, 3.0) == approx(0.25));
  CHECK(ape(-2.0, -1.0) == approx(0.5));
  // {0.5, 0.25}: mean 0.375, median (even count) (0.25 + 0.5) / 2 = 0.375, max 0.5.
  const ErrorSummary s = summarize({0.5, 0.25});
  CHECK(s.n == 2);
  CHECK(s.mean == approx(0.375));
  CHECK(s.median == approx(0.375));
  CHECK(s.max == approx(0.5));
  // Odd count: the middle of the sorted list {0.1, 0.2, 0.9}.
  CHECK(summarize({0.9, 0.1, 0.2}).median == approx(0.2));
  CHECK(summarize({}).n == 0);
}

TEST_CASE("average ranks share ties") {
  CHECK(average_ranks({10, 20, 20, 30}) == std::vector<double>{1, 2.5, 2.5, 4});
  CHECK(average_ranks({3, 1, 2}) == std::vector<double>{3, 1, 2});
  CHECK(average_ranks({5, 5, 5}) == std::vector<double>{2, 2, 2});
}

TEST_CASE("Spearman rank correlation") {
  CHECK(*spearman({1, 2, 3}, {10, 20, 30}) == approx(1.0));
  CHECK(*spearman({1, 2, 3}, {30, 20, 10}) == approx(-1.0));
  // With a tie: ranks a = 1..5, ranks b of {5,6,7,8,7} = {1,2,3.5,5,3.5}.
  // Deviations from the mean 3: a {-2,-1,0,1,2}, b {-2,-1,0.5,2,0.5};
  // cov = 4+1+0+2+1 = 8, var a = 10, var b = 9.5, r = 8 / sqrt(95) = 0.820783.
  CHECK(*spearman({1, 2, 3, 4, 5}, {5, 6, 7, 8, 7}) == approx(0.820783).epsilon(1e-5));
  CHECK_FALSE(spearman({1, 2, 3}, {4, 4, 4}).has_value());  // constant side: undefined
  CHECK_FALSE(spearman({1}, {1}).has_value());
  CHECK_FALSE(spearman({1, 2}, {1}).has_value());
}

TEST_CASE("Spearman is averaged over groups of at least three rows") {
  // Group a: perfectly ordered (+1); group b: reversed (-1); group c has 2 rows and is left out.
  const std::vector<std::string> g{"a", "a", "a", "b", "b", "b", "c", "c"};
  const std::vector<double> m{1, 2, 3, 1, 2, 3, 1, 2};
  const std::vector<double> p{1, 2, 3, 3, 2, 1, 2, 1};
  CHECK(*grouped_spearman(g, m, p) == approx(0.0));
  CHECK(*grouped_spearman({"a", "a", "a"}, {1, 2, 3}, {1, 3, 2}) == approx(0.5));
  CHECK_FALSE(grouped_spearman({"a", "a"}, {1, 2}, {1, 2}).has_value());
}

}  // TEST_SUITE
