// LibTorch for `dais fed` (docs/federated.md): a TorchScript module's parameters as one flat
// vector (in `parameters()` order), local training from the round's global parameters (SGD,
// optionally with FedProx's proximal term), scoring and saving with a given vector. The module's
// first output holds logits, as for `dais train` (torch_train.h): one column (binary) or k >= 2
// (classes 0..k-1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dais/status.h"
#include "learn/join.h"
#include "learn/xgb_train.h"

namespace dais::learn {

// `torchscript`: the bytes of a model.pt. InvalidArgument when LibTorch cannot load it.
StatusOr<std::vector<float>> ModuleParameters(const std::string& torchscript);

struct LocalTraining {
  int epochs = 1;
  double learning_rate = 0.05;  // SGD
  int64_t batch_size = 32;
  double proximal_mu = 0;  // FedProx: + mu/2 ||w - w_global||^2
  uint64_t seed = 0;       // the shuffling
};

struct LocalResult {
  std::vector<float> delta;  // trained minus global
  double loss = 0;           // mean loss of the last epoch
};

// InvalidArgument: a parameter vector of another length, rows the module refuses, a label that
// is not one of its classes.
StatusOr<LocalResult> TrainLocal(const std::string& torchscript, const std::vector<float>& global,
                                 const Dataset& data, const LocalTraining& options);

// Accuracy (and log loss) of the module with `params` on `data`.
StatusOr<Scores> ScoreParameters(const std::string& torchscript, const std::vector<float>& params,
                                 const Dataset& data);

// Writes the module with `params` to `path` (a model.pt the backends load).
Status SaveWithParameters(const std::string& torchscript, const std::vector<float>& params,
                          const std::string& path);

}  // namespace dais::learn
