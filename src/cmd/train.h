// `dais train`: the point-in-time join of archived feedback and labels, XGBoost training, the
// comparison of candidate and serving version on a held-out window, and the publication of the
// candidate as the model's next version when it is better (learn/, docs/learning-loop.md).
#pragma once

#include <cstdint>
#include <string>

namespace CLI {
class App;
}

namespace dais::cmd {

struct TrainCliOptions {
  std::string config;     // training.yaml
  int64_t cutoff_ms = 0;  // 0: now
  bool dry_run = false;   // train and compare, publish nothing
  // Written when the run ends with 0 or 3: {"published": bool, "version": N (the new version, or
  // the serving one), "metric", "candidate", "serving"}; read by training jobs
  // (training_runner.h).
  std::string result_file;
};

CLI::App* AddTrainCommand(CLI::App* app, TrainCliOptions* options);
// 0: published; 3: the candidate is not better (nothing published); 2: a bad spec; 1: other
// errors (no data, an empty held-out window, XGBoost refused).
int RunTrain(const TrainCliOptions& options);

}  // namespace dais::cmd
