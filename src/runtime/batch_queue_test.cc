// Batcher policy tests on a fake clock: time is whatever the test passes in.
#include "runtime/batch_queue.h"

#include <gtest/gtest.h>

#include "common/status_testing.h"

namespace dais::runtime {
namespace {

constexpr uint64_t kUs = 1000;

RequestPtr MakeRequest(int64_t batch, int64_t width = 4, uint32_t priority = 0,
                       uint64_t timeout_us = 0) {
  auto r = std::make_unique<InferenceRequest>();
  r->model_name = "m";
  r->batch_size = batch;
  r->priority = priority;
  r->timeout_us = timeout_us;
  Tensor t;
  t.name = "INPUT__0";
  t.dtype = DataType::kFp32;
  t.shape = {batch, width};
  r->inputs.push_back(std::move(t));
  return r;
}

BatchingOptions Dynamic(int64_t max, uint64_t delay_us, std::vector<int64_t> preferred = {}) {
  BatchingOptions o;
  o.dynamic = true;
  o.max_batch_size = max;
  o.max_queue_delay_us = delay_us;
  o.preferred_batch_sizes = std::move(preferred);
  return o;
}

int64_t Total(const std::vector<RequestPtr>& batch) {
  int64_t n = 0;
  for (const auto& r : batch) n += r->batch_size;
  return n;
}

TEST(BatchQueueTest, WaitsForQueueDelayThenDispatchesAll) {
  BatchQueue q(Dynamic(8, 100));
  for (int i = 0; i < 3; ++i) {
    auto r = MakeRequest(1);
    ASSERT_OK(q.Push(r, 1000 * kUs + i));
  }
  std::vector<RequestPtr> batch;
  uint64_t wake = 0;
  EXPECT_FALSE(q.NextBatch(1050 * kUs, &batch, &wake));
  EXPECT_EQ(wake, 1100 * kUs);
  EXPECT_TRUE(q.NextBatch(1100 * kUs, &batch, &wake));
  EXPECT_EQ(batch.size(), 3u);
  EXPECT_TRUE(q.empty());
}

TEST(BatchQueueTest, FullBatchDispatchesAtOnceAndRespectsMax) {
  BatchQueue q(Dynamic(4, 1000000));
  for (int i = 0; i < 6; ++i) {
    auto r = MakeRequest(1);
    ASSERT_OK(q.Push(r, 0));
  }
  std::vector<RequestPtr> batch;
  uint64_t wake = 0;
  ASSERT_TRUE(q.NextBatch(1, &batch, &wake));
  EXPECT_EQ(Total(batch), 4);
  EXPECT_EQ(q.size(), 2u);
}

TEST(BatchQueueTest, ClientBatchesCountTowardsMax) {
  BatchQueue q(Dynamic(8, 1000000));
  auto a = MakeRequest(5), b = MakeRequest(4), c = MakeRequest(3);
  ASSERT_OK(q.Push(a, 0));
  ASSERT_OK(q.Push(b, 0));
  ASSERT_OK(q.Push(c, 0));
  std::vector<RequestPtr> batch;
  uint64_t wake = 0;
  ASSERT_TRUE(q.NextBatch(1, &batch, &wake));  // 5 + 3 = 8 (4 does not fit)
  EXPECT_EQ(Total(batch), 8);
  EXPECT_EQ(batch.size(), 2u);
}

TEST(BatchQueueTest, PreferredSizeDispatchesWithoutWaiting) {
  BatchQueue q(Dynamic(16, 1000000, {4}));
  for (int i = 0; i < 5; ++i) {
    auto r = MakeRequest(1);
    ASSERT_OK(q.Push(r, 0));
  }
  std::vector<RequestPtr> batch;
  uint64_t wake = 0;
  ASSERT_TRUE(q.NextBatch(1, &batch, &wake));
  EXPECT_EQ(Total(batch), 4);
  EXPECT_EQ(q.size(), 1u);
}

TEST(BatchQueueTest, DifferentShapesAreNeverBatchedTogether) {
  BatchQueue q(Dynamic(8, 0));
  auto a = MakeRequest(1, 4), b = MakeRequest(1, 5), c = MakeRequest(1, 4);
  ASSERT_OK(q.Push(a, 0));
  ASSERT_OK(q.Push(b, 0));
  ASSERT_OK(q.Push(c, 0));
  std::vector<RequestPtr> batch;
  uint64_t wake = 0;
  ASSERT_TRUE(q.NextBatch(0, &batch, &wake));
  ASSERT_EQ(batch.size(), 2u);
  for (const auto& r : batch) EXPECT_EQ(r->inputs[0].shape[1], 4);
  batch.clear();
  ASSERT_TRUE(q.NextBatch(0, &batch, &wake));
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0]->inputs[0].shape[1], 5);
}

TEST(BatchQueueTest, WithoutDynamicBatchingEachRequestRunsAlone) {
  BatchingOptions o;
  o.max_batch_size = 8;
  BatchQueue q(o);
  for (int i = 0; i < 3; ++i) {
    auto r = MakeRequest(2);
    ASSERT_OK(q.Push(r, 0));
  }
  std::vector<RequestPtr> batch;
  uint64_t wake = 0;
  ASSERT_TRUE(q.NextBatch(0, &batch, &wake));
  EXPECT_EQ(batch.size(), 1u);
}

