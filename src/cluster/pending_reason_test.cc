#include "cluster/pending_reason.h"

#include <gtest/gtest.h>

namespace dais::cluster {
namespace {

placement::NodeSpec Node(const std::string& name, int64_t memory_mib, int gpus) {
  return {name, 8000, memory_mib, gpus, gpus > 0 ? "A100" : ""};
}

TEST(PendingReasonTest, CountsEachNodeByWhatItLacksFirst) {
  placement::Cluster c({Node("a", 1024, 2), Node("b", 64, 2), Node("c", 1024, 1)});
  placement::TaskSpec two_gpus;
  two_gpus.cpu_milli = 1000;
  two_gpus.memory_mib = 512;
  two_gpus.num_gpu = 2;
  two_gpus.gpu_milli = placement::kGpuMilli;
  placement::TaskSpec one;
  one.num_gpu = 2;
  one.gpu_milli = placement::kGpuMilli;
  c.Apply(one, {0, {0, 1}});  // a: both GPUs taken
  const Unplaceable u = ExplainUnplaceable(c, two_gpus);
  EXPECT_EQ(u.message,
            "no node fits one instance (3 nodes: 1 without the memory; 2 without 2 free GPU(s) "
            "(largest free: 1))");
  EXPECT_EQ(u.reason, "gpus");
}

TEST(PendingReasonTest, ExcludedNodesAndAnEmptyCluster) {
  placement::Cluster c({Node("a", 1024, 0)});
  c.SetExcluded(0, true);
  placement::TaskSpec cpu;
  cpu.cpu_milli = 100;
  EXPECT_EQ(ExplainUnplaceable(c, cpu).reason, "excluded");
  placement::Cluster two({Node("a", 1024, 0), Node("b", 1024, 0)});
  two.SetExcluded(0, true);
  two.SetExcluded(1, true);
  const std::vector<std::string> why = {"cordoned", "without the labels zone=b"};
  EXPECT_EQ(ExplainUnplaceable(two, cpu, &why).message,
            "no node fits one instance (2 nodes: 1 cordoned; 1 without the labels zone=b)");
  EXPECT_EQ(ExplainUnplaceable(placement::Cluster({}), cpu).reason, "no_nodes");
  EXPECT_EQ(ExplainUnplaceable(placement::Cluster({}), cpu).message, "no node is registered");
}

}  // namespace
}  // namespace dais::cluster
