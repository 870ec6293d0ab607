#include "fed/federation_spec.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/duration.h"

namespace dais::fed {
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

 private:
  std::string file_;
};

Status CheckKeys(const Ctx& c, const YAML::Node& map, const std::string& prefix,
                 const std::set<std::string>& known) {
  for (const auto& kv : map) {
    const std::string key = kv.first.Scalar();
    if (known.count(key) == 0) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      return c.Error(kv.first, prefix + key, "unknown field (expected one of " + list + ")");
    }
  }
  return OkStatus();
}

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

// A number in [lo, hi] (an integer when `integer`), or `fallback` when absent.
StatusOr<double> Num(const Ctx& c, const YAML::Node& root, const std::string& key,
                     const std::string& field, double fallback, double lo, double hi,
                     bool integer) {
  const YAML::Node n = root[key];
  if (!n.IsDefined()) return fallback;
  double v = std::nan("");
  try {
    v = n.as<double>();
  } catch (const YAML::Exception&) {
  }
  if (!(v >= lo && v <= hi) || (integer && v != std::floor(v))) {
    return c.Error(n, field,
                   (integer ? "an integer from " : "a number from ") + std::to_string(lo) + " to " +
                       std::to_string(hi) + " is needed");
  }
  return v;
}

StatusOr<bool> Bool(const Ctx& c, const YAML::Node& root, const std::string& field) {
  const YAML::Node n = root[field];
  if (!n.IsDefined()) return false;
  try {
    return n.as<bool>();
  } catch (const YAML::Exception&) {
    return c.Error(n, field, "true or false is needed");
  }
}

std::string Absolute(const std::string& file, const std::string& path) {
  fs::path p(path);
  if (p.is_relative()) {
    std::error_code ec;
    const fs::path dir = fs::path(file).parent_path();
    p = (dir.empty() ? fs::current_path(ec) : fs::absolute(dir, ec)) / p;
  }
  return p.lexically_normal().string();
}

bool ValidName(const std::string& s) {
  if (s.empty() || s.size() > 128) return false;
  for (char ch : s) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.') {
      return false;
    }
  }
  return s != "." && s != "..";
}

Status ParseLocal(const Ctx& c, const YAML::Node& l, FederationSpec* s) {
  if (!l.IsDefined()) return OkStatus();
  if (!l.IsMap()) return c.Error(l, "local", "a mapping is needed");
  RETURN_IF_ERROR(CheckKeys(c, l, "local.", {"epochs", "learning_rate", "batch_size"}));
  ASSIGN_OR_RETURN(double e, Num(c, l, "epochs", "local.epochs", s->local_epochs, 1, 1000, true));
  ASSIGN_OR_RETURN(s->learning_rate, Num(c, l, "learning_rate", "local.learning_rate",
                                         s->learning_rate, 1e-9, 100, false));
  ASSIGN_OR_RETURN(double b,
                   Num(c, l, "batch_size", "local.batch_size", s->batch_size, 1, 1 << 20, true));
  s->local_epochs = static_cast<int>(e);
  s->batch_size = static_cast<int>(b);
  return OkStatus();
}

Status ParsePrivacy(const Ctx& c, const YAML::Node& p, FederationSpec* s) {
  if (!p.IsDefined()) return OkStatus();
  if (!p.IsMap()) return c.Error(p, "privacy", "a mapping is needed");
  RETURN_IF_ERROR(CheckKeys(c, p, "privacy.", {"clip_norm", "noise_multiplier", "delta"}));
  if (!p["clip_norm"].IsDefined() || !p["noise_multiplier"].IsDefined()) {
    return c.Error(p, "privacy", "clip_norm and noise_multiplier are both needed");
  }
  s->privacy = true;
  ASSIGN_OR_RETURN(s->clip_norm, Num(c, p, "clip_norm", "privacy.clip_norm", 0, 1e-9, 1e9, false));
  ASSIGN_OR_RETURN(s->noise_multiplier,
                   Num(c, p, "noise_multiplier", "privacy.noise_multiplier", 0, 0, 1e6, false));
  ASSIGN_OR_RETURN(s->delta, Num(c, p, "delta", "privacy.delta", s->delta, 1e-12, 0.5, false));
  return OkStatus();
}

