// A job the scheduler assigns to a node that is not a model to load: today a training job
// (training_job.h, run by cmd/training_runner.h). The node agent creates one per assignment that
// carries a job spec, destroys it when the assignment goes or changes, and publishes its state as
// the instance /dais/instances/<node>/<name>.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cluster/assignment.h"
#include "dais/status.h"

namespace dais::cluster {

class AssignedJob {
 public:
  // Stops the job (and waits for what it started).
  virtual ~AssignedJob() = default;
  struct State {
    std::string state;   // RUNNING (waiting for its schedule or running) or FAILED
    std::string reason;  // for people: "run 3 running since ...", "next run in 12 min"
  };
  // Thread-safe.
  virtual State Current() const = 0;
};

// Creates the job of an assignment; `changed` is called (from any thread) when its State
// changes, so that it is published soon. InvalidArgument when the spec is unusable here.
using JobFactory = std::function<StatusOr<std::unique_ptr<AssignedJob>>(
    const Assignment& assignment, std::function<void()> changed)>;

}  // namespace dais::cluster
