#include "cluster/version_resolution.h"

#include <gtest/gtest.h>

namespace dais::cluster {
namespace {

TEST(ResolveLatestVersion, HighestVersionEveryListingNodeHolds) {
  // n2 has v2 already, n1 not yet: both replicas stay on v1 until n1 has it too.
  std::vector<RepositoryVersions> nodes = {{{"m", {1}}}, {{"m", {1, 2}}, {"x", {7}}}};
  EXPECT_EQ(ResolveLatestVersion(nodes, "m"), 1);
  nodes[0]["m"].insert(2);
  EXPECT_EQ(ResolveLatestVersion(nodes, "m"), 2);
  // A node whose repository lacks the model does not hold the others back.
  EXPECT_EQ(ResolveLatestVersion(nodes, "x"), 7);
  EXPECT_EQ(ResolveLatestVersion(nodes, "absent"), -1);
  EXPECT_EQ(ResolveLatestVersion({}, "m"), -1);
  // No version in common: the policy decides (-1), as before.
  EXPECT_EQ(ResolveLatestVersion({{{"m", {1}}}, {{"m", {2}}}}, "m"), -1);
}

}  // namespace
}  // namespace dais::cluster
