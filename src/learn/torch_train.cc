#include "learn/torch_train.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <limits>

#include "fmt/format.h"

namespace dais::learn {
namespace {

torch::Tensor Features(const Dataset& d) {
  return torch::from_blob(const_cast<float*>(d.x.data()),
                          {static_cast<int64_t>(d.rows()), static_cast<int64_t>(d.num_features)},
                          torch::kFloat32)
      .clone();
}

torch::Tensor Logits(torch::jit::script::Module& m, const torch::Tensor& x) {
  torch::jit::IValue out = m.forward({x});
  if (out.isTuple()) out = out.toTuple()->elements().at(0);
  torch::Tensor t = out.toTensor();
  return t.dim() == 1 ? t.unsqueeze(1) : t;
}

// Binary (1 or 2 columns): the existing scores of p; more classes: accuracy and log loss.
Scores ScoreLogits(const torch::Tensor& logits, const std::vector<float>& y) {
  const int64_t k = logits.size(1);
  if (k <= 2) {
    torch::Tensor p =
        k == 1 ? torch::sigmoid(logits.select(1, 0)) : torch::softmax(logits, 1).select(1, 1);
    p = p.contiguous();
    std::vector<float> pv(p.data_ptr<float>(), p.data_ptr<float>() + p.numel());
    return Score(pv, y);
  }
  torch::Tensor logp = torch::log_softmax(logits, 1);
  Scores s;
  s.rows = y.size();
  s.auc = std::numeric_limits<double>::quiet_NaN();
  const torch::Tensor argmax = logits.argmax(1);
  double loss = 0, right = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const auto c = static_cast<int64_t>(y[i]);
    loss -= logp[static_cast<int64_t>(i)][c].item<double>();
    right += argmax[static_cast<int64_t>(i)].item<int64_t>() == c ? 1 : 0;
  }
  s.logloss = y.empty() ? 0 : loss / static_cast<double>(y.size());
  s.accuracy = y.empty() ? 0 : right / static_cast<double>(y.size());
  return s;
}

// InvalidArgument unless every label is a class of k outputs (k = 1: 0 or 1).
Status CheckLabels(const Dataset& d, int64_t k, const std::string& label) {
  const int64_t classes = k == 1 ? 2 : k;
  for (float v : d.y) {
    if (v < 0 || v >= static_cast<float>(classes) || v != std::floor(v)) {
      return InvalidArgument(
          fmt::format("label: '{}' value {} is not a class of the module's {} output(s) (0 to {})",
                      label, v, k, classes - 1));
    }
  }
  return OkStatus();
}

torch::Tensor Loss(const torch::Tensor& logits, const torch::Tensor& y) {
  if (logits.size(1) == 1) {
    return torch::binary_cross_entropy_with_logits(logits.select(1, 0), y);
  }
  return torch::nn::functional::cross_entropy(logits, y.to(torch::kLong));
}

}  // namespace

StatusOr<TrainResult> TrainTorchAndScore(const TrainingSpec& spec, const Dataset& train,
                                         const Dataset& holdout, const std::string& serving_model,
                                         const std::string& candidate_path,
                                         const std::function<void(const std::string&)>& progress) {
  torch::manual_seed(0);
  torch::jit::script::Module m, serving;
  try {
    m = torch::jit::load(serving_model);
    serving = torch::jit::load(serving_model);
  } catch (const std::exception& e) {
    return InvalidArgument("model: cannot load " + serving_model + ": " + e.what());
  }
  const torch::Tensor x = Features(train), xh = Features(holdout);
  const torch::Tensor y = torch::from_blob(const_cast<float*>(train.y.data()),
                                           {static_cast<int64_t>(train.rows())}, torch::kFloat32)
                              .clone();
  int64_t k = 0;
  try {
    torch::NoGradGuard no_grad;
    serving.eval();
    k = Logits(serving, xh.slice(0, 0, 1)).size(1);
  } catch (const std::exception& e) {
    return InvalidArgument(fmt::format("input: the module refuses rows of {} features: {}",
                                       train.num_features, e.what()));
  }
  if (k > 2 && spec.metric == "auc") {
    return InvalidArgument(fmt::format(
        "metric: auc needs a binary model; this one has {} classes (use accuracy or logloss)", k));
  }
  RETURN_IF_ERROR(CheckLabels(train, k, spec.label));
  RETURN_IF_ERROR(CheckLabels(holdout, k, spec.label));
  std::vector<torch::Tensor> params;
  for (torch::Tensor p : m.parameters()) {
    p.set_requires_grad(true);
    params.push_back(p);
  }
  torch::optim::Adam opt(params, torch::optim::AdamOptions(spec.learning_rate));
  m.train();
  const int64_t rows = x.size(0), batch = spec.batch_size;
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  double epoch_loss = 0;
  for (int epoch = 1; epoch <= spec.epochs; ++epoch) {
    const torch::Tensor perm = torch::randperm(rows);
    epoch_loss = 0;
    for (int64_t b = 0; b < rows; b += batch) {
      const torch::Tensor idx = perm.slice(0, b, std::min(rows, b + batch));
      opt.zero_grad();
      torch::Tensor loss = Loss(Logits(m, x.index_select(0, idx)), y.index_select(0, idx));
      loss.backward();
      opt.step();
      epoch_loss += loss.item<double>() * static_cast<double>(idx.size(0));
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - last > std::chrono::seconds(1) || epoch == spec.epochs) {
      last = now;
      const double spent = std::chrono::duration<double>(now - start).count();
      progress(fmt::format("epoch {}/{} loss {:.5f}, {:.1f} s, ETA {:.1f} s", epoch, spec.epochs,
                           epoch_loss / static_cast<double>(rows), spent,
                           spent / epoch * (spec.epochs - epoch)));
    }
  }
  m.eval();
  try {
    m.save(candidate_path);
  } catch (const std::exception& e) {
    return Internal("cannot save the candidate to " + candidate_path + ": " + e.what());
  }
  torch::NoGradGuard no_grad;
  TrainResult r;
  r.rounds = spec.epochs;
  r.candidate = ScoreLogits(Logits(m, xh), holdout.y);
  r.serving = ScoreLogits(Logits(serving, xh), holdout.y);
  return r;
}

}  // namespace dais::learn
