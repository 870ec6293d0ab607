#include "cmd/load_check_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
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

// Starts `dais <args>` (/proc/self/exe) with `stdin_fd` (or none, -1) as its stdin and `out_fd`
// as its stdout and, when `stderr_too`, its stderr. It inherits no other descriptor of the
// server (a client socket copy would delay its FIN until the child ends, a listener would keep
// the port bound) and not the server's signal mask (which blocks SIGTERM/SIGINT for sigwait).
// The pid, or -1 with the reason logged.
pid_t Spawn(std::vector<std::string> args, int stdin_fd, int out_fd, bool stderr_too) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stdin_fd >= 0) posix_spawn_file_actions_adddup2(&actions, stdin_fd, STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
  if (stderr_too) posix_spawn_file_actions_adddup2(&actions, out_fd, STDERR_FILENO);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  args.insert(args.begin(), "dais");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, "/proc/self/exe", &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    LOG_WARNING("cannot start dais {}: {}", args[1], strerror(rc));
    return -1;
  }
  return pid;
}

// The outcomes of a check, worded the same whichever process ran it.
Status Crashed(int sig, const std::string& last_output) {
  return InvalidArgument(fmt::format(
      "loading the model killed the check process with signal {} ({}): it would have taken "
      "the server down; not loaded{}",
      sig, strsignal(sig), last_output.empty() ? "" : " (last output: " + last_output + ")"));
}

Status TimedOut(std::chrono::seconds timeout) {
  return DeadlineExceeded(fmt::format(
      "load did not finish within {} s (--model-load-timeout-secs) in the check process "
      "(killed; --model-load-isolation)",
      timeout.count()));
}

}  // namespace

Status ProcessLoadChecker::CheckInOwnProcess(const std::string& model_dir, int64_t version,
                                             std::chrono::seconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Internal(fmt::format("pipe: {}", strerror(errno)));
  const pid_t pid = Spawn(
      {"check-model", "--model-dir", model_dir, "--model-version", std::to_string(version),
       "--allow-gpu", allow_gpu_ ? "true" : "false", "--log-verbose", std::to_string(log_verbose_)},
      -1, fds[1], /*stderr_too=*/true);
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return Internal("cannot start the load check process");
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
  if (!finished) return TimedOut(timeout);
  if (WIFSIGNALED(status)) return Crashed(WTERMSIG(status), ReasonFrom(output));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    LOG_VERBOSE(1, "model {} version {}: load check passed in {:.3f}s", model_dir, version, secs);
    return OkStatus();
  }
  return InvalidArgument(ReasonFrom(output));
}

ProcessLoadChecker::~ProcessLoadChecker() {
  std::thread reader;
  {
    MutexLock lock(&mu_);
    if (zygote_in_ >= 0) ::close(zygote_in_);  // EOF: the zygote kills its children and exits
    zygote_in_ = -1;
    reader = std::move(reader_);
  }
  if (reader.joinable()) reader.join();  // ends when the zygote has exited
}

namespace {

// Starts `dais check-model --zygote` with pipes to its stdin (*in) and from its stdout (*out).
pid_t SpawnZygote(bool allow_gpu, int* in, int* out) {
  int to[2], from[2];
  if (::pipe2(to, O_CLOEXEC) != 0) return -1;
  if (::pipe2(from, O_CLOEXEC) != 0) {
    ::close(to[0]);
    ::close(to[1]);
    return -1;
  }
  const pid_t pid = Spawn({"check-model", "--zygote", "--allow-gpu", allow_gpu ? "true" : "false"},
                          to[0], from[1], /*stderr_too=*/false);
  ::close(to[0]);
  ::close(from[1]);
  if (pid < 0) {
    ::close(to[1]);
    ::close(from[0]);
    return -1;
  }
  *in = to[1];
  *out = from[0];
  return pid;
}

}  // namespace

int ProcessLoadChecker::ZygoteLocked() {
  while (starting_) cv_.Wait();  // another check is starting it
  if (zygote_in_ >= 0) return zygote_in_;
  if (reader_.joinable()) reader_.join();  // the last zygote's thread, which has ended
  starting_ = true;
  // The zygote is started by the thread that reads its answers, which lives as long as it does:
  // PR_SET_PDEATHSIG fires when the *thread* that started a process ends, and the load threads
  // that call Check end after each load (the zygote was killed after every check).
  reader_ = std::thread([this] { RunZygote(); });
  while (starting_) cv_.Wait();
  return zygote_in_;
}