TEST(BatchQueueTest, FullQueueRejectsAtOnce) {
  BatchingOptions o = Dynamic(8, 100);
  o.default_policy.max_queue_size = 2;
  BatchQueue q(o);
  auto a = MakeRequest(1), b = MakeRequest(1), c = MakeRequest(1);
  ASSERT_OK(q.Push(a, 0));
  ASSERT_OK(q.Push(b, 0));
  Status s = q.Push(c, 0);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("full"), std::string::npos);
  ASSERT_NE(c, nullptr);  // the caller keeps the rejected request to answer it
}

TEST(BatchQueueTest, ExpiredRequestsAreDroppedBeforeRunning) {
  BatchingOptions o = Dynamic(8, 1000);
  o.default_policy.allow_timeout_override = true;
  BatchQueue q(o);
  auto a = MakeRequest(1, 4, 0, /*timeout_us=*/10), b = MakeRequest(1);
  ASSERT_OK(q.Push(a, 0));
  ASSERT_OK(q.Push(b, 0));
  EXPECT_EQ(q.EarliestDeadline(), 10 * kUs);
  std::vector<RequestPtr> expired;
  q.TakeExpired(9 * kUs, &expired);
  EXPECT_TRUE(expired.empty());
  q.TakeExpired(10 * kUs, &expired);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(q.size(), 1u);
}

TEST(BatchQueueTest, DefaultTimeoutAppliesWhenOverrideNotAllowed) {
  BatchingOptions o = Dynamic(8, 1000);
  o.default_policy.default_timeout_us = 50;
  BatchQueue q(o);
  auto a = MakeRequest(1, 4, 0, /*timeout_us=*/5000);
  ASSERT_OK(q.Push(a, 0));
  EXPECT_EQ(q.EarliestDeadline(), 50 * kUs);
}

TEST(BatchQueueTest, DelayActionKeepsExpiredRequests) {
  BatchingOptions o = Dynamic(8, 1000);
  o.default_policy.default_timeout_us = 1;
  o.default_policy.reject_on_timeout = false;
  BatchQueue q(o);
  auto a = MakeRequest(1);
  ASSERT_OK(q.Push(a, 0));
  std::vector<RequestPtr> expired;
  q.TakeExpired(1000 * kUs, &expired);
  EXPECT_TRUE(expired.empty());
  EXPECT_EQ(q.size(), 1u);
}

TEST(BatchQueueTest, HigherPriorityLevelIsServedFirst) {
  BatchingOptions o;  // unbatched, so each NextBatch returns one request
  o.max_batch_size = 8;
  o.priority_levels = 2;
  o.default_priority = 2;
  BatchQueue q(o);
  auto low = MakeRequest(1, 4, 2), high = MakeRequest(1, 4, 1);
  low->id = "low";
  high->id = "high";
  ASSERT_OK(q.Push(low, 0));
  ASSERT_OK(q.Push(high, 1));
  std::vector<RequestPtr> batch;
  uint64_t wake = 0;
  ASSERT_TRUE(q.NextBatch(2, &batch, &wake));
  EXPECT_EQ(batch[0]->id, "high");
}

}  // namespace
}  // namespace dais::runtime

namespace dais::runtime {
namespace {

TEST(BatchQueueTest, HugeTimeoutMeansNoDeadlineNotInstantExpiry) {
  BatchingOptions o = Dynamic(8, 1000);
  o.default_policy.allow_timeout_override = true;
  BatchQueue q(o);
  auto a = MakeRequest(1, 4, 0, /*timeout_us=*/UINT64_MAX);
  ASSERT_OK(q.Push(a, 5000));
  EXPECT_EQ(q.EarliestDeadline(), 0u);
  std::vector<RequestPtr> expired;
  q.TakeExpired(6000, &expired);
  EXPECT_TRUE(expired.empty());
}

TEST(BatchQueueTest, TakeAllEmptiesEveryLevel) {
  BatchingOptions o = Dynamic(8, 1000);
  o.priority_levels = 2;
  o.default_priority = 2;
  BatchQueue q(o);
  auto a = MakeRequest(1, 4, 1), b = MakeRequest(1, 4, 2);
  ASSERT_OK(q.Push(a, 0));
  ASSERT_OK(q.Push(b, 0));
  std::vector<RequestPtr> all;
  q.TakeAll(&all);
  EXPECT_EQ(all.size(), 2u);
  EXPECT_TRUE(q.empty());
}

}  // namespace
}  // namespace dais::runtime

namespace dais::runtime {
namespace {

TEST(BatchQueueTest, CancelledRequestsLeaveTheQueueAndDoNotFillBatches) {
  BatchQueue q(Dynamic(8, 1000, {2}));
  auto a = MakeRequest(1), b = MakeRequest(1);
  a->cancelled = std::make_shared<std::atomic<bool>>(false);
  auto flag = a->cancelled;
  ASSERT_OK(q.Push(a, 0));
  ASSERT_OK(q.Push(b, 0));
  flag->store(true);
  std::vector<RequestPtr> cancelled;
  q.TakeCancelled(&cancelled);
  ASSERT_EQ(cancelled.size(), 1u);
  std::vector<RequestPtr> batch;
  uint64_t wake = 0;
  EXPECT_FALSE(q.NextBatch(1, &batch, &wake));  // one left: the preferred size 2 is not reached
  EXPECT_EQ(q.size(), 1u);
}

}  // namespace
}  // namespace dais::runtime
