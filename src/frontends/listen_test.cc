#include "frontends/listen.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

namespace dais::frontends {
namespace {

using std::chrono::microseconds;
using std::chrono::seconds;

// RunIoContext with and without busy polling: handlers posted from another thread run, and the
// thread returns both when the work runs out and when the context is stopped.
class RunIoContextTest : public testing::TestWithParam<int> {};

TEST_P(RunIoContextTest, RunsPostedWorkAndReturnsWhenTheWorkRunsOut) {
  boost::asio::io_context ioc(1);
  auto work =
      std::make_unique<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>>(
          ioc.get_executor());
  auto done = std::async(std::launch::async, [&] { RunIoContext(ioc, microseconds(GetParam())); });
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) {
    boost::asio::post(ioc, [&] { ran.fetch_add(1); });
    if (i % 10 == 0) std::this_thread::sleep_for(microseconds(300));  // some arrive after a sleep
  }
  // Later work still runs (the thread blocked, or went on polling).
  std::promise<void> late;
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  boost::asio::post(ioc, [&] { late.set_value(); });
  EXPECT_EQ(late.get_future().wait_for(seconds(10)), std::future_status::ready);
  work.reset();
  ASSERT_EQ(done.wait_for(seconds(10)), std::future_status::ready);
  EXPECT_EQ(ran.load(), 100);
}

TEST_P(RunIoContextTest, ReturnsWhenStopped) {
  boost::asio::io_context ioc(1);
  auto work = boost::asio::make_work_guard(ioc);
  auto done = std::async(std::launch::async, [&] { RunIoContext(ioc, microseconds(GetParam())); });
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ioc.stop();
  EXPECT_EQ(done.wait_for(seconds(10)), std::future_status::ready);
}

INSTANTIATE_TEST_SUITE_P(BusyPoll, RunIoContextTest, testing::Values(0, 200, 100000));

}  // namespace
}  // namespace dais::frontends