Status ParseRounds(const Ctx& c, const YAML::Node& root, FederationSpec* s) {
  ASSIGN_OR_RETURN(double v, Num(c, root, "start_version", "start_version", 0, 1, 1e15, true));
  s->start_version = static_cast<int64_t>(v);
  ASSIGN_OR_RETURN(v, Num(c, root, "rounds", "rounds", s->rounds, 1, 100000, true));
  s->rounds = static_cast<int>(v);
  ASSIGN_OR_RETURN(v, Num(c, root, "clients_per_round", "clients_per_round", s->clients_per_round,
                          1, 2048, true));
  s->clients_per_round = static_cast<int>(v);
  ASSIGN_OR_RETURN(v, Num(c, root, "min_clients", "min_clients",
                          std::min(s->min_clients, s->clients_per_round), 1, 2048, true));
  s->min_clients = static_cast<int>(v);
  if (s->min_clients > s->clients_per_round) {
    return c.Error(root["min_clients"], "min_clients", "must not exceed clients_per_round");
  }
  if (const YAML::Node d = root["round_deadline"]; d.IsDefined()) {
    auto us = d.IsScalar() ? ParseDurationUs(d.Scalar()) : InvalidArgument("");
    if (!us.ok() || *us < 100000) {
      return c.Error(d, "round_deadline", "a duration of 100ms or more (such as 30s)");
    }
    s->round_deadline_ms = *us / 1000;
  }
  if (const YAML::Node d = root["wait_for_trainers"]; d.IsDefined()) {
    auto us = d.IsScalar() ? ParseDurationUs(d.Scalar()) : InvalidArgument("");
    if (!us.ok() || *us < 0 || *us > int64_t{86400} * 1000000) {
      return c.Error(d, "wait_for_trainers", "a duration up to a day (such as 2s)");
    }
    s->wait_for_trainers_ms = *us / 1000;
  }
  return OkStatus();
}

Status ParseRoot(const Ctx& c, const YAML::Node& root, const std::string& path, FederationSpec* s) {
  RETURN_IF_ERROR(CheckKeys(
      c, root, "",
      {"kind", "name", "model", "repository", "start_version", "rounds", "clients_per_round",
       "min_clients", "round_deadline", "wait_for_trainers", "aggregation", "proximal_mu", "local",
       "max_update_norm", "secure_aggregation", "privacy", "holdout", "publish", "release"}));
  ASSIGN_OR_RETURN(std::string kind, Str(c, root, "kind", false));
  if (!kind.empty() && kind != "federation") {
    return c.Error(root["kind"], "kind", "'" + kind + "' is not federation");
  }
  ASSIGN_OR_RETURN(s->name, Str(c, root, "name", true));
  if (!ValidName(s->name)) {
    return c.Error(root["name"], "name", "letters, digits, '-', '_' and '.' (1 to 128)");
  }
  ASSIGN_OR_RETURN(s->model, Str(c, root, "model", true));
  if (!ValidName(s->model)) return c.Error(root["model"], "model", "not a model folder's name");
  ASSIGN_OR_RETURN(std::string repo, Str(c, root, "repository", true));
  s->repository = Absolute(path, repo);
  RETURN_IF_ERROR(ParseRounds(c, root, s));
  ASSIGN_OR_RETURN(std::string agg, Str(c, root, "aggregation", false));
  if (!agg.empty() && agg != "fedavg" && agg != "fedprox") {
    return c.Error(root["aggregation"], "aggregation", "'" + agg + "' is not fedavg or fedprox");
  }
  s->fedprox = agg == "fedprox";
  ASSIGN_OR_RETURN(s->proximal_mu, Num(c, root, "proximal_mu", "proximal_mu", s->fedprox ? 0.01 : 0,
                                       0, 1e6, false));
  if (!s->fedprox && s->proximal_mu > 0) {
    return c.Error(root["proximal_mu"], "proximal_mu", "needs aggregation: fedprox");
  }
  RETURN_IF_ERROR(ParseLocal(c, root["local"], s));
  ASSIGN_OR_RETURN(s->max_update_norm,
                   Num(c, root, "max_update_norm", "max_update_norm", 0, 0, 1e12, false));
  ASSIGN_OR_RETURN(s->secure, Bool(c, root, "secure_aggregation"));
  if (s->secure && s->min_clients < 2) {
    // A round of one survivor would reveal its update: the mask with a dropped peer is all it has.
    return c.Error(root["min_clients"], "min_clients",
                   "at least 2 with secure_aggregation (one survivor's update would be revealed)");
  }
  RETURN_IF_ERROR(ParsePrivacy(c, root["privacy"], s));
  if (s->secure && !s->privacy && s->max_update_norm <= 0) {
    // Masked updates cannot be checked one by one: the bound on their mean is what is left.
    return c.Error(root["secure_aggregation"], "secure_aggregation",
                   "needs max_update_norm (or privacy.clip_norm): masked updates cannot be checked "
                   "one by one, their mean is checked against the bound");
  }
  ASSIGN_OR_RETURN(std::string holdout, Str(c, root, "holdout", false));
  if (!holdout.empty()) s->holdout = Absolute(path, holdout);
  ASSIGN_OR_RETURN(std::string publish, Str(c, root, "publish", false));
  if (!publish.empty() && publish != "final" && publish != "every_round") {
    return c.Error(root["publish"], "publish", "'" + publish + "' is not final or every_round");
  }
  s->publish_every_round = publish == "every_round";
  if (const YAML::Node r = root["release"]; r.IsDefined()) {
    YAML::Emitter out;
    out << r;
    s->release_yaml = out.c_str();
  }
  return OkStatus();
}

}  // namespace

