#include "frontends/listen.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/thread_sched.h"

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

// The thread ids of this process's threads named `prefix`N, by N (from /proc/self/task).
std::map<int, pid_t> ThreadsNamed(const std::string& prefix) {
  std::map<int, pid_t> out;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return out;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::string comm;
    std::getline(std::ifstream(std::string("/proc/self/task/") + e->d_name + "/comm"), comm);
    if (comm.rfind(prefix, 0) == 0)
      out[std::stoi(comm.substr(prefix.size()))] = std::stoi(e->d_name);
  }
  closedir(dir);
  return out;
}

// The cores each thread named `prefix`N may run on, by N.
std::map<int, std::vector<int>> CoresOfThreads(const std::string& prefix) {
  std::map<int, std::vector<int>> out;
  for (const auto& [n, tid] : ThreadsNamed(prefix)) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(tid, sizeof(set), &set) != 0) continue;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) out[n].push_back(c);
    }
  }
  return out;
}

// With cpu_affinity, I/O thread i runs on the i-th allowed core only (modulo their number);
// without it, on every allowed core.
TEST(ListenerTest, BindsEachIoThreadToACoreOnlyWhenAsked) {
  const std::vector<int> cpus = AllowedCpus();
  ASSERT_FALSE(cpus.empty());
  const int threads = static_cast<int>(cpus.size()) + 1;  // one more than cores: wraps around
  for (const bool bind : {false, true}) {
    SCOPED_TRACE(bind ? "bound" : "not bound");
    const std::string name = bind ? "bound" : "free";
    Listener listener;
    EndpointOptions options;
    options.address = "127.0.0.1";
    options.threads = threads;
    options.cpu_affinity = bind;
    ASSERT_TRUE(listener.Start(options, name, "test", false, [](auto&&...) {}).ok());
    std::map<int, std::vector<int>> want;
    for (int i = 0; i < threads; ++i) {
      want[i] = bind ? std::vector<int>{cpus[i % cpus.size()]} : cpus;
    }
    // A thread names itself, then binds itself: wait for both, for at most 10 s.
    std::map<int, std::vector<int>> got;
    const auto deadline = std::chrono::steady_clock::now() + seconds(10);
    while ((got = CoresOfThreads(name + "-io")) != want &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(got, want);
    listener.Join(/*stop_now=*/true);
  }
}

}  // namespace
}  // namespace dais::frontends
