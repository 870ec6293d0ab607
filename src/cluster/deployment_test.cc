#include "cluster/deployment.h"

#include <gtest/gtest.h>

#include "common/status_testing.h"

namespace dais::cluster {
namespace {

TEST(DeploymentTest, ParsesAndRoundTrips) {
  ASSERT_OK_AND_ASSIGN(DeploymentSpec d, ParseDeploymentYaml(R"(
name: ranker
model: mlp_small
version: 1
replicas: 3
resources: {cpu_milli: 1000, memory_mib: 512, gpus: 2, gpu_memory_mib: 2048}
constraints: {gpu_models: [A100, H100], node_labels: {zone: a}, max_per_node: 2}
priority: best-effort
may_preempt: false
)"));
  EXPECT_EQ(d.name, "ranker");
  EXPECT_EQ(d.replicas, 3);
  EXPECT_EQ(d.gpus, 2);
  EXPECT_EQ(d.gpu_models, (std::vector<std::string>{"A100", "H100"}));
  EXPECT_EQ(d.node_labels.at("zone"), "a");
  const placement::TaskSpec t = d.Task();
  EXPECT_EQ(t.num_gpu, 2);
  EXPECT_EQ(t.gpu_milli, 1000);
  EXPECT_EQ(t.max_per_node, 2);
  EXPECT_EQ(t.group, "ranker");
  ASSERT_OK_AND_ASSIGN(DeploymentSpec back, DeploymentFromJson(DeploymentToJson(d)));
  EXPECT_EQ(DeploymentToJson(back), DeploymentToJson(d));
  ASSERT_OK_AND_ASSIGN(DeploymentSpec share,
                       ParseDeploymentYaml("name: s\nmodel: m\nresources: {gpu_milli: 250}"));
  EXPECT_EQ(share.Task().num_gpu, 1);
  EXPECT_EQ(share.Task().gpu_milli, 250);
  EXPECT_EQ(share.replicas, 1);
  EXPECT_EQ(share.max_per_node, 1);
}

// Issue 32: documents written straight into etcd were read leniently (a string "5" or
// 4294967297 as replicas became the default 1, silently).
TEST(DeploymentTest, JsonIsReadAsStrictlyAsTheYaml) {
  EXPECT_TRUE(DeploymentFromJson(R"({"name": "a", "model": "m", "replicas": 5})").ok());
  EXPECT_NE(DeploymentFromJson(R"({"name": "a", "model": "m", "replicas": "5"})")
                .status()
                .message()
                .find("replicas: expected an integer"),
            std::string::npos);
  EXPECT_NE(DeploymentFromJson(R"({"name": "a", "model": "m", "replicas": 4294967297})")
                .status()
                .message()
                .find("replicas: expected an integer from"),
            std::string::npos);
  EXPECT_FALSE(DeploymentFromJson(R"({"name": 7, "model": "m"})").ok());
  EXPECT_FALSE(DeploymentFromJson(R"({"name": "a", "model": "m", "may_preempt": "yes"})").ok());
  EXPECT_FALSE(DeploymentFromJson(R"({"name": "a", "model": "m", "gpu_models": "A100"})").ok());
}

TEST(DeploymentTest, BadSpecsNameTheField) {
  const std::pair<const char*, const char*> kCases[] = {
      {"name: a\nmodel: m\nreplica: 2", "replica: unknown field"},
      {"name: a\nmodel: m\nresources: {gpu: 1}", "resources.gpu: unknown field"},
      {"name: a\nmodel: m\nreplicas: many", "replicas: expected a number"},
      {"name: a\nmodel: m\nresources: {gpu_milli: 1500}", "resources.gpu_milli: 1500"},
      {"name: a\nmodel: m\nresources: {gpus: 1, gpu_milli: 500}", "not both"},
      {"name: a\nmodel: m\nreplicas: -1", "replicas: 0 to 10000"},
      {"name: A_b\nmodel: m", "name: 'A_b'"},
      {"name: a", "model: required"},
      {"name: a\nmodel: m\nconstraints: {gpu_models: [A100]}", "asks for no GPU"},
      {"name: a\nmodel: m\nconstraints: {max_per_node: 0}", "max_per_node"},
      {"name: a\nmodel: m\npriority: urgent", "priority: 'urgent'"},
      {"name: a\nmodel: m\npriority: best-effort\nmay_preempt: true", "may_preempt: only"},
      {"- a\n- b", "must be a YAML mapping"},
      {"name: [unclosed", "not YAML"},
  };
  for (const auto& [yaml, want] : kCases) {
    auto r = ParseDeploymentYaml(yaml);
    ASSERT_FALSE(r.ok()) << yaml;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(want), std::string::npos)
        << yaml << " -> " << r.status().message();
  }
}

}  // namespace
}  // namespace dais::cluster
