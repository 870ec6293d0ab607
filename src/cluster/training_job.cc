#include "cluster/training_job.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <regex>

#include "cluster/spec_yaml.h"
#include "common/duration.h"
#include "common/json.h"

namespace dais::cluster {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void Str(Writer& w, const std::string& s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

// A duration field ("30m", or a number of seconds) in milliseconds.
Status GetDuration(const YAML::Node& map, const std::string& key, const std::string& at,
                   int64_t* out_ms) {
  const YAML::Node v = map[key];
  if (!v) return OkStatus();
  if (!v.IsScalar()) return InvalidArgument(at + key + ": expected a duration such as 30s or 10m");
  auto us = ParseDurationUs(v.Scalar());
  if (!us.ok()) return InvalidArgument(at + key + ": " + us.status().message());
  *out_ms = *us / 1000;
  return OkStatus();
}

// "1%" or 0.01.
Status GetRate(const YAML::Node& map, const std::string& key, const std::string& at, double* out) {
  const YAML::Node v = map[key];
  if (!v) return OkStatus();
  std::string s = v.IsScalar() ? v.Scalar() : "";
  const bool percent = !s.empty() && s.back() == '%';
  if (percent) s.pop_back();
  try {
    size_t end = 0;
    const double x = std::stod(s, &end);
    if (end != s.size()) throw std::invalid_argument(s);
    *out = percent ? x / 100 : x;
  } catch (const std::exception&) {
    return InvalidArgument(at + key + ": expected a share such as 1% or 0.01");
  }
  return OkStatus();
}

Status ParseSchedule(const YAML::Node& s, TrainingJobSpec* j) {
  if (!s.IsMap()) return InvalidArgument("schedule: expected a mapping");
  RETURN_IF_ERROR(Unknown(s, {"every", "after_labels", "label_stream"}, "schedule."));
  RETURN_IF_ERROR(GetDuration(s, "every", "schedule.", &j->every_ms));
  RETURN_IF_ERROR(Get(s, "after_labels", "schedule.", &j->after_labels));
  RETURN_IF_ERROR(Get(s, "label_stream", "schedule.", &j->label_stream));
  return OkStatus();
}

Status ParseRelease(const YAML::Node& r, TrainingRelease* rel) {
  if (!r.IsMap()) return InvalidArgument("release: expected a mapping");
  RETURN_IF_ERROR(Unknown(
      r,
      {"strategy", "route", "deployment", "steps", "interval", "max_error_rate", "max_p99_ms",
       "max_psi", "min_requests", "accuracy_label", "min_accuracy_delta", "ready_timeout"},
      "release."));
  RETURN_IF_ERROR(Get(r, "strategy", "release.", &rel->strategy));
  RETURN_IF_ERROR(Get(r, "route", "release.", &rel->route));
  RETURN_IF_ERROR(Get(r, "deployment", "release.", &rel->deployment));
  RETURN_IF_ERROR(Get(r, "steps", "release.", &rel->steps));
  RETURN_IF_ERROR(GetDuration(r, "interval", "release.", &rel->interval_ms));
  RETURN_IF_ERROR(GetRate(r, "max_error_rate", "release.", &rel->max_error_rate));
  RETURN_IF_ERROR(Get(r, "max_p99_ms", "release.", &rel->max_p99_ms));
  RETURN_IF_ERROR(Get(r, "max_psi", "release.", &rel->max_psi));
  RETURN_IF_ERROR(Get(r, "min_requests", "release.", &rel->min_requests));
  RETURN_IF_ERROR(Get(r, "accuracy_label", "release.", &rel->accuracy_label));
  RETURN_IF_ERROR(Get(r, "min_accuracy_delta", "release.", &rel->min_accuracy_delta));
  RETURN_IF_ERROR(GetDuration(r, "ready_timeout", "release.", &rel->ready_timeout_ms));
  return OkStatus();
}

Status ValidateRelease(const TrainingRelease& r) {
  if (r.strategy != "canary" && r.strategy != "manual") {
    return InvalidArgument("release.strategy: '" + r.strategy + "' is not canary or manual");
  }
  if (r.strategy == "manual") return OkStatus();
  if (r.route.empty()) return InvalidArgument("release.route: required with strategy canary");
  if (r.deployment.empty()) {
    return InvalidArgument(
        "release.deployment: required with strategy canary (the deployment whose resources the "
        "new version's deployment copies)");
  }
  if (r.steps.empty() || r.steps.back() != 100) {
    return InvalidArgument("release.steps: must end at 100");
  }
  for (size_t i = 0; i < r.steps.size(); ++i) {
    if (r.steps[i] <= 0 || r.steps[i] > 100 || (i > 0 && r.steps[i] <= r.steps[i - 1])) {
      return InvalidArgument("release.steps: must increase, each from 1 to 100");
    }
  }
  if (r.interval_ms <= 0) return InvalidArgument("release.interval: must be positive");
  if (!(r.max_error_rate >= 0 && r.max_error_rate <= 1)) {
    return InvalidArgument("release.max_error_rate: 0% to 100%");
  }
  if (!(r.max_p99_ms >= 0)) return InvalidArgument("release.max_p99_ms: must not be negative");
  if (!(r.max_psi >= 0)) return InvalidArgument("release.max_psi: must not be negative");
  if (r.min_requests < 1) return InvalidArgument("release.min_requests: at least 1");
  if (!(r.min_accuracy_delta >= -1 && r.min_accuracy_delta <= 1)) {
    return InvalidArgument("release.min_accuracy_delta: -1 to 1");
  }
  if (r.ready_timeout_ms <= 0) return InvalidArgument("release.ready_timeout: must be positive");
  return OkStatus();
}

Status Validate(const TrainingJobSpec& j) {
  static const std::regex kName("[a-z0-9]([a-z0-9_.-]{0,61}[a-z0-9])?");
  if (!std::regex_match(j.name, kName)) {
    return InvalidArgument("name: '" + j.name +
                           "' must be 1-63 of [a-z0-9_.-], starting and ending with a letter or "
                           "digit");
  }
  if (j.config.empty()) return InvalidArgument("config: required (the path of a training.yaml)");
  if (j.every_ms <= 0 && j.after_labels <= 0) {
    return InvalidArgument("schedule: give every (a duration) and/or after_labels (a count)");
  }
  if (j.after_labels < 0) return InvalidArgument("schedule.after_labels: must not be negative");
  if (j.after_labels > 0 && j.label_stream.rfind("redis://", 0) != 0 &&
      j.label_stream.rfind("rediss://", 0) != 0) {
    return InvalidArgument(
        "schedule.label_stream: after_labels needs the label stream, redis://HOST:PORT/STREAM");
  }
  if (j.cpu_milli < 0 || j.memory_mib < 0) {
    return InvalidArgument("resources: cpu_milli and memory_mib must not be negative");
  }
  if (j.gpus < 0 || j.gpus > 16) return InvalidArgument("resources.gpus: 0 to 16 whole GPUs");
  return ValidateRelease(j.release);
}

}  // namespace

DeploymentSpec TrainingJobSpec::AsDeployment() const {
  DeploymentSpec d;
  d.name = kTrainingTaskPrefix + name;
  d.model = d.name;
  d.replicas = 1;
  d.cpu_milli = cpu_milli;
  d.memory_mib = memory_mib;
  d.gpus = gpus;
  d.node_labels = node_labels;
  d.priority = "best-effort";
  return d;
}

StatusOr<TrainingJobSpec> ParseTrainingJobYaml(const std::string& yaml) {
  ASSIGN_OR_RETURN(const YAML::Node root, LoadYamlMap(yaml, "training spec"));
  RETURN_IF_ERROR(Unknown(
      root, {"kind", "name", "config", "schedule", "resources", "constraints", "release"}, ""));
  TrainingJobSpec j;
  RETURN_IF_ERROR(Get(root, "name", "", &j.name));
  RETURN_IF_ERROR(Get(root, "config", "", &j.config));
  if (const YAML::Node s = root["schedule"]; s) RETURN_IF_ERROR(ParseSchedule(s, &j));
  if (const YAML::Node r = root["resources"]; r) {
    if (!r.IsMap()) return InvalidArgument("resources: expected a mapping");
    RETURN_IF_ERROR(Unknown(r, {"cpu_milli", "memory_mib", "gpus"}, "resources."));
    RETURN_IF_ERROR(Get(r, "cpu_milli", "resources.", &j.cpu_milli));
    RETURN_IF_ERROR(Get(r, "memory_mib", "resources.", &j.memory_mib));
    RETURN_IF_ERROR(Get(r, "gpus", "resources.", &j.gpus));
  }
  if (const YAML::Node c = root["constraints"]; c) {
    if (!c.IsMap()) return InvalidArgument("constraints: expected a mapping");
    RETURN_IF_ERROR(Unknown(c, {"node_labels"}, "constraints."));
    RETURN_IF_ERROR(Get(c, "node_labels", "constraints.", &j.node_labels));
  }
  if (const YAML::Node r = root["release"]; r) RETURN_IF_ERROR(ParseRelease(r, &j.release));
  RETURN_IF_ERROR(Validate(j));
  return j;
}

StatusOr<TrainingRelease> ParseTrainingReleaseYaml(const std::string& yaml) {
  ASSIGN_OR_RETURN(const YAML::Node root, LoadYamlMap(yaml, "release"));
  TrainingRelease r;
  RETURN_IF_ERROR(ParseRelease(root, &r));
  RETURN_IF_ERROR(ValidateRelease(r));
  return r;
}

std::string TrainingJobToJson(const TrainingJobSpec& j) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("kind");
  w.String("training");
  w.Key("name");
  Str(w, j.name);
  w.Key("config");
  Str(w, j.config);
  w.Key("schedule");
  w.StartObject();
  w.Key("every");
  Str(w, std::to_string(j.every_ms) + "ms");
  w.Key("after_labels");
  w.Int64(j.after_labels);
  w.Key("label_stream");
  Str(w, j.label_stream);
  w.EndObject();
  w.Key("resources");
  w.StartObject();
  w.Key("cpu_milli");
  w.Int64(j.cpu_milli);
  w.Key("memory_mib");
  w.Int64(j.memory_mib);
  w.Key("gpus");
  w.Int(j.gpus);
  w.EndObject();
  w.Key("constraints");
  w.StartObject();
  w.Key("node_labels");
  w.StartObject();
  for (const auto& [k, v] : j.node_labels) {
    Str(w, k);
    Str(w, v);
  }
  w.EndObject();
  w.EndObject();
  const TrainingRelease& r = j.release;
  w.Key("release");
  w.StartObject();
  w.Key("strategy");
  Str(w, r.strategy);
  w.Key("route");
  Str(w, r.route);
  w.Key("deployment");
  Str(w, r.deployment);
  w.Key("steps");
  w.StartArray();
  for (int s : r.steps) w.Int(s);
  w.EndArray();
  w.Key("interval");
  Str(w, std::to_string(r.interval_ms) + "ms");
  w.Key("max_error_rate");
  w.Double(r.max_error_rate);
  w.Key("max_p99_ms");
  w.Double(r.max_p99_ms);
  w.Key("max_psi");
  w.Double(r.max_psi);
  w.Key("min_requests");
  w.Int64(r.min_requests);
  w.Key("accuracy_label");
  Str(w, r.accuracy_label);
  w.Key("min_accuracy_delta");
  w.Double(r.min_accuracy_delta);
  w.Key("ready_timeout");
  Str(w, std::to_string(r.ready_timeout_ms) + "ms");
  w.EndObject();
  w.EndObject();
  return sb.GetString();
}

