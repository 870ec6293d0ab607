#include "common/thread_checker.h"

#include <gtest/gtest.h>

#include <thread>

namespace dais {
namespace {

TEST(ThreadCheckerTest, BindsToTheFirstCallersThread) {
  ThreadChecker checker;
  EXPECT_TRUE(checker.CalledOnBoundThread());
  EXPECT_TRUE(checker.CalledOnBoundThread());
  bool other = true;
  std::thread([&] { other = checker.CalledOnBoundThread(); }).join();
  EXPECT_FALSE(other);
}

TEST(ThreadCheckerTest, AnotherThreadCanBeTheOwner) {
  ThreadChecker checker;
  bool first = false;
  std::thread([&] { first = checker.CalledOnBoundThread(); }).join();
  EXPECT_TRUE(first);
  EXPECT_FALSE(checker.CalledOnBoundThread());
}

#ifndef NDEBUG
TEST(ThreadCheckerDeathTest, TheMacroAbortsOffThread) {
  ThreadChecker checker;
  DAIS_DCHECK_ON_THREAD(checker);
  EXPECT_DEATH(std::thread([&] { DAIS_DCHECK_ON_THREAD(checker); }).join(), "off the thread");
}
#endif

}  // namespace
}  // namespace dais
