#include "cluster/capacity.h"

#include <gtest/gtest.h>

#include "common/status_testing.h"

namespace dais::cluster {
namespace {

TEST(CapacityTest, Gpus) {
  ASSERT_OK_AND_ASSIGN(auto g, ParseGpus("2xA100:80GiB,T4:16384MiB"));
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].model, "A100");
  EXPECT_EQ(g[1].memory_mib, 80 * 1024);
  EXPECT_EQ(g[2].model, "T4");
  EXPECT_EQ(g[2].memory_mib, 16384);
  EXPECT_TRUE(ParseGpus("")->empty());
  for (const char* bad :
       {"A100", "2xA100:80GB", ":80GiB", "A100:0GiB", "17xA100:1GiB", "9xA:1GiB,9xB:1GiB"}) {
    auto r = ParseGpus(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--gpus"), std::string::npos) << r.status().message();
  }
}

TEST(CapacityTest, Labels) {
  ASSERT_OK_AND_ASSIGN(auto l, ParseLabels("zone=a,tier=gpu,empty="));
  EXPECT_EQ(l.at("zone"), "a");
  EXPECT_EQ(l.at("empty"), "");
  EXPECT_FALSE(ParseLabels("zone").ok());
  EXPECT_FALSE(ParseLabels("=a").ok());
  const NodeCapacity c = LocalCapacity();
  EXPECT_GE(c.cpu_milli, 1000);
  EXPECT_GT(c.memory_mib, 0);
}

}  // namespace
}  // namespace dais::cluster
