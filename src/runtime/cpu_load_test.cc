#include "runtime/cpu_load.h"

#include <gtest/gtest.h>

#include <chrono>

namespace dais::runtime {
namespace {

CpuTimes g_cpu;  // the fake clocks
CpuTimes FakeCpu() { return g_cpu; }

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kWindow = CpuLoad::kWindowNs;

TEST(CpuLoadTest, FractionsOverTheLastWindow) {
  CpuLoad load(2, FakeCpu);
  const uint64_t t0 = 1000 * kMs;
  g_cpu = CpuTimes{5000 * kMs, 700, 1000};
  EXPECT_EQ(load.Busy(t0).process, 0);  // the first window starts
  g_cpu.process_ns += kWindow * 3 / 2;  // 1.5 cores of CPU over the window on 2 cores
  g_cpu.machine_busy += 19;             // 19 of 20 ticks busy
  g_cpu.machine_total += 20;
  EXPECT_EQ(load.Busy(t0 + kWindow / 2).process, 0);  // not over: the last figures
  CpuLoad::Figures f = load.Busy(t0 + kWindow);
  EXPECT_DOUBLE_EQ(f.process, 0.75);
  EXPECT_DOUBLE_EQ(f.machine, 0.95);
  EXPECT_TRUE(load.CpuBound(t0 + kWindow));
  g_cpu.process_ns += kWindow / 10;  // the next window: a neighbour keeps the cores busy
  g_cpu.machine_busy += 20;
  g_cpu.machine_total += 20;
  EXPECT_TRUE(load.CpuBound(t0 + kWindow * 3 / 2));  // the window is not over
  f = load.Busy(t0 + 2 * kWindow);
  EXPECT_DOUBLE_EQ(f.process, 0.05);
  EXPECT_DOUBLE_EQ(f.machine, 1.0);
  EXPECT_FALSE(load.CpuBound(t0 + 2 * kWindow));
  g_cpu.process_ns += kWindow;  // busy process, idle machine: cores to spare
  g_cpu.machine_busy += 10;
  g_cpu.machine_total += 20;
  EXPECT_FALSE(load.CpuBound(t0 + 3 * kWindow));
}

TEST(CpuLoadTest, GlobalMeasuresThisProcessAndTheMachine) {
  CpuLoad& load = CpuLoad::Global();
  auto now = [] {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  };
  load.Busy(now());
  // Spin one thread past two windows: that thread's share of the cores, and at least that much
  // of the machine busy (the tick counts are coarse: allow for them).
  const uint64_t until = now() + 5 * CpuLoad::kWindowNs / 2;
  CpuLoad::Figures f;
  while (now() < until) f = load.Busy(now());
  EXPECT_GT(f.process, 0.0);
  EXPECT_LE(f.process, 1.05);
  EXPECT_GT(f.machine, 0.0);
  EXPECT_LE(f.machine, 1.0);
}

}  // namespace
}  // namespace dais::runtime
