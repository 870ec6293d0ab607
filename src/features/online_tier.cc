#include "features/online_tier.h"

#include "fmt/format.h"

namespace dais::features {

std::string RecordKey(const FeatureSpec& spec, const GroupSpec& group, std::string_view entity_id) {
  return fmt::format("dais:{}:{{{}={}}}:{}:v{}", spec.domain, group.entity, entity_id, group.name,
                     group.version);
}

}  // namespace dais::features
