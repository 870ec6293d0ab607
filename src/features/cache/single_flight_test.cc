#include "features/cache/single_flight.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace dais::features {
namespace {

TEST(SingleFlightTest, ManyThreadsOneLeader) {
  SingleFlight<int> flight;
  constexpr int kThreads = 16;
  std::atomic<int> leaders{0};
  std::atomic<int> joined{0};
  std::vector<std::atomic<int>> calls(kThreads);
  std::vector<std::atomic<int>> values(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      bool leader = flight.Join("entity:1", [&, t](const int& v) {
        calls[t].fetch_add(1);
        values[t].store(v);
      });
      if (leader) leaders.fetch_add(1);
      joined.fetch_add(1);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(leaders.load(), 1);
  EXPECT_EQ(flight.in_flight(), 1u);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(calls[t].load(), 0);  // nothing before Complete
  flight.Complete("entity:1", 7);
  EXPECT_EQ(flight.in_flight(), 0u);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(calls[t].load(), 1) << t;
    EXPECT_EQ(values[t].load(), 7) << t;
  }
}

// The leader completes on its own thread while others are still joining: every callback runs
// exactly once, with the value of the flight it joined.
TEST(SingleFlightTest, ConcurrentJoinAndComplete) {
  SingleFlight<int> flight;
  std::atomic<int> callbacks{0};
  std::atomic<int> leaders{0};
  std::atomic<int> next_value{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        if (flight.Join("k", [&](const int&) { callbacks.fetch_add(1); })) {
          leaders.fetch_add(1);
          flight.Complete("k", next_value.fetch_add(1));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  // Joiners whose leader has already completed were served; none is left waiting.
  EXPECT_EQ(flight.in_flight(), 0u);
  EXPECT_EQ(callbacks.load(), 8 * 2000);
  EXPECT_GE(leaders.load(), 1);
}

TEST(SingleFlightTest, NewJoinAfterCompleteStartsNewFlight) {
  SingleFlight<std::string> flight;
  std::vector<std::string> got;
  EXPECT_TRUE(flight.Join("a", [&](const std::string& v) { got.push_back("1:" + v); }));
  EXPECT_FALSE(flight.Join("a", [&](const std::string& v) { got.push_back("2:" + v); }));
  EXPECT_TRUE(flight.Join("b", nullptr));  // other keys fly on their own
  EXPECT_EQ(flight.in_flight(), 2u);
  flight.Complete("a", "x");
  EXPECT_EQ(got, (std::vector<std::string>{"1:x", "2:x"}));
  EXPECT_TRUE(flight.Join("a", [&](const std::string& v) { got.push_back("3:" + v); }));
  flight.Complete("a", "y");
  EXPECT_EQ(got, (std::vector<std::string>{"1:x", "2:x", "3:y"}));
  flight.Complete("b", "z");
  EXPECT_EQ(flight.in_flight(), 0u);
}

TEST(SingleFlightTest, CallbackMayJoinAgain) {
  SingleFlight<int> flight;
  bool inner_leader = false;
  ASSERT_TRUE(flight.Join("k", [&](const int&) { inner_leader = flight.Join("k", nullptr); }));
  flight.Complete("k", 1);  // the callback runs outside the lock: no deadlock
  EXPECT_TRUE(inner_leader);
  EXPECT_EQ(flight.in_flight(), 1u);
  flight.Complete("k", 2);
  EXPECT_EQ(flight.in_flight(), 0u);
}

TEST(SingleFlightTest, CompleteWithoutFlightIsIgnored) {
  SingleFlight<int> flight;
  flight.Complete("nobody", 1);
  EXPECT_EQ(flight.in_flight(), 0u);
}

}  // namespace
}  // namespace dais::features
