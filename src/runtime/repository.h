// The model repository on disk: Triton's layout, <repo>/<model>/config.pbtxt and
// <repo>/<model>/<version>/<files>. Scanning is read-only and touches nothing else.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dais/status.h"
#include "model_config.pb.h"

namespace dais::runtime {

struct ModelSource {
  std::string name;
  std::string dir;  // <repo>/<model>
  bool has_config = false;
  std::string config_text;
  // features.yaml beside config.pbtxt (empty when there is none): the model's feature spec.
  std::string features_text;
  // version -> fingerprint of its files (names, sizes, modification times) and of the config;
  // a change means the version must be reloaded.
  std::map<int64_t, std::string> versions;
};

// Names of the model directories in every repository, sorted. A repository that does not exist
// is an error.
StatusOr<std::vector<std::string>> ListModels(const std::vector<std::string>& repositories);

// Reads one model's directory. NotFound when no repository has it; InvalidArgument when two do.
StatusOr<ModelSource> ScanModel(const std::vector<std::string>& repositories,
                                const std::string& name);

// Parses and validates the configuration; when config.pbtxt is missing (or lacks inputs and
// outputs) and the backend can tell the signature from the model file, completes it.
// Warnings about ignored fields are logged.
StatusOr<inference::ModelConfig> LoadModelConfig(const ModelSource& source, bool allow_gpu);

}  // namespace dais::runtime
