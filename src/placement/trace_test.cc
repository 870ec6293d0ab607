#include "placement/trace.h"

#include <gtest/gtest.h>

#include "common/status_testing.h"

namespace dais::placement {
namespace {

TEST(TraceTest, NodeList) {
  ASSERT_OK_AND_ASSIGN(auto nodes, ParseNodeList("sn,cpu_milli,memory_mib,gpu,model\n"
                                                 "n0,64000,262144,2,P100\r\n"
                                                 "\n"
                                                 "n1,96000,786432,0,\n",
                                                 "nodes.csv"));
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].gpus, 2);
  EXPECT_EQ(nodes[0].gpu_model, "P100");
  EXPECT_EQ(nodes[1].gpus, 0);
  EXPECT_EQ(nodes[1].cpu_milli, 96000);
}

TEST(TraceTest, OpenbPods) {
  ASSERT_OK_AND_ASSIGN(auto tasks,
                       ParseTaskList("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n"
                                     "p0,12000,16384,1,460,,LS\n"
                                     "p1,4000,8192,2,1000,V100M16|V100M32,BE\n"
                                     "p2,2000,1024,0,0,,BE\n",
                                     "pods.csv"));
  ASSERT_EQ(tasks.size(), 3u);
  EXPECT_EQ(tasks[0].gpu_milli, 460);
  EXPECT_EQ(tasks[0].GpuDemandMilli(), 460);
  EXPECT_EQ(tasks[1].gpu_models, (std::vector<std::string>{"V100M16", "V100M32"}));
  EXPECT_EQ(tasks[1].GpuDemandMilli(), 2000);
  EXPECT_EQ(tasks[2].num_gpu, 0);
}

TEST(TraceTest, DlrmInstances) {
  ASSERT_OK_AND_ASSIGN(
      auto tasks,
      ParseTaskList("instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,"
                    "rdma_request,rdma_limit,memory_request,memory_limit,disk_request,disk_limit,"
                    "max_instance_per_node,creation_time,scheduled_time,deletion_time\n"
                    "i0,HN,app_0,12,12,1,1,25,25,120.0,120.0,640.0,800.0,8,,,\n"
                    "i1,CN,app_0,4,4,0,0,0,0,30.5,30.5,10,10,-1,,,\n",
                    "dlrm.csv"));
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].cpu_milli, 12000);
  EXPECT_EQ(tasks[0].memory_mib, 120 * 1024);
  EXPECT_EQ(tasks[0].num_gpu, 1);
  EXPECT_EQ(tasks[0].gpu_milli, 1000);
  EXPECT_EQ(tasks[0].max_per_node, 8);
  EXPECT_EQ(tasks[0].group, "app_0");
  EXPECT_EQ(tasks[1].num_gpu, 0);
  EXPECT_EQ(tasks[1].memory_mib, 31232);
  EXPECT_EQ(tasks[1].max_per_node, -1);
}

TEST(TraceTest, MalformedRowsNameFileLineAndColumn) {
  const std::pair<const char*, const char*> kCases[] = {
      {"sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,lots,1,0,\n",
       "nodes.csv:3: 'cpu_milli' is not a number: 'lots'"},
      {"sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,99,P100\n",
       "nodes.csv:2: 'gpu' = 99 is outside [0, 16]"},
      {"sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,\n",
       "nodes.csv:2: a node with GPUs needs a 'model'"},
      {"sn,cpu_milli,memory_mib,gpu,model\nn0,64000\n", "nodes.csv:2: row has 2 columns"},
      {"sn,cpu,memory_mib,gpu,model\n", "nodes.csv:1: no column 'cpu_milli'"},
      {"sn,cpu_milli,memory_mib,gpu,model\n", "nodes.csv: no nodes"},
      {"", "nodes.csv: empty file"},
  };
  for (const auto& [text, want] : kCases) {
    auto r = ParseNodeList(text, "nodes.csv");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
  auto pods =
      ParseTaskList("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,1,1,0\n", "pods.csv");
  ASSERT_FALSE(pods.ok());
  EXPECT_NE(pods.status().message().find("pods.csv:2: 'gpu_milli' is 0"), std::string::npos);
  auto dlrm = ParseTaskList(
      "instance_sn,role,app_name,cpu_request,gpu_request,memory_request,max_instance_per_node\n"
      "i0,XN,a,1,0,1,-1\n",
      "dlrm.csv");
  ASSERT_FALSE(dlrm.ok());
  EXPECT_NE(dlrm.status().message().find("dlrm.csv:2: 'role' must be CN"), std::string::npos);
  EXPECT_EQ(ReadNodeList("/nonexistent/nodes.csv").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace dais::placement
