#include "gateway/balancer.h"

#include <gtest/gtest.h>

#include <map>

#include "gateway/rate_limit.h"
#include "gateway/tenant.h"

namespace dais::gateway {
namespace {

using namespace std::chrono_literals;
const auto kT0 = Balancer::Clock::time_point{} + 1h;

TEST(BalancerTest, TwoChoicesPreferTheLessLoadedNode) {
  Balancer b;
  const std::vector<std::string> nodes = {"a", "b"};
  for (int i = 0; i < 3; ++i) b.Start("a");
  for (uint64_t r = 0; r < 20; ++r) EXPECT_EQ(b.Pick(nodes, {}, r, kT0), "b");
  // Spread over many nodes when idle.
  std::map<std::string, int> picks;
  const std::vector<std::string> many = {"a", "b", "c", "d"};
  Balancer idle;
  for (uint64_t r = 0; r < 400; ++r) ++picks[idle.Pick(many, {}, r * 7919, kT0)];
  EXPECT_EQ(picks.size(), 4u);
  EXPECT_EQ(b.Pick({}, {}, 1, kT0), "");
}

TEST(BalancerTest, ExcludedNodesAreSkippedUnlessNothingElseIsLeft) {
  Balancer b;
  const std::vector<std::string> tried = {"a"};
  for (uint64_t r = 0; r < 20; ++r) EXPECT_EQ(b.Pick({"a", "b"}, tried, r, kT0), "b");
  EXPECT_EQ(b.Pick({"a"}, tried, 3, kT0), "a");
}

TEST(BalancerTest, ConsecutiveFailuresEjectThenReadmitWithGrowingEjections) {
  Balancer b({3, 1000ms, 4000ms});
  for (int i = 0; i < 2; ++i) {
    b.Start("a");
    EXPECT_FALSE(b.Finish("a", false, kT0));
  }
  b.Start("a");
  EXPECT_TRUE(b.Finish("a", false, kT0)) << "the third failure in a row ejects";
  EXPECT_TRUE(b.Ejected("a", kT0 + 999ms));
  for (uint64_t r = 0; r < 20; ++r) EXPECT_EQ(b.Pick({"a", "b"}, {}, r, kT0 + 500ms), "b");
  EXPECT_FALSE(b.Ejected("a", kT0 + 1000ms)) << "re-admitted";
  for (int i = 0; i < 3; ++i) {
    b.Start("a");
    b.Finish("a", false, kT0 + 1000ms);
  }
  EXPECT_TRUE(b.Ejected("a", kT0 + 2999ms)) << "the second ejection in a row lasts twice as long";
  // Panic: every node ejected: still an answer.
  EXPECT_EQ(b.Pick({"a"}, {}, 1, kT0 + 1500ms), "a");
  // A success resets the count.
  b.Start("a");
  b.Finish("a", true, kT0 + 4000ms);
  for (int i = 0; i < 2; ++i) {
    b.Start("a");
    EXPECT_FALSE(b.Finish("a", false, kT0 + 4000ms));
  }
  EXPECT_EQ(b.Outstanding("a"), 0);
}

TEST(BalancerTest, NodesGoneFromTheClusterAreForgottenOnceIdle) {
  Balancer b;
  const auto now = Balancer::Clock::now();
  b.Start("a");
  b.Start("b");
  EXPECT_FALSE(b.Finish("b", false, now));
  b.Start("c");
  EXPECT_EQ(b.tracked(), 3u);
  b.Retain({"a"});  // b is gone and idle; c is gone but still has a request in flight
  EXPECT_EQ(b.tracked(), 2u);
  EXPECT_EQ(b.Outstanding("c"), 1);
  EXPECT_TRUE(b.Finish("c", true, now) == false);
  b.Retain({"a"});
  EXPECT_EQ(b.tracked(), 1u);
  EXPECT_EQ(b.Outstanding("a"), 1);
}

TEST(TokenBucketTest, BurstThenRateAndRetryAfter) {
  TokenBucket t(10, 3, kT0);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(t.Take(kT0));
  std::chrono::milliseconds wait{0};
  EXPECT_FALSE(t.Take(kT0, &wait));
  EXPECT_EQ(wait, 100ms);
  EXPECT_TRUE(t.Take(kT0 + 100ms));
  EXPECT_FALSE(t.Take(kT0 + 150ms, &wait));
  EXPECT_EQ(wait, 50ms);
  EXPECT_TRUE(t.Take(kT0 + 10s));  // refilled, capped at the burst
  EXPECT_TRUE(t.Take(kT0 + 10s));
  EXPECT_TRUE(t.Take(kT0 + 10s));
  EXPECT_FALSE(t.Take(kT0 + 10s));
  TokenBucket unlimited(0, 0, kT0);
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(unlimited.Take(kT0));
}

// Issue 32: a rate of 1e-300 gave Retry-After: -9223372036854774.
TEST(TokenBucketTest, RetryAfterIsBoundedAndTinyRatesAreRefused) {
  TokenBucket slow(1e-300, 1, kT0);
  EXPECT_TRUE(slow.Take(kT0));
  std::chrono::milliseconds wait{0};
  EXPECT_FALSE(slow.Take(kT0, &wait));
  EXPECT_EQ(wait, std::chrono::milliseconds(86'400'000));
  EXPECT_FALSE(ParseTenant("kind: tenant\nname: t\nrequests_per_second: 1e-300\n").ok());
  EXPECT_NE(ParseTenant("kind: tenant\nname: t\nrequests_per_second: 1e-4\n")
                .status()
                .message()
                .find("0.001 to 10000000"),
            std::string::npos);
  EXPECT_TRUE(ParseTenant("kind: tenant\nname: t\nrequests_per_second: 0.001\n").ok());
  EXPECT_TRUE(ParseTenant("kind: tenant\nname: t\n").ok());
}

TEST(RetryBudgetTest, RetriesAreAShareOfRecentRequests) {
  RetryBudget budget(0.2, 0.1);  // 20 % plus 1 per 10 s
  for (int i = 0; i < 100; ++i) budget.OnRequest(kT0);
  int allowed = 0;
  while (budget.TryRetry(kT0) && allowed < 1000) ++allowed;
  EXPECT_EQ(allowed, 21);
  EXPECT_FALSE(budget.TryRetry(kT0 + 5s)) << "still within the window";
  EXPECT_TRUE(budget.TryRetry(kT0 + 11s)) << "the window moved on";
}

}  // namespace
}  // namespace dais::gateway
