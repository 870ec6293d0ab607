// LoadChecker (runtime/load_checker.h) in child processes of this very executable
// (/proc/self/exe). A process start costs ~0.85 s here, nearly all of it the dynamic linking and
// static initialisation of LibTorch (docs/benchmarks.md), so checks run in forks of a zygote
// (as Chrome and Android start their processes): `dais check-model --zygote`, started once on
// the first check, single-threaded, which forks a child per check. A check then costs a fork plus
// the load of one instance. The child is killed (SIGKILL) at the timeout; children die with the
// zygote and the zygote with this process (PR_SET_PDEATHSIG). If the zygote cannot start or
// dies, it is started again at the next check, and a check that cannot use it runs in a process
// of its own (`dais check-model --model-dir D --model-version V`, its stderr captured).
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "runtime/load_checker.h"

namespace dais::cmd {

class ProcessLoadChecker : public runtime::LoadChecker {
 public:
  ProcessLoadChecker(bool allow_gpu, int log_verbose)
      : allow_gpu_(allow_gpu), log_verbose_(log_verbose) {}
  ~ProcessLoadChecker() override;  // stops the zygote (its children die with it)
  // Thread-safe; checks run in parallel.
  Status Check(const std::string& model_dir, int64_t version,
               std::chrono::seconds timeout) override;

 private:
  struct Pending {
    pid_t pid = 0;
    std::string error;
    bool done = false;
    bool signaled = false;
    int code = 0;  // exit code, or the signal when `signaled`
  };
  // The zygote's stdin, starting it first if needed; -1 when it cannot be started. `lock` holds
  // mu_ (released while the zygote starts).
  // (No analysis inside: CondVar's DAIS_REQUIRES names its own pointer to mu_.)
  int ZygoteLocked() DAIS_REQUIRES(mu_) DAIS_NO_THREAD_SAFETY_ANALYSIS;
  // Waits up to 50 ms for an answer of the zygote (the same caveat).
  void WaitTick() DAIS_REQUIRES(mu_) DAIS_NO_THREAD_SAFETY_ANALYSIS {
    cv_.WaitUntil(std::chrono::steady_clock::now() + std::chrono::milliseconds(50));
  }
  void RunZygote();          // the zygote's thread: starts it, reads its answers, reaps it
  void ReadAnswers(int fd);  // the zygote's lines into pending_, until it exits
  Status CheckInZygote(const std::string& model_dir, int64_t version, std::chrono::seconds timeout);
  Status CheckInOwnProcess(const std::string& model_dir, int64_t version,
                           std::chrono::seconds timeout);

  const bool allow_gpu_;
  const int log_verbose_;
  Mutex mu_;
  CondVar cv_{&mu_};
  bool starting_ DAIS_GUARDED_BY(mu_) = false;
  int zygote_in_ DAIS_GUARDED_BY(mu_) = -1;
  std::thread reader_ DAIS_GUARDED_BY(mu_);
  uint64_t next_id_ DAIS_GUARDED_BY(mu_) = 1;
  // Each Pending's fields are read and written under mu_ too.
  std::map<uint64_t, std::shared_ptr<Pending>> pending_ DAIS_GUARDED_BY(mu_);
};

}  // namespace dais::cmd
