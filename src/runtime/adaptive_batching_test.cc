// The adaptive batching policy on a fake clock: time is whatever the test passes in.
#include "runtime/adaptive_batching.h"

#include <gtest/gtest.h>

#include "common/status_testing.h"
#include "runtime/batch_queue.h"

namespace dais::runtime {
namespace {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kT0 = 1000000 * kUs;

// A model whose batch costs `fixed` + `per_row` * rows microseconds, measured at `sizes`.
BatchCostModel Costs(double fixed_us, double per_row_us, std::vector<int64_t> sizes) {
  BatchCostModel m;
  for (int64_t n : sizes) {
    m.Observe(n, static_cast<uint64_t>((fixed_us + per_row_us * static_cast<double>(n)) * 1e3));
  }
  return m;
}

// Arrivals every `gap_us`, the last at `last_ns`.
ArrivalEstimator Arrivals(uint64_t gap_us, uint64_t last_ns, int count = 16) {
  ArrivalEstimator a;
  for (int i = count - 1; i >= 0; --i)
    a.Observe(last_ns - static_cast<uint64_t>(i) * gap_us * kUs, 1);
  return a;
}

TEST(BatchCostModelTest, InterpolatesAndExtrapolatesLinearly) {
  BatchCostModel m;
  EXPECT_EQ(m.Estimate(4), 0);
  m.Observe(2, 200 * kUs);
  m.Observe(8, 500 * kUs);
  EXPECT_DOUBLE_EQ(m.Estimate(2), 200e3);
  EXPECT_DOUBLE_EQ(m.Estimate(4), 300e3);    // between the measured sizes
  EXPECT_DOUBLE_EQ(m.Estimate(16), 1000e3);  // above: linear, no economy of scale assumed
  EXPECT_DOUBLE_EQ(m.Estimate(1), 100e3);    // below: proportional to the smallest
  m.Observe(2, 300 * kUs);                   // a running mean, not the last sample
  EXPECT_GT(m.Estimate(2), 200e3);
  EXPECT_LT(m.Estimate(2), 300e3);
}

TEST(BatchCostModelTest, WarmupSeedIsReplacedByTheFirstMeasurement) {
  BatchCostModel m;
  m.Seed(1, 30000 * kUs);  // TorchScript's first call: profiling, 30 ms
  EXPECT_DOUBLE_EQ(m.Estimate(1), 30000e3);
  m.Seed(1, 50 * kUs);  // a second warm-up run: the smaller guess
  EXPECT_DOUBLE_EQ(m.Estimate(1), 50e3);
  m.Observe(1, 40 * kUs);
  EXPECT_DOUBLE_EQ(m.Estimate(1), 40e3);  // replaced, not averaged with the guess
  m.Observe(1, 50 * kUs);
  EXPECT_DOUBLE_EQ(m.Estimate(1), 42e3);  // then a running mean
  m.Observe(1, 5 * kUs);                  // under a quarter: one-time work is over
  EXPECT_DOUBLE_EQ(m.Estimate(1), 5e3);
  m.Observe(1, 105 * kUs);  // a slow outlier only moves the mean
  EXPECT_DOUBLE_EQ(m.Estimate(1), 25e3);
}

TEST(ArrivalEstimatorTest, MeanGapGrowsWhenArrivalsStop) {
  ArrivalEstimator a;
  a.Observe(kT0, 1);
  EXPECT_EQ(a.GapNs(kT0), 0);  // one arrival: no rate yet
  a = Arrivals(10, kT0);
  EXPECT_NEAR(a.GapNs(kT0), 10e3, 1);
  EXPECT_NEAR(a.GapNs(kT0 + 500 * kUs), 500e3, 1);  // silence since the last arrival counts
  ArrivalEstimator rows;
  rows.Observe(kT0, 4);
  rows.Observe(kT0 + 40 * kUs, 4);  // 4 rows per request: the gap is per row
  EXPECT_NEAR(rows.GapNs(kT0 + 40 * kUs), 10e3, 1);
}

TEST(AdaptivePolicyTest, DispatchesAtOnceBeforeAnythingIsMeasured) {
  AdaptiveOptions o;
  AdaptiveDecision d = DecideAdaptive(o, BatchCostModel(), ArrivalEstimator(), 1, 64, kT0, kT0);
  EXPECT_TRUE(d.dispatch);
  d = DecideAdaptive(o, BatchCostModel(), Arrivals(5, kT0), 1, 64, kT0, kT0);
  EXPECT_TRUE(d.dispatch);
}

TEST(AdaptivePolicyTest, LightLoadDispatchesAtOnce) {
  // One client: the next request comes 100 us after the answer; a batch of 1 takes 40 us.
  AdaptiveOptions o;
  AdaptiveDecision d =
      DecideAdaptive(o, Costs(35, 5, {1, 2, 4, 8}), Arrivals(140, kT0), 1, 64, kT0, kT0);
  EXPECT_TRUE(d.dispatch);
  EXPECT_EQ(d.reason, DispatchReason::kNoGain);
}

TEST(AdaptivePolicyTest, HighLoadWaitsForALargerBatchThenDispatches) {
  // Rows every 5 us; a batch costs 200 us + 2 us per row: batches of 4 waste the instance.
  AdaptiveOptions o;
  BatchCostModel cost = Costs(200, 2, {1, 4, 16, 32, 64});
  uint64_t now = kT0;
  AdaptiveDecision d = DecideAdaptive(o, cost, Arrivals(5, now), 4, 64, now - 20 * kUs, now);
  EXPECT_FALSE(d.dispatch);
  EXPECT_GT(d.wake_ns, now);
  EXPECT_LE(d.wake_ns, now + 60 * 5 * kUs);  // no later than the awaited rows should take
  // The rows came: a full batch leaves (BatchQueue's max_batch_size rule), and close to it the
  // policy stops waiting when what is left to gain is small.
  now += 290 * kUs;
  d = DecideAdaptive(o, cost, Arrivals(5, now), 62, 64, now - 310 * kUs, now);
  EXPECT_TRUE(d.dispatch);
  EXPECT_EQ(d.reason, DispatchReason::kNoGain);
}

TEST(AdaptivePolicyTest, LatencyTargetBoundsTheWait) {
  AdaptiveOptions o;
  o.latency_target_us = 1000;
  BatchCostModel cost = Costs(200, 2, {1, 4, 16, 32, 64});
  uint64_t now = kT0;
  // The head waited 600 us: with 200+ us to run, one more 5 us row still fits, but the wake-up
  // is no later than the last moment the queued rows can run within the target.
  AdaptiveDecision d = DecideAdaptive(o, cost, Arrivals(5, now), 8, 64, now - 600 * kUs, now);
  EXPECT_FALSE(d.dispatch);
  EXPECT_LE(d.wake_ns, now + (1000 - 600 - 216) * kUs);
  // At 790 us waited, even one more row would finish past the target.
  d = DecideAdaptive(o, cost, Arrivals(5, now), 8, 64, now - 790 * kUs, now);
  EXPECT_TRUE(d.dispatch);
  EXPECT_EQ(d.reason, DispatchReason::kLatencyTarget);
}

TEST(AdaptivePolicyTest, ArrivalsThatStopEndTheWait) {
  AdaptiveOptions o;
  BatchCostModel cost = Costs(200, 2, {1, 4, 16, 32, 64});
  ArrivalEstimator a = Arrivals(5, kT0);
  EXPECT_FALSE(DecideAdaptive(o, cost, a, 4, 64, kT0, kT0).dispatch);
  // 2 ms without an arrival: waiting for more would take longer than running twice.
  AdaptiveDecision d = DecideAdaptive(o, cost, a, 4, 64, kT0, kT0 + 2000 * kUs);
  EXPECT_TRUE(d.dispatch);
}

TEST(AdaptivePolicyTest, LinearCostNeverWaits) {
  // A model with no per-batch overhead gains nothing from batching: no wait at any rate.
  AdaptiveOptions o;
  AdaptiveDecision d =
      DecideAdaptive(o, Costs(0, 10, {1, 2, 4, 8, 16, 32, 64}), Arrivals(1, kT0), 4, 64, kT0, kT0);
  EXPECT_TRUE(d.dispatch);
}

// The CPU-bound rule: a 256->96->96->10 MLP on OpenBLAS, measured: batch 1 24 us, 8 32 us, 64
// 110 us.
BatchCostModel HeavyCosts() {
  BatchCostModel m;
  m.Observe(1, 24 * kUs);
  m.Observe(8, 32 * kUs);
  m.Observe(64, 110 * kUs);
  return m;
}

TEST(AdaptiveCpuBoundTest, IdleInstanceRuleAloneNeverWaitsForACheapModel) {
  // Rows every 50 us (the I/O threads parse them), a batch of 3 runs in 25 us: the instance
  // keeps up, so pricing its idle time says dispatch.
  AdaptiveOptions o;
  EXPECT_TRUE(DecideAdaptive(o, HeavyCosts(), Arrivals(50, kT0), 3, 64, kT0, kT0).dispatch);
}

TEST(AdaptiveCpuBoundTest, WaitsForTheRowsThatCostLeastEach) {
  AdaptiveOptions o;
  BatchCostModel cost = HeavyCosts();
  AdaptiveDecision d =
      DecideAdaptive(o, cost, Arrivals(50, kT0), 3, 64, kT0 - 100 * kUs, kT0, /*cpu_bound=*/true);
  EXPECT_FALSE(d.dispatch);
  // It awaits 64 rows (1.7 us each against 8 us for 3), deciding again on each arrival, or when
  // two mean gaps pass without one.
  EXPECT_EQ(d.wake_ns, kT0 + 100 * kUs + 1);
  // Rows keep coming: still waiting with 40 queued.
  EXPECT_FALSE(DecideAdaptive(o, cost, Arrivals(50, kT0 + 2000 * kUs), 40, 64, kT0 - 100 * kUs,
                              kT0 + 2000 * kUs, true)
                   .dispatch);
}

TEST(AdaptiveCpuBoundTest, ArrivalsThatStopEndTheWait) {
  // A closed loop of 16 clients, all queued: the last arrival is more than two mean gaps old.
  AdaptiveOptions o;
  ArrivalEstimator a = Arrivals(50, kT0);
  EXPECT_FALSE(DecideAdaptive(o, HeavyCosts(), a, 16, 64, kT0, kT0 + 90 * kUs, true).dispatch);
  AdaptiveDecision d = DecideAdaptive(o, HeavyCosts(), a, 16, 64, kT0, kT0 + 101 * kUs, true);
  EXPECT_TRUE(d.dispatch);
  EXPECT_EQ(d.reason, DispatchReason::kCpuBound);
}

TEST(AdaptiveCpuBoundTest, LatencyTargetBoundsTheWait) {
  AdaptiveOptions o;
  o.latency_target_us = 1000;
  BatchCostModel cost = HeavyCosts();
  // 64 rows would take 61 gaps of 50 us: past the target. 8 rows fit and cost less each.
  AdaptiveDecision d = DecideAdaptive(o, cost, Arrivals(50, kT0), 3, 64, kT0, kT0, true);
  EXPECT_FALSE(d.dispatch);
  EXPECT_EQ(d.wake_ns, kT0 + 100 * kUs + 1);
  // 8 rows queued, 900 us waited: the next measured size, 64, cannot come within the target.
  d = DecideAdaptive(o, cost, Arrivals(50, kT0), 8, 64, kT0 - 900 * kUs, kT0, true);
  EXPECT_TRUE(d.dispatch);
  // The head has waited 950 us: not even one more row fits.
  d = DecideAdaptive(o, cost, Arrivals(50, kT0), 3, 64, kT0 - 950 * kUs, kT0, true);
  EXPECT_TRUE(d.dispatch);
  EXPECT_EQ(d.reason, DispatchReason::kLatencyTarget);
}

TEST(AdaptiveCpuBoundTest, ABusyInstanceIsNotKeptWaiting) {
  // A 256->768->768->10 MLP on OpenBLAS: batch 1 200 us, 8 765 us, 16 903 us, 32 1251 us, 64
  // 1926 us. 21 rows queued, one every 63 us: batches of 21 would keep the instance busy ~76 % of
  // the time, so its idle time is not spare CPU: the instance-throughput rule decides (no wait:
  // the queued rows take longer to arrive than to run).
  AdaptiveOptions o;
  BatchCostModel cost;
  for (auto [rows, us] : {std::pair{1, 200}, {8, 765}, {16, 903}, {32, 1251}, {64, 1926}}) {
    cost.Observe(rows, static_cast<uint64_t>(us) * kUs);
  }
  AdaptiveDecision d = DecideAdaptive(o, cost, Arrivals(63, kT0), 21, 64, kT0, kT0, true);
  EXPECT_TRUE(d.dispatch);
  EXPECT_EQ(d.reason, DispatchReason::kNoGain);
  // With four instances sharing the arrivals each is busy ~19 %: the CPU-bound rule waits.
  o.instances = 4;
  d = DecideAdaptive(o, cost, Arrivals(63, kT0), 21, 64, kT0, kT0, true);
  EXPECT_FALSE(d.dispatch);
  EXPECT_EQ(d.reason, DispatchReason::kCpuBound);
}

TEST(AdaptiveCpuBoundTest, LinearCostNeverWaits) {
  AdaptiveOptions o;
  EXPECT_TRUE(DecideAdaptive(o, Costs(0, 10, {1, 2, 4, 8, 16, 32, 64}), Arrivals(1, kT0), 4, 64,
                             kT0, kT0, true)
                  .dispatch);
}

TEST(AdaptiveCpuBoundTest, OnlyMeasuredEconomiesCount) {
  // Only batches of 1 and 2 measured: nothing beyond 2 is assumed cheaper per row.
  AdaptiveOptions o;
  BatchCostModel cost;
  cost.Observe(1, 24 * kUs);
  cost.Observe(2, 26 * kUs);
  EXPECT_TRUE(DecideAdaptive(o, cost, Arrivals(50, kT0), 2, 64, kT0, kT0, true).dispatch);
  AdaptiveDecision d = DecideAdaptive(o, cost, Arrivals(50, kT0), 1, 64, kT0, kT0, true);
  EXPECT_FALSE(d.dispatch);
  EXPECT_EQ(d.wake_ns, kT0 + 50 * kUs);  // the one awaited row's mean gap
}

// BatchQueue with the adaptive policy.

RequestPtr Row() {
  auto r = std::make_unique<InferenceRequest>();
  r->model_name = "m";
  r->batch_size = 1;
  Tensor t;
  t.name = "INPUT__0";
  t.dtype = DataType::kFp32;
  t.shape = {1, 4};
  r->inputs.push_back(std::move(t));
  return r;
}

BatchingOptions Adaptive(uint64_t max_queue_delay_us = 0) {
  BatchingOptions o;
  o.dynamic = true;
  o.max_batch_size = 64;
  o.max_queue_delay_us = max_queue_delay_us;
  o.adaptive = true;
  return o;
}

void Teach(BatchQueue* q) {
  for (int64_t n : {1, 4, 16, 32, 64}) q->ObserveExecution(n, (200 + 2 * n) * kUs);
}

TEST(AdaptiveBatchQueueTest, ALoneRequestLeavesAtOnce) {
  BatchQueue q(Adaptive());
  Teach(&q);
  std::vector<RequestPtr> batch;
  uint64_t wake = 0;
  DispatchReason reason{};
  for (int i = 0; i < 3; ++i) {  // one client, a request every 300 us
    auto r = Row();
    const uint64_t now = kT0 + static_cast<uint64_t>(i) * 300 * kUs;
    ASSERT_OK(q.Push(r, now));
    ASSERT_TRUE(q.NextBatch(now, &batch, &wake, &reason));
    EXPECT_EQ(reason, DispatchReason::kNoGain);
    EXPECT_EQ(batch.size(), 1u);
    batch.clear();
  }
}

TEST(AdaptiveBatchQueueTest, BurstWaitsAndMaxQueueDelayCapsTheWait) {
  BatchQueue q(Adaptive(100));
  Teach(&q);
  std::vector<RequestPtr> batch;
  uint64_t wake = 0;
  DispatchReason reason{};
  for (int i = 0; i < 8; ++i) {  // a row every 5 us
    auto r = Row();
    ASSERT_OK(q.Push(r, kT0 + static_cast<uint64_t>(i) * 5 * kUs));
  }
  const uint64_t now = kT0 + 35 * kUs;
  EXPECT_FALSE(q.NextBatch(now, &batch, &wake, &reason));
  EXPECT_EQ(wake, kT0 + 100 * kUs);  // the adaptive wait would be longer; the config caps it
  EXPECT_TRUE(q.NextBatch(wake, &batch, &wake, &reason));
  EXPECT_EQ(reason, DispatchReason::kQueueDelay);
  EXPECT_EQ(batch.size(), 8u);
}

TEST(AdaptiveBatchQueueTest, TritonPolicyReasons) {
  BatchingOptions o;
  o.dynamic = true;
  o.max_batch_size = 4;
  o.preferred_batch_sizes = {2};
  BatchQueue q(o);
  std::vector<RequestPtr> batch;
  uint64_t wake = 0;
  DispatchReason reason{};
  auto r = Row();
  ASSERT_OK(q.Push(r, kT0));
  ASSERT_TRUE(q.NextBatch(kT0, &batch, &wake, &reason));
  EXPECT_EQ(reason, DispatchReason::kQueueDelay);  // delay 0
  for (int i = 0; i < 3; ++i) {
    auto more = Row();
    ASSERT_OK(q.Push(more, kT0));
  }
  batch.clear();
  ASSERT_TRUE(q.NextBatch(kT0, &batch, &wake, &reason));
  EXPECT_EQ(reason, DispatchReason::kPreferred);
  EXPECT_EQ(batch.size(), 2u);

  BatchingOptions single;
  BatchQueue unbatched(single);
  auto one = Row();
  ASSERT_OK(unbatched.Push(one, kT0));
  batch.clear();
  ASSERT_TRUE(unbatched.NextBatch(kT0, &batch, &wake, &reason));
  EXPECT_EQ(reason, DispatchReason::kUnbatched);
  EXPECT_EQ(std::string(DispatchReasonLabel(DispatchReason::kFull)), "max_batch_size");
}

bool g_cpu_bound = false;  // what the next test's queue sees

TEST(AdaptiveBatchQueueTest, CpuBoundQueueWaitsForACheaperBatch) {
  BatchingOptions o = Adaptive();
  o.cpu_bound = [](uint64_t) { return g_cpu_bound; };
  BatchQueue q(o);
  q.ObserveExecution(1, 24 * kUs);
  q.ObserveExecution(8, 32 * kUs);
  std::vector<RequestPtr> batch;
  uint64_t wake = 0;
  DispatchReason reason{};
  uint64_t now = kT0;
  for (int i = 0; i < 4; ++i, now += 50 * kUs) {  // a row every 50 us
    auto r = Row();
    ASSERT_OK(q.Push(r, now));
  }
  now -= 50 * kUs;
  g_cpu_bound = false;  // cores to spare: the instance keeps up, the rows leave
  EXPECT_TRUE(q.NextBatch(now, &batch, &wake, &reason));
  EXPECT_EQ(batch.size(), 4u);
  batch.clear();
  for (int i = 0; i < 4; ++i) {
    now += 50 * kUs;
    auto r = Row();
    ASSERT_OK(q.Push(r, now));
  }
  g_cpu_bound = true;  // CPU-bound: wait for 8
  EXPECT_TRUE(q.WakeOnPush());
  EXPECT_FALSE(q.NextBatch(now, &batch, &wake, &reason));
  EXPECT_EQ(wake, now + 2 * 50 * kUs + 1);
  for (int i = 0; i < 4; ++i) {
    EXPECT_FALSE(q.WakeOnPush());  // fewer than 8 queued: an arrival changes nothing
    now += 50 * kUs;
    auto r = Row();
    ASSERT_OK(q.Push(r, now));
  }
  EXPECT_TRUE(q.WakeOnPush());
  ASSERT_TRUE(q.NextBatch(now, &batch, &wake, &reason));
  EXPECT_EQ(batch.size(), 8u);
  EXPECT_EQ(reason, DispatchReason::kCpuBound);
}

}  // namespace
}  // namespace dais::runtime