std::string TrainingRunStateToJson(const TrainingRunState& s) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("runs");
  w.Int64(s.runs);
  w.Key("last_start_ms");
  w.Int64(s.last_start_ms);
  w.Key("last_end_ms");
  w.Int64(s.last_end_ms);
  w.Key("last_exit");
  w.Int(s.last_exit);
  w.Key("last_result");
  Str(w, s.last_result);
  w.Key("labels_seen");
  w.Int64(s.labels_seen);
  w.Key("published");
  w.Int64(s.published);
  w.Key("release_pending");
  w.Int64(s.release_pending);
  w.Key("node");
  Str(w, s.node);
  w.EndObject();
  return sb.GetString();
}

StatusOr<TrainingRunState> TrainingRunStateFromJson(const std::string& json) {
  rapidjson::Document d;
  RETURN_IF_ERROR(json::ParseJson(json, &d));
  if (!d.IsObject()) return InvalidArgument("training run state: not a JSON object");
  TrainingRunState s;
  auto i64 = [&d](const char* k, int64_t* out) {
    if (d.HasMember(k) && d[k].IsInt64()) *out = d[k].GetInt64();
  };
  i64("runs", &s.runs);
  i64("last_start_ms", &s.last_start_ms);
  i64("last_end_ms", &s.last_end_ms);
  i64("labels_seen", &s.labels_seen);
  i64("published", &s.published);
  i64("release_pending", &s.release_pending);
  if (d.HasMember("last_exit") && d["last_exit"].IsInt()) s.last_exit = d["last_exit"].GetInt();
  if (d.HasMember("last_result") && d["last_result"].IsString()) {
    s.last_result = d["last_result"].GetString();
  }
  if (d.HasMember("node") && d["node"].IsString()) s.node = d["node"].GetString();
  return s;
}

}  // namespace dais::cluster
