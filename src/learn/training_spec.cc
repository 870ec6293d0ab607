#include "learn/training_spec.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "features/spec/feature_spec.h"

namespace dais::learn {
namespace {

namespace fs = std::filesystem;

class Ctx {
 public:
  explicit Ctx(std::string file) : file_(std::move(file)) {}
  Status Error(const YAML::Node& n, const std::string& field, const std::string& what) const {
    std::string at = file_;
    if (n.IsDefined() && n.Mark().line >= 0) at += ":" + std::to_string(n.Mark().line + 1);
    return InvalidArgument(at + ": " + field + ": " + what);
  }
  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

StatusOr<std::string> Str(const Ctx& c, const YAML::Node& root, const std::string& field,
                          bool required) {
  const YAML::Node n = root[field];
  if (!n.IsDefined() || n.IsNull()) {
    if (required) return c.Error(root, field, "is required");
    return std::string();
  }
  if (!n.IsScalar() || n.Scalar().empty()) return c.Error(n, field, "a non-empty string is needed");
  return n.Scalar();
}

StatusOr<int64_t> DurationMs(const Ctx& c, const YAML::Node& root, const std::string& field,
                             int64_t fallback, bool required) {
  const YAML::Node n = root[field];
  if (!n.IsDefined()) {
    if (required) return c.Error(root, field, "is required (a duration such as 1h or 7d)");
    return fallback;
  }
  auto us = n.IsScalar() ? features::ParseDurationUs(n.Scalar()) : InvalidArgument("");
  if (!us.ok() || *us <= 0) return c.Error(n, field, "a positive duration such as 1h or 7d");
  return *us / 1000;
}

StatusOr<double> Number(const Ctx& c, const YAML::Node& n, const std::string& field) {
  try {
    return n.as<double>();
  } catch (const YAML::Exception&) {
    return c.Error(n, field, "a number is needed");
  }
}

std::string Absolute(const std::string& file, const std::string& path) {
  fs::path p(path);
  if (p.is_relative()) p = fs::absolute(fs::path(file).parent_path()) / p;
  return p.lexically_normal().string();
}

Status ParseXgboost(const Ctx& c, const YAML::Node& x, TrainingSpec* s) {
  if (!x.IsDefined()) return OkStatus();
  if (!x.IsMap()) return c.Error(x, "xgboost", "a mapping is needed");
  for (const auto& kv : x) {
    const std::string key = kv.first.Scalar();
    if (key != "rounds" && key != "continue" && key != "params") {
      return c.Error(kv.first, "xgboost." + key,
                     "unknown field (expected rounds, continue, params)");
    }
  }
  if (x["rounds"].IsDefined()) {
    try {
      s->rounds = x["rounds"].as<int>();
    } catch (const YAML::Exception&) {
      s->rounds = 0;
    }
    if (s->rounds < 1 || s->rounds > 10000) {
      return c.Error(x["rounds"], "xgboost.rounds", "an integer from 1 to 10000 is needed");
    }
  }
  if (x["continue"].IsDefined()) {
    try {
      s->continue_training = x["continue"].as<bool>();
    } catch (const YAML::Exception&) {
      return c.Error(x["continue"], "xgboost.continue", "true or false is needed");
    }
  }
  const YAML::Node p = x["params"];
  if (p.IsDefined()) {
    if (!p.IsMap()) return c.Error(p, "xgboost.params", "a mapping of XGBoost parameters");
    for (const auto& kv : p) {
      if (!kv.second.IsScalar()) {
        return c.Error(kv.second, "xgboost.params." + kv.first.Scalar(), "a scalar is needed");
      }
      s->params.emplace_back(kv.first.Scalar(), kv.second.Scalar());
    }
  }
  return OkStatus();
}

// torch: {epochs: 20, learning_rate: 0.01, batch_size: 64}
Status ParseTorch(const Ctx& c, const YAML::Node& t, TrainingSpec* s) {
  if (!t.IsDefined()) return OkStatus();
  if (!t.IsMap()) return c.Error(t, "torch", "a mapping is needed");
  for (const auto& kv : t) {
    const std::string key = kv.first.Scalar();
    if (key != "epochs" && key != "learning_rate" && key != "batch_size") {
      return c.Error(kv.first, "torch." + key,
                     "unknown field (expected epochs, learning_rate, batch_size)");
    }
  }
  if (t["epochs"].IsDefined()) {
    ASSIGN_OR_RETURN(const double e, Number(c, t["epochs"], "torch.epochs"));
    if (e < 1 || e > 100000 || e != std::floor(e)) {
      return c.Error(t["epochs"], "torch.epochs", "an integer from 1 to 100000 is needed");
    }
    s->epochs = static_cast<int>(e);
  }
  if (t["learning_rate"].IsDefined()) {
    ASSIGN_OR_RETURN(s->learning_rate, Number(c, t["learning_rate"], "torch.learning_rate"));
    if (!(s->learning_rate > 0 && s->learning_rate <= 10)) {
      return c.Error(t["learning_rate"], "torch.learning_rate", "a number in (0, 10] is needed");
    }
  }
  if (t["batch_size"].IsDefined()) {
    ASSIGN_OR_RETURN(const double b, Number(c, t["batch_size"], "torch.batch_size"));
    if (b < 1 || b > 1000000 || b != std::floor(b)) {
      return c.Error(t["batch_size"], "torch.batch_size", "an integer from 1 to 1000000");
    }
    s->batch_size = static_cast<int64_t>(b);
  }
  return OkStatus();
}

}  // namespace

StatusOr<TrainingSpec> LoadTrainingSpec(const std::string& path) {
  Ctx c(path);
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return NotFound(path + ": cannot read the training spec");
  } catch (const YAML::Exception& e) {
    return InvalidArgument(path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (!root.IsMap()) return InvalidArgument(path + ": a mapping of fields is needed");
  static const std::set<std::string> kFields = {
      "model",     "repository", "feedback", "labels",          "label",   "input", "window",
      "unlabeled", "holdout",    "metric",   "min_improvement", "xgboost", "torch"};
  for (const auto& kv : root) {
    if (!kFields.count(kv.first.Scalar())) {
      return c.Error(kv.first, kv.first.Scalar(),
                     "unknown field (expected model, repository, feedback, labels, label, input, "
                     "window, unlabeled, holdout, metric, min_improvement, xgboost, torch)");
    }
  }
  TrainingSpec s;
  ASSIGN_OR_RETURN(s.model, Str(c, root, "model", true));
  ASSIGN_OR_RETURN(s.repository, Str(c, root, "repository", true));
  ASSIGN_OR_RETURN(s.feedback, Str(c, root, "feedback", true));
  ASSIGN_OR_RETURN(s.labels, Str(c, root, "labels", true));
  ASSIGN_OR_RETURN(s.input, Str(c, root, "input", true));
  ASSIGN_OR_RETURN(std::string label, Str(c, root, "label", false));
  if (!label.empty()) s.label = label;
  ASSIGN_OR_RETURN(s.window_ms, DurationMs(c, root, "window", s.window_ms, false));
  if (const YAML::Node h = root["holdout"];
      h.IsDefined() && h.IsScalar() && !h.Scalar().empty() && h.Scalar().back() == '%') {
    const std::string share = h.Scalar().substr(0, h.Scalar().size() - 1);
    try {
      size_t end = 0;
      s.holdout_fraction = std::stod(share, &end) / 100;
      if (end != share.size()) s.holdout_fraction = -1;
    } catch (const std::exception&) {
      s.holdout_fraction = -1;
    }
    if (!(s.holdout_fraction > 0 && s.holdout_fraction < 1)) {
      return c.Error(h, "holdout", "a share from 0% to 100% (exclusive), such as 25%");
    }
  } else {
    ASSIGN_OR_RETURN(s.holdout_ms, DurationMs(c, root, "holdout", 0, true));
  }
  if (root["unlabeled"].IsDefined()) {
    s.has_unlabeled = true;
    ASSIGN_OR_RETURN(s.unlabeled, Number(c, root["unlabeled"], "unlabeled"));
  }
  ASSIGN_OR_RETURN(std::string metric, Str(c, root, "metric", false));
  if (!metric.empty()) s.metric = metric;
  if (s.metric != "auc" && s.metric != "logloss" && s.metric != "accuracy") {
    return c.Error(root["metric"], "metric", "auc, logloss or accuracy");
  }
  if (root["min_improvement"].IsDefined()) {
    ASSIGN_OR_RETURN(s.min_improvement, Number(c, root["min_improvement"], "min_improvement"));
    if (s.min_improvement < 0) {
      return c.Error(root["min_improvement"], "min_improvement", "0 or more");
    }
  }
  RETURN_IF_ERROR(ParseXgboost(c, root["xgboost"], &s));
  RETURN_IF_ERROR(ParseTorch(c, root["torch"], &s));
  s.repository = Absolute(path, s.repository);
  s.feedback = Absolute(path, s.feedback);
  s.labels = Absolute(path, s.labels);
  std::error_code ec;
  for (const auto& [field, dir] : {std::pair<std::string, std::string>{"feedback", s.feedback},
                                   {"labels", s.labels},
                                   {"model", s.repository + "/" + s.model}}) {
    if (!fs::is_directory(dir, ec)) {
      return NotFound(path + ": " + field + ": no directory " + dir);
    }
  }
  return s;
}

}  // namespace dais::learn
