#include "server/background.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace dais::server {
namespace {

TEST(BackgroundTasks, FinishedTasksAreJoinedWhenTheNextStarts) {
  BackgroundTasks tasks;
  std::atomic<int> ran{0};
  int started = 0;
  for (; started < 3; ++started) tasks.Run([&ran] { ran.fetch_add(1); });
  // Each Run joins the tasks that have finished (the earlier ones may already be gone): the
  // count stays small instead of growing with every task.
  for (int i = 0; i < 500 && tasks.running_or_unreaped() > 1; ++i, ++started) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    tasks.Run([&ran] { ran.fetch_add(1); });
  }
  EXPECT_LE(tasks.running_or_unreaped(), 1u);
  tasks.JoinAll();
  EXPECT_EQ(ran.load(), started);
  EXPECT_EQ(tasks.running_or_unreaped(), 0u);
}

TEST(BackgroundTasks, JoinAllWaitsForRunningTasks) {
  BackgroundTasks tasks;
  std::atomic<bool> finished{false};
  tasks.Run([&finished] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    finished.store(true);
  });
  tasks.JoinAll();
  EXPECT_TRUE(finished.load());
}

}  // namespace
}  // namespace dais::server
