#include "runtime/model_features.h"

#include "features/spec/feature_codec.h"
#include "fmt/format.h"
#include "runtime/request_enricher.h"
#include "runtime/tensor_config.h"

namespace dais::runtime {

StatusOr<features::FeatureSpecPtr> LoadModelFeatures(const ModelSource& source,
                                                     const inference::ModelConfig& config) {
  if (source.features_text.empty()) return features::FeatureSpecPtr();
  const std::string path = source.dir + "/features.yaml";
  ASSIGN_OR_RETURN(auto spec, features::ParseFeatureSpec(source.features_text, path));
  for (const auto& m : spec->inputs) {
    const inference::ModelInput* in = nullptr;
    for (const auto& i : config.input()) {
      if (i.name() == m.input) in = &i;
    }
    std::string where = fmt::format("{}: input {}", path, m.input);
    if (in == nullptr) {
      return InvalidArgument(fmt::format("{}: model '{}' has no such input", where, config.name()));
    }
    DataType dt = ConfigDataType(in->data_type());
    if (!features::IsFeatureType(dt) && dt != DataType::kInt16) {
      return InvalidArgument(
          fmt::format("{}: features cannot fill a {} input", where, DataTypeName(dt)));
    }
    if (config.max_batch_size() <= 0) {
      return InvalidArgument(fmt::format(
          "{}: features fill one batch row per entity, so the model needs max_batch_size > 0",
          where));
    }
    int64_t elements = 1;
    for (int64_t d : in->dims()) {
      if (d < 0) {
        return InvalidArgument(
            fmt::format("{}: has a variable dimension; features need a fixed shape", where));
      }
      elements *= d;
    }
    if (elements != m.elements) {
      return InvalidArgument(
          fmt::format("{}: the input holds {} elements per row but its features add up to {}",
                      where, elements, m.elements));
    }
  }
  return spec;
}

}  // namespace dais::runtime

namespace dais::runtime {

bool NeedsFeatures(const InferenceRequest& request, const ModelVersion& version) {
  const auto& spec = version.features();
  if (!spec) return false;
  for (const auto& m : spec->inputs) {
    bool present = false;
    for (const auto& t : request.inputs) present = present || t.name == m.input;
    if (!present) return true;
  }
  return false;
}

}  // namespace dais::runtime
