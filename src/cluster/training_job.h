// A training job: `dais train` run on a schedule by a node the scheduler chose, its published
// versions released by canary or by hand. Written by `dais ctl apply -f` ('kind: training') to
// /dais/trainings/<name> (JSON); the scheduler places it like a one-replica best-effort
// deployment named "training:<name>" (serving deployments may preempt it), and the node it lands
// on runs it (cmd/training_runner.h). docs/learning-loop.md documents every field.
//
//   kind: training
//   name: fraud-retrain
//   config: /srv/dais/fraud-training.yaml   # dais train's spec; a path every eligible node reads
//   schedule:
//     every: 30m                  # a run when the last one ended this long ago, and/or
//     after_labels: 500           # a run when this many labels arrived since the last one
//     label_stream: redis://127.0.0.1:6379/labels   # where they arrive (with after_labels)
//   resources: {cpu_milli: 2000, memory_mib: 2048, gpus: 0}
//   constraints: {node_labels: {pool: batch}}
//   release:
//     strategy: canary            # or manual: the version is published, nothing else
//     route: fraud                # the route whose traffic moves to the new version
//     deployment: fraud-v1        # the new version's deployment copies this one's resources
//     steps: [10, 50, 100]
//     interval: 1m
//     max_error_rate: 1%
//     max_p99_ms: 150
//     max_psi: 0.25
//     min_requests: 20
//     accuracy_label: fraud       # live accuracy on the labels of the canary's answers
//     min_accuracy_delta: 0       # ... at least the stable version's
//     ready_timeout: 10m          # the new deployment's instances must be READY within this
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cluster/deployment.h"
#include "dais/status.h"

namespace dais::cluster {

inline constexpr const char* kTrainingsPrefix = "/dais/trainings/";
// The runs of a job (JSON, TrainingRunState): written by the node that runs it, read by the next
// one (a re-placed job keeps its schedule) and by `dais ctl get trainings`.
inline constexpr const char* kTrainingRunsPrefix = "/dais/training-runs/";
// The deployment, assignment key and instance name of a job: "training:<name>" (':' is in no
// deployment or model name, so they cannot collide).
inline constexpr const char* kTrainingTaskPrefix = "training:";

struct TrainingRelease {
  std::string strategy = "manual";  // or "canary"
  std::string route;
  std::string deployment;
  std::vector<int> steps = {10, 50, 100};
  int64_t interval_ms = 60000;
  double max_error_rate = 0.01;
  double max_p99_ms = 0;
  double max_psi = 0;
  int64_t min_requests = 20;
  std::string accuracy_label;  // empty: not compared
  double min_accuracy_delta = 0;
  int64_t ready_timeout_ms = 600000;
};

struct TrainingJobSpec {
  std::string name;
  std::string config;
  int64_t every_ms = 0;      // 0: no timer
  int64_t after_labels = 0;  // 0: no label count
  std::string label_stream;  // redis://HOST:PORT/STREAM, with after_labels
  int64_t cpu_milli = 1000;
  int64_t memory_mib = 1024;
  int gpus = 0;
  std::map<std::string, std::string> node_labels;
  TrainingRelease release;

  // The one-replica best-effort deployment the scheduler places.
  DeploymentSpec AsDeployment() const;
};

// Parses and validates a YAML spec (JSON is YAML, so this reads what TrainingJobToJson wrote
// too): unknown fields, wrong types and impossible values are InvalidArgument naming the field
// ("schedule.after_labels: needs schedule.label_stream").
StatusOr<TrainingJobSpec> ParseTrainingJobYaml(const std::string& yaml);
std::string TrainingJobToJson(const TrainingJobSpec& job);
// A release mapping alone (what a federation's spec holds: fed/federation_spec.h), validated.
StatusOr<TrainingRelease> ParseTrainingReleaseYaml(const std::string& yaml);

// What the runs of a job have been (kTrainingRunsPrefix).
struct TrainingRunState {
  int64_t runs = 0;
  int64_t last_start_ms = 0;  // Unix time; 0: never ran
  int64_t last_end_ms = 0;
  int last_exit = -1;           // dais train's exit status (0 published, 3 not better, ...)
  std::string last_result;      // one line for people
  int64_t labels_seen = -1;     // the label stream's entries-added when the last run started
  int64_t published = 0;        // the last version a run published (0: none)
  int64_t release_pending = 0;  // a published version whose release has not been started yet
  std::string node;             // where the last run ran
};

std::string TrainingRunStateToJson(const TrainingRunState& s);
StatusOr<TrainingRunState> TrainingRunStateFromJson(const std::string& json);

}  // namespace dais::cluster
