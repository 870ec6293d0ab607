// Training and scoring of `dais train` on XGBoost's C API: a candidate booster trained on the
// joined rows (from scratch, or continued from the serving version's booster), and both scored
// on the same held-out rows.
#pragma once

#include <functional>
#include <string>

#include "dais/status.h"
#include "learn/join.h"
#include "learn/training_spec.h"

namespace dais::learn {

struct Scores {
  double auc = 0;  // NaN when the rows hold one class only
  double logloss = 0;
  double accuracy = 0;  // at 0.5
  size_t rows = 0;
};

// Scores of predicted probabilities `p` against 0/1 labels `y`.
Scores Score(const std::vector<float>& p, const std::vector<float>& y);
// The value of `metric` ("auc", "logloss", "accuracy") and whether larger is better.
double MetricOf(const Scores& s, const std::string& metric);
bool HigherIsBetter(const std::string& metric);

struct TrainResult {
  Scores candidate, serving;
  int rounds = 0;  // boosting rounds of the candidate (continued: the serving's plus the new)
};

// Trains on `train` with the spec's parameters and rounds, saves the candidate to
// `candidate_path` (XGBoost JSON), and scores it and the booster in `serving_model` on `holdout`.
// `progress` gets a line every few rounds (round, the training log loss, ETA). InvalidArgument
// when XGBoost refuses a parameter (its message), or when the serving model's feature count is
// not the data's.
StatusOr<TrainResult> TrainAndScore(const TrainingSpec& spec, const Dataset& train,
                                    const Dataset& holdout, const std::string& serving_model,
                                    const std::string& candidate_path,
                                    const std::function<void(const std::string&)>& progress);

}  // namespace dais::learn
