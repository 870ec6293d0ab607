#include "cmd/ctl_training.h"

#include <fmt/format.h>
#include <rapidjson/document.h>

#include <map>

#include "cluster/events.h"
#include "cluster/keys.h"
#include "cluster/training_job.h"
#include "common/json.h"

namespace dais::cmd {
namespace {

struct JobView {
  std::string spec_json, node, state = "PENDING", reason, runs_json;
  cluster::TrainingJobSpec spec;
  cluster::TrainingRunState runs;
};

std::string Field(const std::string& json, const char* key) {
  rapidjson::Document d;
  if (!json::ParseJson(json, &d).ok() || !d.IsObject() || !d.HasMember(key) || !d[key].IsString()) {
    return "";
  }
  return d[key].GetString();
}

// "training:<job>" of a key "<prefix><node>/training:<job>" -> {node, job}.
bool SplitTaskKey(const std::string& key, const std::string& prefix, std::string* node,
                  std::string* job) {
  const std::string rest = key.substr(prefix.size());
  const size_t slash = rest.find('/');
  const std::string task = cluster::kTrainingTaskPrefix;
  if (slash == std::string::npos || rest.compare(slash + 1, task.size(), task) != 0) return false;
  *node = rest.substr(0, slash);
  *job = rest.substr(slash + 1 + task.size());
  return true;
}

StatusOr<std::map<std::string, JobView>> Gather(etcd::Client& c) {
  std::map<std::string, JobView> jobs;
  ASSIGN_OR_RETURN(etcd::RangeResult specs, c.Get(cluster::kTrainingsPrefix, true));
  for (const auto& kv : specs.kvs) {
    auto spec = cluster::ParseTrainingJobYaml(kv.value);
    if (!spec.ok()) continue;
    JobView& v = jobs[spec->name];
    v.spec = *spec;
    v.spec_json = kv.value;
  }
  ASSIGN_OR_RETURN(etcd::RangeResult assigned, c.Get(cluster::kAssignmentsPrefix, true));
  for (const auto& kv : assigned.kvs) {
    std::string node, job;
    if (SplitTaskKey(kv.key, cluster::kAssignmentsPrefix, &node, &job) && jobs.count(job)) {
      jobs[job].node = node;
      jobs[job].state = "ASSIGNED";
    }
  }
  ASSIGN_OR_RETURN(etcd::RangeResult instances, c.Get(cluster::kInstancesPrefix, true));
  for (const auto& kv : instances.kvs) {
    std::string node, job;
    if (SplitTaskKey(kv.key, cluster::kInstancesPrefix, &node, &job) && jobs.count(job) &&
        jobs[job].node == node) {
      jobs[job].state = Field(kv.value, "state");
      jobs[job].reason = Field(kv.value, "reason");
    }
  }
  ASSIGN_OR_RETURN(etcd::RangeResult runs, c.Get(cluster::kTrainingRunsPrefix, true));
  for (const auto& kv : runs.kvs) {
    const std::string job = kv.key.substr(std::string(cluster::kTrainingRunsPrefix).size());
    auto s = cluster::TrainingRunStateFromJson(kv.value);
    if (!jobs.count(job) || !s.ok()) continue;
    jobs[job].runs = *s;
    jobs[job].runs_json = kv.value;
  }
  return jobs;
}

std::string Schedule(const cluster::TrainingJobSpec& s) {
  std::string out;
  if (s.every_ms > 0) out = fmt::format("every {:g} s", s.every_ms / 1000.0);
  if (s.after_labels > 0) {
    out += (out.empty() ? "" : " or ") + fmt::format("after {} labels", s.after_labels);
  }
  return out;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(ch));
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

}  // namespace

StatusOr<std::vector<std::vector<std::string>>> TrainingRows(etcd::Client& c) {
  ASSIGN_OR_RETURN(auto jobs, Gather(c));
  std::vector<std::vector<std::string>> rows = {{"TRAINING", "SCHEDULE", "NODE", "STATE", "RUNS",
                                                 "LAST RUN (UTC)", "LAST RESULT", "RELEASE"}};
  for (const auto& [name, v] : jobs) {
    const std::string release = v.spec.release.strategy == "canary"
                                    ? "canary " + v.spec.release.route
                                    : v.spec.release.strategy;
    rows.push_back({name, Schedule(v.spec), v.node.empty() ? "-" : v.node,
                    v.reason.empty() ? v.state : v.state + " (" + v.reason + ")",
                    std::to_string(v.runs.runs),
                    v.runs.last_start_ms > 0 ? cluster::FormatTimeMs(v.runs.last_start_ms) : "-",
                    v.runs.last_result.empty() ? "-" : v.runs.last_result, release});
  }
  return rows;
}

StatusOr<std::string> TrainingJson(etcd::Client& c) {
  ASSIGN_OR_RETURN(auto jobs, Gather(c));
  std::string out = "[";
  for (const auto& [name, v] : jobs) {
    out +=
        fmt::format(R"({}{{"job":{},"node":{},"state":{},"reason":{},"runs":{}}})",
                    out.size() > 1 ? "," : "", v.spec_json, JsonString(v.node), JsonString(v.state),
                    JsonString(v.reason), v.runs_json.empty() ? "null" : v.runs_json);
  }
  return out + "]";
}

}  // namespace dais::cmd
