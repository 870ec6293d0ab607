// training.yaml: what `dais train` joins and trains (docs/learning-loop.md, "dais train").
//
//   model: fraud                   # the model's folder in the repository
//   repository: models             # the model repository (relative paths: to the file's folder)
//   feedback: offline/feedback     # the archived feedback dataset (dais archive)
//   labels: offline/labels         # the archived label dataset
//   label: fraud                   # the label's name ("label" for {"label": v} labels)
//   input: input__0                # the feedback record's input that holds the features
//   window: 1d                     # a label counts if it arrived within this after the prediction
//   unlabeled: 0                   # the value of a prediction whose window closed unlabeled
//                                  # (absent: such predictions are left out)
//   holdout: 1h                    # the newest part before the cut-off: scores both versions;
//                                  # or a share of the rows ("25%": the newest quarter), which
//                                  # suits scheduled runs whose data does not arrive steadily
//   metric: auc                    # auc | logloss | accuracy: what the candidate must beat
//   min_improvement: 0.01          # ... by at least this much
//   xgboost:
//     rounds: 50
//     continue: true               # from the serving version's booster (default: from scratch)
//     params: {max_depth: 4, eta: 0.3, objective: "binary:logistic"}
//   torch:                         # for a TorchScript model (model.pt): trained further
//     epochs: 20
//     learning_rate: 0.01          # Adam
//     batch_size: 64
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dais/status.h"

namespace dais::learn {

struct TrainingSpec {
  std::string model;
  std::string repository;
  std::string feedback;  // dataset directories
  std::string labels;
  std::string label = "label";
  std::string input;
  int64_t window_ms = 24 * 3600 * 1000;
  bool has_unlabeled = false;
  double unlabeled = 0;
  int64_t holdout_ms = 0;
  double holdout_fraction = 0;  // "holdout: 25%": 0.25 (then holdout_ms is 0)
  std::string metric = "auc";
  double min_improvement = 0;
  int rounds = 50;
  bool continue_training = false;
  std::vector<std::pair<std::string, std::string>> params;  // XGBoosterSetParam, in order
  int epochs = 20;                                          // torch
  double learning_rate = 0.01;
  int64_t batch_size = 64;
};

// Parses training.yaml. InvalidArgument "<file>:<line>: <field>: <what>" naming the field; paths
// relative to the file's folder are made absolute. The datasets and the model must exist
// (NotFound naming the field and the path).
StatusOr<TrainingSpec> LoadTrainingSpec(const std::string& path);

}  // namespace dais::learn
