// The version a deployment without `version:` runs (issue 31: without one, each placement loaded
// whatever its node's repository held last, so after a repository change one replica served v1
// and another v2). Nodes publish the versions their repository holds (`"versions"` in their
// registration, docs/cluster.md); the scheduler resolves the deployment's version from them, the
// same for every replica, and moves every replica at once when the repositories change (the
// path of a `version:` edit: assignments rewritten in place, a "version" event each).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace dais::cluster {

// model -> the versions one node's repository holds.
using RepositoryVersions = std::map<std::string, std::set<int64_t>>;

// The highest version of `model` that every node listing the model holds (so that any of them
// can take a replica); -1 when no node lists it (nodes of an older dais, or the model is in no
// repository: the nodes' version policy decides, as before).
int64_t ResolveLatestVersion(const std::vector<RepositoryVersions>& nodes,
                             const std::string& model);

}  // namespace dais::cluster
