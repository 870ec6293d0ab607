#include "features/store/online_tier.h"

#include "fmt/format.h"

namespace dais::features {

std::string RecordKey(const FeatureSpec& spec, const GroupSpec& group, std::string_view entity_id) {
  // Hand-assembled (this runs once per record of every lookup).
  const std::string version = std::to_string(group.version);
  std::string key;
  key.reserve(5 + spec.domain.size() + 2 + group.entity.size() + 1 + entity_id.size() + 2 +
              group.name.size() + 2 + version.size());
  key.append("dais:").append(spec.domain).append(":{").append(group.entity).append("=");
  key.append(entity_id).append("}:").append(group.name).append(":v").append(version);
  return key;
}

}  // namespace dais::features
