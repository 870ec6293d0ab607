// LoadChecker (runtime/load_checker.h) as a child process: `dais check-model` from this very
// executable (/proc/self/exe), its stderr captured through a pipe. The child is killed
// (SIGKILL) at the timeout; it also dies with this process (PR_SET_PDEATHSIG). Cost: one
// process start (the dynamic linker and the backend libraries: measured in docs/model-config.md)
// plus a second load of one instance, so a version takes about twice as long to load.
#pragma once

#include <string>

#include "runtime/load_checker.h"

namespace dais::cmd {

class ProcessLoadChecker : public LoadChecker {
 public:
  ProcessLoadChecker(bool allow_gpu, int log_verbose)
      : allow_gpu_(allow_gpu), log_verbose_(log_verbose) {}
  // Thread-safe: each call spawns its own child.
  Status Check(const std::string& model_dir, int64_t version,
               std::chrono::seconds timeout) override;

 private:
  const bool allow_gpu_;
  const int log_verbose_;
};

}  // namespace dais::cmd
