#include "learn/xgb_train.h"

#include <xgboost/c_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>

namespace dais::learn {
namespace {

Status XgbError(const std::string& what) {
  return InvalidArgument(what + ": " + XGBGetLastError());
}

struct Matrix {
  DMatrixHandle h = nullptr;
  ~Matrix() {
    if (h) XGDMatrixFree(h);
  }
};

struct Booster {
  BoosterHandle h = nullptr;
  ~Booster() {
    if (h) XGBoosterFree(h);
  }
};

StatusOr<std::unique_ptr<Matrix>> MakeMatrix(const Dataset& d) {
  auto m = std::make_unique<Matrix>();
  if (XGDMatrixCreateFromMat(d.x.data(), d.rows(), static_cast<bst_ulong>(d.num_features),
                             std::numeric_limits<float>::quiet_NaN(), &m->h) != 0 ||
      XGDMatrixSetFloatInfo(m->h, "label", d.y.data(), d.rows()) != 0) {
    return XgbError("XGBoost matrix");
  }
  return m;
}

StatusOr<std::vector<float>> Predict(BoosterHandle b, DMatrixHandle m) {
  bst_ulong n = 0;
  const float* out = nullptr;
  if (XGBoosterPredict(b, m, 0, 0, 0, &n, &out) != 0) return XgbError("XGBoost predict");
  return std::vector<float>(out, out + n);
}

StatusOr<int64_t> NumFeatures(BoosterHandle b) {
  bst_ulong n = 0;
  if (XGBoosterGetNumFeature(b, &n) != 0) return XgbError("XGBoost num_feature");
  return static_cast<int64_t>(n);
}

}  // namespace

Scores Score(const std::vector<float>& p, const std::vector<float>& y) {
  Scores s;
  s.rows = y.size();
  if (y.empty()) return s;
  double loss = 0;
  size_t right = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double q = std::clamp(static_cast<double>(p[i]), 1e-15, 1 - 1e-15);
    loss -= y[i] > 0.5 ? std::log(q) : std::log(1 - q);
    right += (p[i] >= 0.5) == (y[i] > 0.5) ? 1 : 0;
  }
  s.logloss = loss / static_cast<double>(y.size());
  s.accuracy = static_cast<double>(right) / static_cast<double>(y.size());
  // AUC by ranks (ties share their mean rank): the Mann-Whitney U statistic.
  std::vector<size_t> order(y.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&p](size_t a, size_t b) { return p[a] < p[b]; });
  double positive_rank_sum = 0;
  size_t positives = 0;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j < order.size() && p[order[j]] == p[order[i]]) ++j;
    const double rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2;
    for (size_t k = i; k < j; ++k) {
      if (y[order[k]] > 0.5) positive_rank_sum += rank, ++positives;
    }
    i = j;
  }
  const size_t negatives = y.size() - positives;
  s.auc = positives == 0 || negatives == 0
              ? std::numeric_limits<double>::quiet_NaN()
              : (positive_rank_sum -
                 static_cast<double>(positives) * static_cast<double>(positives + 1) / 2) /
                    (static_cast<double>(positives) * static_cast<double>(negatives));
  return s;
}

double MetricOf(const Scores& s, const std::string& metric) {
  if (metric == "logloss") return s.logloss;
  if (metric == "accuracy") return s.accuracy;
  return s.auc;
}

bool HigherIsBetter(const std::string& metric) { return metric != "logloss"; }

StatusOr<TrainResult> TrainAndScore(const TrainingSpec& spec, const Dataset& train,
                                    const Dataset& holdout, const std::string& serving_model,
                                    const std::string& candidate_path,
                                    const std::function<void(const std::string&)>& progress) {
  ASSIGN_OR_RETURN(auto dtrain, MakeMatrix(train));
  ASSIGN_OR_RETURN(auto dhold, MakeMatrix(holdout));
  Booster serving;
  if (XGBoosterCreate(nullptr, 0, &serving.h) != 0 ||
      XGBoosterLoadModel(serving.h, serving_model.c_str()) != 0) {
    return XgbError("the serving model " + serving_model);
  }
  ASSIGN_OR_RETURN(int64_t serving_width, NumFeatures(serving.h));
  if (serving_width != train.num_features) {
    return InvalidArgument("the serving model " + serving_model + " takes " +
                           std::to_string(serving_width) + " features; the feedback's input '" +
                           spec.input + "' has " + std::to_string(train.num_features));
  }
  TrainResult r;
  ASSIGN_OR_RETURN(auto serving_p, Predict(serving.h, dhold->h));
  r.serving = Score(serving_p, holdout.y);

  Booster candidate;
  DMatrixHandle cache[] = {dtrain->h};
  if (XGBoosterCreate(cache, 1, &candidate.h) != 0) return XgbError("XGBoost booster");
  int first_round = 0;
  if (spec.continue_training) {
    if (XGBoosterLoadModel(candidate.h, serving_model.c_str()) != 0) {
      return XgbError("continuing from " + serving_model);
    }
    if (XGBoosterBoostedRounds(candidate.h, &first_round) != 0) return XgbError("XGBoost rounds");
  }
  XGBoosterSetParam(candidate.h, "nthread", "1");
  for (const auto& [k, v] : spec.params) {
    if (XGBoosterSetParam(candidate.h, k.c_str(), v.c_str()) != 0) {
      return XgbError("xgboost.params." + k);
    }
  }
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  const char* names[] = {"train"};
  for (int i = 0; i < spec.rounds; ++i) {
    if (XGBoosterUpdateOneIter(candidate.h, first_round + i, dtrain->h) != 0) {
      return XgbError("XGBoost round " + std::to_string(i + 1));
    }
    const auto now = std::chrono::steady_clock::now();
    if (i + 1 == spec.rounds || now - last > std::chrono::seconds(1)) {
      last = now;
      const char* eval = nullptr;
      XGBoosterEvalOneIter(candidate.h, first_round + i, cache, names, 1, &eval);
      const double secs = std::chrono::duration<double>(now - start).count();
      const double eta = secs / (i + 1) * (spec.rounds - i - 1);
      char line[256];
      std::snprintf(line, sizeof(line), "round %d/%d %s, %.1f s, ETA %.1f s", i + 1, spec.rounds,
                    eval ? eval : "", secs, eta);
      progress(line);
    }
  }
  r.rounds = first_round + spec.rounds;
  ASSIGN_OR_RETURN(auto candidate_p, Predict(candidate.h, dhold->h));
  r.candidate = Score(candidate_p, holdout.y);
  if (XGBoosterSaveModel(candidate.h, candidate_path.c_str()) != 0) {
    return XgbError("saving the candidate to " + candidate_path);
  }
  return r;
}

}  // namespace dais::learn
