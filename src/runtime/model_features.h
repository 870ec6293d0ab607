// A model's feature spec (features.yaml beside config.pbtxt), checked against its configuration
// when the model loads: every mapped input exists, is a numeric tensor the features can fill,
// and holds exactly as many elements per batch row as the mapped features.
#pragma once

#include "dais/status.h"
#include "features/spec/feature_spec.h"
#include "model_config.pb.h"
#include "runtime/repository.h"

namespace dais::runtime {

// Null when the model has no features.yaml. InvalidArgument naming the file and the input.
StatusOr<features::FeatureSpecPtr> LoadModelFeatures(const ModelSource& source,
                                                     const inference::ModelConfig& config);

}  // namespace dais::runtime
