#include "perf/stats.h"

#include <gtest/gtest.h>

#include <numeric>

namespace dais::perf {
namespace {

TEST(Percentile, NearestRank) {
  std::vector<int64_t> v(100);
  std::iota(v.begin(), v.end(), 1);  // 1..100
  EXPECT_EQ(Percentile(v, 50), 50);
  EXPECT_EQ(Percentile(v, 90), 90);
  EXPECT_EQ(Percentile(v, 99), 99);
  EXPECT_EQ(Percentile(v, 100), 100);
  EXPECT_EQ(Percentile(v, 0.1), 1);
  EXPECT_EQ(Percentile({}, 50), 0);
  EXPECT_EQ(Percentile({7}, 99), 7);
  EXPECT_EQ(Percentile({1, 2, 3, 4}, 50), 2);
  EXPECT_EQ(Percentile({1, 2, 3, 4}, 51), 3);
}

TEST(SummarizeLatencies, SortsAndConvertsToMicroseconds) {
  std::vector<int64_t> ns = {5000, 1000, 3000, 2000, 4000};
  LatencySummary s = SummarizeLatencies(&ns);
  EXPECT_DOUBLE_EQ(s.avg_us, 3.0);
  EXPECT_DOUBLE_EQ(s.p50_us, 3.0);
  EXPECT_DOUBLE_EQ(s.p99_us, 5.0);
  EXPECT_EQ(ns.front(), 1000);
  std::vector<int64_t> empty;
  EXPECT_DOUBLE_EQ(SummarizeLatencies(&empty).p99_us, 0);
}

TEST(IsStable, LastThreeWithinTolerance) {
  EXPECT_FALSE(IsStable({100, 100}, 10));
  EXPECT_TRUE(IsStable({100, 100, 100}, 10));
  EXPECT_TRUE(IsStable({5, 100, 95, 105}, 10));  // only the last 3 count
  EXPECT_FALSE(IsStable({100, 100, 130}, 10));   // mean 110, 130 is 18% off
  EXPECT_TRUE(IsStable({100, 100, 130}, 20));
  EXPECT_FALSE(IsStable({100, 111, 89}, 10));  // mean 100: 11% off
  EXPECT_TRUE(IsStable({0, 0, 0}, 10));        // nothing completed, consistently
  EXPECT_FALSE(IsStable({0, 0, 1}, 10));
}

TEST(Delta, PerRequestAveragesAndBatch) {
  ServerStats a, b;
  a.inference_count = 10;
  a.execution_count = 10;
  a.queue = {10, 10'000};
  b.inference_count = 50;
  b.execution_count = 20;
  b.queue = {50, 90'000};             // 40 requests, 80 us in total -> 2 us
  b.compute_infer = {10, 1'000'000};  // 10 executions, 1 ms -> 100 us
  b.success = {40, 4'000'000};
  ServerBreakdown d = Delta(a, b);
  EXPECT_DOUBLE_EQ(d.queue_us, 2.0);
  EXPECT_DOUBLE_EQ(d.compute_infer_us, 100.0);
  EXPECT_DOUBLE_EQ(d.compute_input_us, 0.0);
  EXPECT_DOUBLE_EQ(d.success_us, 100.0);
  EXPECT_EQ(d.inferences, 40u);
  EXPECT_EQ(d.executions, 10u);
  EXPECT_DOUBLE_EQ(d.avg_batch, 4.0);
  // Counters that went backwards (a reloaded model) give zeros, not garbage.
  ServerBreakdown back = Delta(b, a);
  EXPECT_EQ(back.inferences, 0u);
  EXPECT_DOUBLE_EQ(back.avg_batch, 0);
  EXPECT_DOUBLE_EQ(back.queue_us, 0);
}

}  // namespace
}  // namespace dais::perf
