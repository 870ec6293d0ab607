// Training and scoring of `dais train` with the LibTorch C++ API, for TorchScript models (the
// MLP example): the serving version's module is trained further on the joined rows (Adam,
// mini-batches, shuffled with a fixed seed), saved as the candidate, and both are scored on the
// same held-out rows.
//
// The module's first output holds logits: one column (binary: sigmoid, binary cross-entropy),
// or k >= 2 columns (softmax, cross-entropy against the label as a class index 0..k-1; binary
// when k = 2, with p the probability of class 1). AUC needs a binary model; for k > 2 the
// scores are accuracy and log loss.
#pragma once

#include <functional>
#include <string>

#include "dais/status.h"
#include "learn/join.h"
#include "learn/training_spec.h"
#include "learn/xgb_train.h"

namespace dais::learn {

// InvalidArgument naming the field: a label that is not a class of the module's outputs, an
// input width the module refuses, metric auc for a model of more than two classes.
StatusOr<TrainResult> TrainTorchAndScore(const TrainingSpec& spec, const Dataset& train,
                                         const Dataset& holdout, const std::string& serving_model,
                                         const std::string& candidate_path,
                                         const std::function<void(const std::string&)>& progress);

}  // namespace dais::learn
