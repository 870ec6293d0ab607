#include "cmd/load_check_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "cmd/check_model.h"
#include "common/logging.h"
#include "fmt/format.h"

extern char** environ;

namespace dais::cmd {
namespace {

constexpr size_t kKeepBytes = 16 * 1024;  // the tail of the child's stderr kept for the message

// The child's reason: its "check-model: error:" line, else the last line it wrote.
std::string ReasonFrom(const std::string& output) {
  size_t at = output.rfind(kCheckModelErrorPrefix);
  if (at != std::string::npos) {
    std::string reason = output.substr(at + std::strlen(kCheckModelErrorPrefix));
    while (!reason.empty() && (reason.back() == '\n' || reason.back() == '\r')) reason.pop_back();
    return reason;
  }
  std::string text = output;
  while (!text.empty() && text.back() == '\n') text.pop_back();
  size_t nl = text.rfind('\n');
  return nl == std::string::npos ? text : text.substr(nl + 1);
}

// Reads the child's stderr until EOF or the deadline. False at the deadline.
bool ReadUntilEof(int fd, std::chrono::steady_clock::time_point deadline, bool has_deadline,
                  std::string* out) {
  char buf[4096];
  for (;;) {
    int wait_ms = -1;
    if (has_deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      wait_ms = static_cast<int>(std::min<int64_t>(left.count(), 1000));
    }
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, wait_ms);
    if (r < 0 && errno != EINTR) return true;
    if (r <= 0) continue;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return true;
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > 2 * kKeepBytes) out->erase(0, out->size() - kKeepBytes);
  }
}

}  // namespace

Status ProcessLoadChecker::Check(const std::string& model_dir, int64_t version,
                                 std::chrono::seconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Internal(fmt::format("pipe: {}", strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  // Nothing else of the server's: an inherited client socket would stay open (no FIN to the
  // client) until the check ends, an inherited listener would keep the port bound.
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // The server blocks SIGTERM/SIGINT in every thread (it waits for them with sigwait); the
  // child must not inherit that mask, or it could not be stopped by those signals.
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::vector<std::string> args = {"dais",
                                   "check-model",
                                   "--model-dir",
                                   model_dir,
                                   "--model-version",
                                   std::to_string(version),
                                   "--allow-gpu",
                                   allow_gpu_ ? "true" : "false",
                                   "--log-verbose",
                                   std::to_string(log_verbose_)};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, "/proc/self/exe", &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return Internal(fmt::format("cannot start the load check process: {}", strerror(rc)));
  }
  std::string output;
  const bool finished = ReadUntilEof(fds[0], start + timeout, timeout.count() > 0, &output);
  ::close(fds[0]);
  if (!finished) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  LOG_VERBOSE(1, "load check of {} version {} (pid {}) took {:.3f}s:\n{}", model_dir, version, pid,
              secs, output);
  if (!finished) {
    return DeadlineExceeded(fmt::format(
        "load did not finish within {} s (--model-load-timeout-secs) in the check process "
        "(killed; --model-load-isolation)",
        timeout.count()));
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return InvalidArgument(fmt::format(
        "loading the model killed the check process with signal {} ({}): it would have taken "
        "the server down; not loaded{}",
        sig, strsignal(sig), output.empty() ? "" : " (last output: " + ReasonFrom(output) + ")"));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    LOG_VERBOSE(1, "model {} version {}: load check passed in {:.3f}s", model_dir, version, secs);
    return OkStatus();
  }
  return InvalidArgument(ReasonFrom(output));
}

}  // namespace dais::cmd
