#include "cluster/node_load.h"

#include <gtest/gtest.h>

#include "common/status_testing.h"

namespace dais::cluster {
namespace {

TEST(NodeLoadTest, BusyIsEverythingButIdleAndIowait) {
  // user nice system idle iowait irq softirq steal guest guest_nice
  ASSERT_OK_AND_ASSIGN(CpuTimes a, ParseProcStat("cpu  100 0 50 800 50 0 0 0 0 0"));
  EXPECT_EQ(a.total, 1000u);
  EXPECT_EQ(a.busy, 150u);
  ASSERT_OK_AND_ASSIGN(CpuTimes b, ParseProcStat("cpu  250 0 100 850 50 0 0 0 0 0"));
  EXPECT_DOUBLE_EQ(BusyBetween(a, b), 200.0 / 250.0);
  EXPECT_EQ(BusyBetween(b, a), 0);  // (a counter that went back: no reading)
  EXPECT_EQ(BusyBetween(a, a), 0);
  ASSERT_OK_AND_ASSIGN(CpuTimes old_kernel, ParseProcStat("cpu 1 2 3 4"));
  EXPECT_EQ(old_kernel.busy, 6u);
  EXPECT_FALSE(ParseProcStat("cpu0 1 2 3 4").ok());
  EXPECT_FALSE(ParseProcStat("cpu 1 2").ok());
}

}  // namespace
}  // namespace dais::cluster
