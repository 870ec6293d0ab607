// `dais ctl get trainings`: each training job with where it runs, its state and its runs
// (cluster/training_job.h), gathered from the job specs, the assignments, the instance states
// and the run records in etcd.
#pragma once

#include <string>
#include <vector>

#include "dais/status.h"
#include "etcd/client.h"

namespace dais::cmd {

// The table's rows, header first.
StatusOr<std::vector<std::vector<std::string>>> TrainingRows(etcd::Client& c);
// -o json: [{"job": <spec>, "node", "state", "reason", "runs": <run state or null>}].
StatusOr<std::string> TrainingJson(etcd::Client& c);

}  // namespace dais::cmd
