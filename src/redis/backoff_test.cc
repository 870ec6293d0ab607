// Backoff (shared by Connection and Subscriber): doubling from min to max, ±20% jitter, reset.
#include "redis/backoff.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace dais::redis {
namespace {

using std::chrono::milliseconds;

ClientOptions Options(int min_ms, int max_ms) {
  ClientOptions o;
  o.reconnect_backoff_min = milliseconds(min_ms);
  o.reconnect_backoff_max = milliseconds(max_ms);
  return o;
}

void ExpectJittered(milliseconds wait, milliseconds nominal) {
  EXPECT_GE(wait.count(), static_cast<int64_t>(nominal.count() * Backoff::kJitterMin));
  EXPECT_LE(wait.count(), static_cast<int64_t>(nominal.count() * Backoff::kJitterMax));
}

TEST(BackoffTest, DoublesFromMinUpToMaxWithinTheJitter) {
  Backoff b(Options(100, 1000), /*seed=*/1);
  for (int nominal : {100, 200, 400, 800, 1000, 1000, 1000}) {
    ASSERT_EQ(b.nominal(), milliseconds(nominal));
    ExpectJittered(b.Next(), milliseconds(nominal));
  }
}

TEST(BackoffTest, ResetStartsOverAtMin) {
  Backoff b(Options(50, 2000), /*seed=*/2);
  for (int i = 0; i < 5; ++i) b.Next();
  EXPECT_EQ(b.nominal(), milliseconds(1600));
  b.Reset();
  EXPECT_EQ(b.nominal(), milliseconds(50));
  ExpectJittered(b.Next(), milliseconds(50));
  EXPECT_EQ(b.nominal(), milliseconds(100));
}

// Connections lost together (a restarted server) must not come back in the same instant: the
// waits for one nominal value spread over the jitter range, and two seeds give different waits.
TEST(BackoffTest, JitterSpreadsTheWaits) {
  std::set<int64_t> waits;
  int64_t lowest = 1'000'000, highest = 0;
  for (unsigned seed = 1; seed <= 200; ++seed) {
    Backoff b(Options(1000, 1000), seed);
    const int64_t w = b.Next().count();
    waits.insert(w);
    lowest = std::min(lowest, w);
    highest = std::max(highest, w);
  }
  EXPECT_GT(waits.size(), 50u);
  EXPECT_LT(lowest, 900);    // some in the lower half of [800, 1200)
  EXPECT_GT(highest, 1100);  // some in the upper half
  Backoff same(Options(1000, 1000), 7);
  std::set<int64_t> one_seed;
  for (int i = 0; i < 20; ++i) one_seed.insert(same.Next().count());
  EXPECT_GT(one_seed.size(), 1u);  // successive waits differ too
}

}  // namespace
}  // namespace dais::redis
