#include "cluster/version_resolution.h"

#include <algorithm>
#include <iterator>

namespace dais::cluster {

int64_t ResolveLatestVersion(const std::vector<RepositoryVersions>& nodes,
                             const std::string& model) {
  std::set<int64_t> common;
  bool first = true;
  for (const RepositoryVersions& node : nodes) {
    auto it = node.find(model);
    if (it == node.end()) continue;
    if (first) {
      common = it->second;
      first = false;
      continue;
    }
    std::set<int64_t> both;
    std::set_intersection(common.begin(), common.end(), it->second.begin(), it->second.end(),
                          std::inserter(both, both.end()));
    common = std::move(both);
  }
  return common.empty() ? -1 : *common.rbegin();
}

}  // namespace dais::cluster