void ProcessLoadChecker::RunZygote() {
  int in = -1, out = -1;
  const pid_t pid = SpawnZygote(allow_gpu_, &in, &out);
  {
    MutexLock lock(&mu_);
    zygote_in_ = in;
    // Started once the zygote says it is ready (its libraries initialised), so that its start
    // does not count against the first check's load deadline; at once when it failed.
    if (pid <= 0) starting_ = false;
    cv_.SignalAll();
  }
  if (pid <= 0) return;
  LOG_INFO("load check zygote started (pid {})", pid);
  ReadAnswers(out);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

void ProcessLoadChecker::ReadAnswers(int fd) {
  std::string in;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
    MutexLock lock(&mu_);
    for (size_t nl; (nl = in.find('\n')) != std::string::npos; in.erase(0, nl + 1)) {
      std::string line = in.substr(0, nl);
      size_t sp1 = line.find(' '), sp2 = line.find(' ', sp1 + 1);
      if (sp1 == std::string::npos) continue;
      if (line == "0 ready") {
        starting_ = false;
        continue;
      }
      auto it = pending_.find(std::strtoull(line.c_str(), nullptr, 10));
      if (it == pending_.end()) continue;
      Pending& p = *it->second;
      const std::string kind = line.substr(sp1 + 1, sp2 - sp1 - 1);
      const std::string rest = sp2 == std::string::npos ? "" : line.substr(sp2 + 1);
      if (kind == "pid") {
        p.pid = static_cast<pid_t>(std::atoi(rest.c_str()));
      } else if (kind == "error") {
        p.error = rest;
      } else if (kind == "exit" || kind == "signal") {
        p.done = true;
        p.signaled = kind == "signal";
        p.code = std::atoi(rest.c_str());
      }
    }
    cv_.SignalAll();
  }
  ::close(fd);
  MutexLock lock(&mu_);
  starting_ = false;
  // The zygote is gone: the checks it had cannot answer any more.
  for (auto& [id, p] : pending_) {
    if (!p->done) {
      p->done = true;
      p->code = -1;
    }
  }
  if (zygote_in_ >= 0) ::close(zygote_in_);
  zygote_in_ = -1;
  cv_.SignalAll();
}

Status ProcessLoadChecker::CheckInZygote(const std::string& model_dir, int64_t version,
                                         std::chrono::seconds timeout) {
  auto p = std::make_shared<Pending>();
  MutexLock lock(&mu_);
  // The descriptor is used under mu_ only: the reader closes it (under mu_) when the zygote dies.
  const int fd = ZygoteLocked();
  if (fd < 0) return Unavailable("the load check zygote is not running");
  const auto start = std::chrono::steady_clock::now();
  const uint64_t id = next_id_++;
  pending_[id] = p;
  const std::string request = fmt::format("{} {} {}\n", id, version, model_dir);
  if (::write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    pending_.erase(id);
    return Unavailable("the load check zygote does not take requests");
  }
  bool killed = false;
  while (!p->done) {
    if (!killed && timeout.count() > 0 && std::chrono::steady_clock::now() >= start + timeout &&
        p->pid > 0) {
      ::kill(p->pid, SIGKILL);  // the zygote then reports the child's end
      killed = true;
    }
    WaitTick();
  }
  pending_.erase(id);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  LOG_VERBOSE(1, "load check of {} version {} (zygote child {}) took {:.3f}s", model_dir, version,
              p->pid, secs);
  if (killed) return TimedOut(timeout);
  if (p->code == -1 && !p->signaled) return Unavailable("the load check zygote died");
  if (p->signaled) return Crashed(p->code, p->error);
  if (p->code == 0) return OkStatus();
  return InvalidArgument(
      p->error.empty()
          ? fmt::format("the check process ended with exit code {} without a reason (a crash "
                        "caught by a handler, e.g. a sanitizer's?): not loaded",
                        p->code)
          : p->error);
}

Status ProcessLoadChecker::Check(const std::string& model_dir, int64_t version,
                                 std::chrono::seconds timeout) {
  Status s = CheckInZygote(model_dir, version, timeout);
  if (s.code() != StatusCode::kUnavailable) return s;
  LOG_WARNING("load check of {} version {}: {}; checking in a process of its own", model_dir,
              version, s.message());
  return CheckInOwnProcess(model_dir, version, timeout);
}

}  // namespace dais::cmd
