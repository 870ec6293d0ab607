// `dais features get|put|import|prewarm|stats`: operator tools for the online feature store.
// Flags wired here; the work is in src/features/.
#pragma once

#include <string>
#include <vector>

#include "cmd/serve_features.h"

namespace CLI {
class App;
}

namespace dais::cmd {

struct FeaturesCliOptions {
  FeatureFlags store;
  std::string spec;
  std::vector<std::string> entities;  // "user_id=1,2,3"
  std::vector<std::string> features;  // "group:feature"
  std::string project;
  std::string json;  // put: the Feast push body, or @file
  std::string root;
  std::vector<std::string> groups;
  std::string date;
  int64_t top = 10000;
  double soft_limit = 0.85, hard_limit = 0.95;
  size_t batch_rows = 512;
};

// Adds the `features` subcommand with its own subcommands; returns it.
CLI::App* AddFeaturesCommand(CLI::App* app, FeaturesCliOptions* options);
int RunFeatures(CLI::App* features_cmd, const FeaturesCliOptions& options);

}  // namespace dais::cmd
