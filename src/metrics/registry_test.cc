#include "metrics/registry.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace dais::metrics {
namespace {

TEST(CounterTest, Increments) {
  Counter c;
  EXPECT_EQ(c.Value(), 0);
  c.Increment();
  c.Increment(2.5);
  EXPECT_EQ(c.Value(), 3.5);
}

TEST(CounterTest, NegativeIncrementIsIgnored) {
  Counter c;
  c.Increment(2);
  c.Increment(-1);
  EXPECT_EQ(c.Value(), 2);
}

TEST(GaugeTest, SetAndAdd) {
  Gauge g;
  g.Set(5);
  g.Add(-2);
  g.Add(0.5);
  EXPECT_EQ(g.Value(), 3.5);
  g.Set(-1);
  EXPECT_EQ(g.Value(), -1);
}

TEST(HistogramTest, ValueEqualToBoundGoesInThatBucket) {
  Histogram h({1, 2, 4});
  h.Observe(1);     // le=1
  h.Observe(1.5);   // le=2
  h.Observe(2);     // le=2
  h.Observe(4);     // le=4
  h.Observe(4.01);  // +Inf
  h.Observe(0);     // le=1
  EXPECT_EQ(h.CumulativeCounts(), (std::vector<uint64_t>{2, 4, 5, 6}));
  EXPECT_EQ(h.Count(), 6u);
  EXPECT_DOUBLE_EQ(h.Sum(), 1 + 1.5 + 2 + 4 + 4.01);
}

TEST(HistogramTest, NaNAndPlusInfinityGoToInfBucket) {
  Histogram h({1});
  h.Observe(std::numeric_limits<double>::quiet_NaN());
  h.Observe(std::numeric_limits<double>::infinity());
  h.Observe(-std::numeric_limits<double>::infinity());  // le=1
  EXPECT_EQ(h.CumulativeCounts(), (std::vector<uint64_t>{1, 3}));
}

TEST(HistogramTest, TrailingInfBoundIsImplicit) {
  Histogram h({1, 2, std::numeric_limits<double>::infinity()});
  EXPECT_EQ(h.bounds(), (std::vector<double>{1, 2}));
  EXPECT_EQ(h.CumulativeCounts().size(), 3u);
}

TEST(HistogramDeathTest, UnsortedBoundsAbort) {
  EXPECT_DEATH(Histogram({2, 1}), "strictly increasing");
  EXPECT_DEATH(Histogram({1, 1}), "strictly increasing");
}

TEST(BucketsTest, Latency) {
  std::vector<double> b = LatencyBuckets();
  ASSERT_EQ(b.size(), 17u);
  EXPECT_DOUBLE_EQ(b.front(), 50e-6);
  EXPECT_DOUBLE_EQ(b.back(), 10.0);
  EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
}

// Issue 31: a rollout's p99 limit must be resolvable by the gateway's buckets (a 25 ms limit
// between bounds 10 and 25 ms let Prometheus interpolate a slow canary to 24.85 ms).
TEST(BucketsTest, FineLatencyIsWithinAFactorOf125AndHasRoundLimits) {
  std::vector<double> b = FineLatencyBuckets();
  ASSERT_EQ(b.size(), 66u);
  EXPECT_EQ(b.front(), 100e-6);
  EXPECT_EQ(b.back(), 10.0);
  for (size_t i = 1; i < b.size(); ++i) {
    EXPECT_GT(b[i], b[i - 1]);
    EXPECT_LE(b[i] / b[i - 1], 1.25 + 1e-12) << "between " << b[i - 1] << " and " << b[i];
  }
  for (double limit : {1e-3, 2e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1.0}) {
    EXPECT_TRUE(std::find(b.begin(), b.end(), limit) != b.end()) << limit;
  }
}

TEST(BucketsTest, PowerOfTwo) {
  EXPECT_EQ(PowerOfTwoBuckets(8), (std::vector<double>{1, 2, 4, 8}));
  EXPECT_EQ(PowerOfTwoBuckets(10), (std::vector<double>{1, 2, 4, 8}));
  EXPECT_EQ(PowerOfTwoBuckets(1), (std::vector<double>{1}));
  EXPECT_TRUE(PowerOfTwoBuckets(0.5).empty());
}

TEST(RegistryTest, ExpositionText) {
  Registry r;
  auto& requests = r.AddCounter("dais_requests_total", "Requests received.", {"model", "code"});
  requests.Get({"resnet", "200"}).Increment(3);
  requests.Get({"bert", "200"}).Increment(0.5);
  r.AddGauge("dais_up", "1 when serving.", {}).Get({}).Set(1);
  auto& latency = r.AddHistogram("dais_latency_seconds", "Latency.", {"model"}, {0.001, 0.5, 2});
  Histogram& h = latency.Get({"resnet"});
  h.Observe(0.001);
  h.Observe(0.25);
  h.Observe(3);

  EXPECT_EQ(r.Expose(),
            "# HELP dais_latency_seconds Latency.\n"
            "# TYPE dais_latency_seconds histogram\n"
            "dais_latency_seconds_bucket{model=\"resnet\",le=\"0.001\"} 1\n"
            "dais_latency_seconds_bucket{model=\"resnet\",le=\"0.5\"} 2\n"
            "dais_latency_seconds_bucket{model=\"resnet\",le=\"2\"} 2\n"
            "dais_latency_seconds_bucket{model=\"resnet\",le=\"+Inf\"} 3\n"
            "dais_latency_seconds_sum{model=\"resnet\"} 3.251\n"
            "dais_latency_seconds_count{model=\"resnet\"} 3\n"
            "# HELP dais_requests_total Requests received.\n"
            "# TYPE dais_requests_total counter\n"
            "dais_requests_total{model=\"bert\",code=\"200\"} 0.5\n"
            "dais_requests_total{model=\"resnet\",code=\"200\"} 3\n"
            "# HELP dais_up 1 when serving.\n"
            "# TYPE dais_up gauge\n"
            "dais_up 1\n");
}

TEST(RegistryTest, HistogramWithoutLabels) {
  Registry r;
  r.AddHistogram("h", "x", {}, {1}).Get({}).Observe(0.5);
  EXPECT_EQ(r.Expose(),
            "# HELP h x\n"
            "# TYPE h histogram\n"
            "h_bucket{le=\"1\"} 1\n"
            "h_bucket{le=\"+Inf\"} 1\n"
            "h_sum 0.5\n"
            "h_count 1\n");
}

TEST(RegistryTest, SpecialValues) {
  Registry r;
  auto& g = r.AddGauge("g", "x", {"k"});
  g.Get({"a"}).Set(std::numeric_limits<double>::infinity());
  g.Get({"b"}).Set(-std::numeric_limits<double>::infinity());
  g.Get({"c"}).Set(std::numeric_limits<double>::quiet_NaN());
  g.Get({"d"}).Set(1e-5);
  g.Get({"e"}).Set(-42);
  g.Get({"f"}).Set(1e17);
  EXPECT_EQ(r.Expose(),
            "# HELP g x\n"
            "# TYPE g gauge\n"
            "g{k=\"a\"} +Inf\n"
            "g{k=\"b\"} -Inf\n"
            "g{k=\"c\"} NaN\n"
            "g{k=\"d\"} 1e-05\n"
            "g{k=\"e\"} -42\n"
            "g{k=\"f\"} 100000000000000000\n");
}

TEST(RegistryTest, Escaping) {
  Registry r;
  r.AddCounter("c", "a \\ back\nslash \"quoted\"", {"path"}).Get({"C:\\dir\n\"x\""}).Increment();
  EXPECT_EQ(r.Expose(),
            "# HELP c a \\\\ back\\nslash \"quoted\"\n"
            "# TYPE c counter\n"
            "c{path=\"C:\\\\dir\\n\\\"x\\\"\"} 1\n");
}

TEST(RegistryTest, RemoveHidesChildAndKeepsReferenceValid) {
  Registry r;
  auto& f = r.AddCounter("c", "x", {"model"});
  Counter& a = f.Get({"a"});
  f.Get({"b"}).Increment();
  a.Increment();
  f.Remove({"a"});
  f.Remove({"missing"});
  a.Increment();  // still safe
  EXPECT_EQ(a.Value(), 2);
  EXPECT_EQ(r.Expose(), "# HELP c x\n# TYPE c counter\nc{model=\"b\"} 1\n");
  // A later Get creates a fresh child.
  Counter& again = f.Get({"a"});
  EXPECT_NE(&again, &a);
  EXPECT_EQ(again.Value(), 0);
}

TEST(RegistryTest, GetReturnsSameChild) {
  Registry r;
  auto& f = r.AddGauge("g", "x", {"a", "b"});
  EXPECT_EQ(&f.Get({"1", "2"}), &f.Get({"1", "2"}));
  EXPECT_NE(&f.Get({"1", "2"}), &f.Get({"2", "1"}));
}

TEST(RegistryTest, ViewsAndStringsFindTheSameChild) {
  Registry r;
  auto& f = r.AddCounter("c", "x", {"route", "code"});
  const std::string route = "a-route-longer-than-sso", code = "200";
  Counter& by_views = f.Get({std::string_view(route), std::string_view(code)});
  by_views.Increment();
  EXPECT_EQ(&f.Get(std::vector<std::string>{route, code}), &by_views);
  EXPECT_EQ(&f.Get({route, code}), &by_views);
  // Ordered like the vectors: a prefix sorts first, each value compared whole.
  EXPECT_NE(&f.Get({"a-route", "200"}), &by_views);
  EXPECT_NE(&f.Get({"a-route-longer-than-sso", "20"}), &by_views);
  f.Remove({route, code});
  Counter& fresh = f.Get({route, code});
  EXPECT_NE(&fresh, &by_views);
  EXPECT_EQ(fresh.Value(), 0);
  EXPECT_NE(r.Expose().find("c{route=\"a-route\",code=\"200\"} 0"), std::string::npos);
}

TEST(RegistryTest, ReRegistrationReturnsSameFamily) {
  Registry r;
  auto& c1 = r.AddCounter("c", "x", {"model"});
  auto& c2 = r.AddCounter("c", "other help", {"model"});
  EXPECT_EQ(&c1, &c2);
  auto& h1 = r.AddHistogram("h", "x", {}, LatencyBuckets());
  auto& h2 = r.AddHistogram("h", "x", {}, LatencyBuckets());
  EXPECT_EQ(&h1, &h2);
}

TEST(RegistryDeathTest, MismatchedReRegistrationAborts) {
  Registry r;
  r.AddCounter("c", "x", {"model"});
  r.AddHistogram("h", "x", {}, {1, 2});
  EXPECT_DEATH(r.AddGauge("c", "x", {"model"}), "registered twice");
  EXPECT_DEATH(r.AddCounter("c", "x", {"version"}), "registered twice");
  EXPECT_DEATH(r.AddHistogram("h", "x", {}, {1, 3}), "different bucket bounds");
}

TEST(RegistryDeathTest, WrongLabelCountAborts) {
  Registry r;
  auto& f = r.AddCounter("c", "x", {"model", "version"});
  EXPECT_DEATH(f.Get({"only_one"}), "1 label values given for 2 label names");
  EXPECT_DEATH(f.Remove({"a", "b", "c"}), "3 label values given for 2 label names");
}

TEST(RegistryDeathTest, InvalidNamesAbort) {
  Registry r;
  EXPECT_DEATH(r.AddCounter("bad-name", "x", {}), "invalid metric name");
  EXPECT_DEATH(r.AddCounter("c", "x", {"1abc"}), "invalid label name");
  EXPECT_DEATH(r.AddCounter("c", "x", {"__reserved"}), "invalid label name");
  EXPECT_DEATH(r.AddCounter("c", "x", {"a", "a"}), "duplicate label name");
  EXPECT_DEATH(r.AddHistogram("h", "x", {"le"}, {1}), "reserved");
}

TEST(RegistryTest, ConcurrentIncrementsSumExactly) {
  Registry r;
  auto& counters = r.AddCounter("c", "x", {"model"});
  auto& histograms = r.AddHistogram("h", "x", {"model"}, {0.5, 1.5});
  constexpr int kThreads = 8;
  constexpr int kPerThread = 100000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Every thread looks the children up itself, racing on creation too.
      Counter& c = counters.Get({"m"});
      Histogram& h = histograms.Get({"m"});
      for (int i = 0; i < kPerThread; ++i) {
        c.Increment();
        h.Observe(t % 2 == 0 ? 1.0 : 2.0);
      }
      (void)r.Expose();  // scraping concurrently is safe
    });
  }
  for (auto& th : threads) th.join();
  // Integers below 2^53 add exactly in double.
  EXPECT_EQ(counters.Get({"m"}).Value(), kThreads * kPerThread);
  Histogram& h = histograms.Get({"m"});
  EXPECT_EQ(h.Count(), static_cast<uint64_t>(kThreads * kPerThread));
  EXPECT_EQ(h.Sum(), kThreads / 2 * kPerThread * 1.0 + kThreads / 2 * kPerThread * 2.0);
  EXPECT_EQ(h.CumulativeCounts(),
            (std::vector<uint64_t>{0, kThreads / 2 * kPerThread, kThreads * kPerThread}));
}

TEST(RegistryTest, GlobalIsASingleton) { EXPECT_EQ(&Registry::Global(), &Registry::Global()); }

}  // namespace
}  // namespace dais::metrics
