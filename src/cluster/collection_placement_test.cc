// A collection as the scheduler places it: the stored document, the shard deployments and the
// assignment's `memory` object.
#include "cluster/collection_placement.h"

#include <gtest/gtest.h>

#include "cluster/assignment.h"

namespace dais::cluster {
namespace {

TEST(CollectionPlacementTest, ShardsBecomeSpreadDeployments) {
  auto c = ParseCollectionPlacement(
      R"({"spec": {"name": "items", "tenant": "shop", "metric": "l2", "dimension": 4,
                   "shards": 3, "replicas": 2},
          "resources": {"cpu_milli": 250, "memory_mib": 512}, "node_labels": {"pool": "mem"}})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->shards, 3);
  EXPECT_FALSE(c->HigherIsBetter());
  const DeploymentSpec d = c->ShardDeployment(2);
  EXPECT_EQ(d.name, "memory:items:2");
  EXPECT_EQ(d.model, d.name);
  EXPECT_EQ(d.replicas, 2);
  EXPECT_EQ(d.max_per_node, 1);
  EXPECT_EQ(d.memory_mib, 512);
  EXPECT_EQ(d.node_labels.at("pool"), "mem");
  // Round trip, and the job an assignment carries.
  auto again = ParseCollectionPlacement(CollectionPlacementToJson(*c));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->spec_json, c->spec_json);
  Assignment a{d.name, d.model, 0, {}, 0, "latency-sensitive", "", c->ShardJob(2), ""};
  auto back = AssignmentFromJson(a.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->IsJob());
  auto job = ParseShardJob(back->memory);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->shard, 2);
  EXPECT_EQ(job->spec_json, c->spec_json);
}

TEST(CollectionPlacementTest, RefusalsNameWhatIsWrong) {
  EXPECT_NE(ParseCollectionPlacement("{}").status().message().find("spec"), std::string::npos);
  EXPECT_NE(
      ParseCollectionPlacement(R"({"spec": {"dimension": 2}})").status().message().find("name"),
      std::string::npos);
  EXPECT_NE(ParseCollectionPlacement(R"({"spec": {"name": "a", "shards": 0}})")
                .status()
                .message()
                .find("shards"),
            std::string::npos);
  EXPECT_NE(ParseCollectionPlacement(R"({"spec": {"name": "a"}, "resources": {"cpu_milli": "x"}})")
                .status()
                .message()
                .find("cpu_milli"),
            std::string::npos);
  EXPECT_FALSE(ParseShardJob(R"({"spec": {}})").ok());
}

}  // namespace
}  // namespace dais::cluster
