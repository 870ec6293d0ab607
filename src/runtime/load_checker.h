// Seam between the model manager and a place where a model version can be tried before this
// process loads it. Model files are untrusted input: a malformed one can crash the backend
// library (a segfault takes the whole server) or hang it (issue 11). cmd/load_check_process.h
// implements this with a short-lived child process (`dais check-model`, the same binary and the
// same load path) that must load and warm the version up and exit cleanly within the load
// timeout; the manager loads the version itself only then. Without a checker (the default in
// --model-control-mode none), versions are loaded directly.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "dais/status.h"

namespace dais::runtime {

class LoadChecker {
 public:
  virtual ~LoadChecker() = default;
  // OK when version `version` of the model in `model_dir` (<repository>/<model>) loads and warms
  // up elsewhere within `timeout` (zero: no limit). Otherwise why not: InvalidArgument when it
  // failed or crashed there (the message says which, with the reason), DeadlineExceeded when it
  // did not finish in time (it was killed), Internal when the check itself could not run.
  // Blocking; called from the manager's load threads, possibly several at once.
  virtual Status Check(const std::string& model_dir, int64_t version,
                       std::chrono::seconds timeout) = 0;
};

}  // namespace dais::runtime