StatusOr<FederationSpec> ParseFederationSpec(const std::string& yaml, const std::string& path,
                                             bool check_files) {
  const Ctx c(path);
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(path + ": not YAML: " + e.what());
  }
  if (!root.IsMap()) return InvalidArgument(path + ": a mapping is needed");
  FederationSpec s;
  RETURN_IF_ERROR(ParseRoot(c, root, path, &s));
  if (!check_files) return s;
  if (!fs::is_directory(s.ModelDir())) {
    return NotFound(path + ": model: no folder " + s.ModelDir());
  }
  if (!s.holdout.empty() && !fs::is_directory(s.holdout)) {
    return NotFound(path + ": holdout: no folder " + s.holdout);
  }
  return s;
}

std::string FederationSpecToYaml(const FederationSpec& s) {
  YAML::Emitter out;
  out << YAML::Flow << YAML::BeginMap;  // one line, as the control plane's other records
  auto kv = [&out](const char* k, const auto& v) { out << YAML::Key << k << YAML::Value << v; };
  kv("kind", "federation");
  kv("name", s.name);
  kv("model", s.model);
  kv("repository", s.repository);
  if (s.start_version > 0) kv("start_version", s.start_version);
  kv("rounds", s.rounds);
  kv("clients_per_round", s.clients_per_round);
  kv("min_clients", s.min_clients);
  kv("round_deadline", std::to_string(s.round_deadline_ms) + "ms");
  if (s.wait_for_trainers_ms > 0)
    kv("wait_for_trainers", std::to_string(s.wait_for_trainers_ms) + "ms");
  kv("aggregation", s.fedprox ? "fedprox" : "fedavg");
  if (s.fedprox) kv("proximal_mu", s.proximal_mu);
  out << YAML::Key << "local" << YAML::Value << YAML::BeginMap;
  kv("epochs", s.local_epochs);
  kv("learning_rate", s.learning_rate);
  kv("batch_size", s.batch_size);
  out << YAML::EndMap;
  kv("max_update_norm", s.max_update_norm);
  kv("secure_aggregation", s.secure);
  if (s.privacy) {
    out << YAML::Key << "privacy" << YAML::Value << YAML::BeginMap;
    kv("clip_norm", s.clip_norm);
    kv("noise_multiplier", s.noise_multiplier);
    kv("delta", s.delta);
    out << YAML::EndMap;
  }
  if (!s.holdout.empty()) kv("holdout", s.holdout);
  kv("publish", s.publish_every_round ? "every_round" : "final");
  if (!s.release_yaml.empty()) kv("release", YAML::Load(s.release_yaml));
  out << YAML::EndMap;
  return out.c_str();
}

StatusOr<FederationSpec> LoadFederationSpec(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return ParseFederationSpec(text.str(), path);
}

}  // namespace dais::fed
