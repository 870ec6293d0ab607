#include "cmd/agent_job.h"

#include <rapidjson/document.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <string_view>
#include <thread>

#include "common/json.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "fmt/format.h"

namespace dais::cmd {
namespace {

class AgentJob : public cluster::AssignedJob {
 public:
  static constexpr int kStopGraceMs = 10000;

  AgentJob(AgentJobOptions options, std::string agent, std::function<void()> changed)
      : options_(std::move(options)), agent_(std::move(agent)), changed_(std::move(changed)) {
    Set("RUNNING", "starting");
    thread_ = std::thread([this] { Loop(); });
  }

  ~AgentJob() override {
    stop_ = true;
    thread_.join();
  }

  State Current() const override {
    MutexLock l(&mu_);
    return state_;
  }

 private:
  void Set(const std::string& state, const std::string& reason) {
    {
      MutexLock l(&mu_);
      if (state_.state == state && state_.reason == reason) return;
      state_ = {state, reason};
    }
    if (changed_) changed_();
  }

  // Waits up to `ms`; false when stopping.
  bool Sleep(int64_t ms) {
    for (int64_t waited = 0; waited < ms && !stop_.load(); waited += 50) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return !stop_.load();
  }

  // Starts the runtime and waits for it; its exit status (-1: not started).
  int RunOnce() {
    std::string endpoints;
    for (const auto& e : options_.etcd_endpoints) endpoints += (endpoints.empty() ? "" : ",") + e;
    std::vector<std::string> args = {
        options_.dais_binary, "agent",         "run", "--name", agent_, "--etcd", endpoints,
        "--consumer",         options_.node_id};
    if (!options_.gateway.empty()) args.insert(args.end(), {"--gateway", options_.gateway});
    if (!options_.features_url.empty()) {
      args.insert(args.end(), {"--features-url", options_.features_url});
    }
    if (!options_.txn_url.empty()) args.insert(args.end(), {"--txn-url", options_.txn_url});
    // Metrics and HTTP triggers on a free port of the node's address (published in the agent's
    // status, where the gateway finds it).
    if (!options_.host.empty()) {
      args.insert(args.end(), {"--metrics-port", "0", "--metrics-address", options_.host});
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // The token in the environment, not the arguments (which every user of the host sees).
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::string_view(*e).rfind("DAIS_AGENT_TOKEN=", 0) != 0) env_strings.emplace_back(*e);
    }
    if (!options_.token.empty()) env_strings.push_back("DAIS_AGENT_TOKEN=" + options_.token);
    std::vector<char*> envp;
    for (std::string& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) return -1;
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // dies with the node
      if (::getppid() != parent) ::_exit(127);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    Set("RUNNING", fmt::format("pid {}{}", pid, last_exit_));
    int status = 0;
    while (true) {
      const pid_t w = ::waitpid(pid, &status, WNOHANG);
      if (w == pid) break;
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return -1;
      if (stop_.load()) {
        // It finishes its runs in progress (each bounded by the agent's run_timeout, at most
        // 1 h); past kStopGrace it is killed: its unfinished triggers stay pending for the next.
        ::kill(pid, SIGTERM);
        for (int waited_ms = 0; ::waitpid(pid, &status, WNOHANG) == 0; waited_ms += 50) {
          if (waited_ms >= kStopGraceMs) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  void Loop() {
    int64_t backoff_ms = 1000;
    while (!stop_.load()) {
      const auto started = std::chrono::steady_clock::now();
      const int exit = RunOnce();
      if (stop_.load()) return;
      const bool quick = std::chrono::steady_clock::now() - started < std::chrono::minutes(1);
      if (!quick) backoff_ms = 1000;
      last_exit_ = fmt::format(" (restarted after exit status {})", exit);
      LOG_WARNING("agent {}: its runtime exited with status {}; starting it again in {} ms", agent_,
                  exit, backoff_ms);
      Set("RUNNING", fmt::format("exited with status {}; again in {} ms", exit, backoff_ms));
      Sleep(backoff_ms);
      backoff_ms = std::min<int64_t>(backoff_ms * 2, 30000);  // while it keeps failing quickly
    }
  }

  const AgentJobOptions options_;
  const std::string agent_;
  std::function<void()> changed_;
  std::atomic<bool> stop_{false};
  std::string last_exit_;  // loop thread only
  mutable Mutex mu_;
  State state_ DAIS_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace

StatusOr<std::unique_ptr<cluster::AssignedJob>> StartAgentJob(const AgentJobOptions& options,
                                                              const cluster::Assignment& a,
                                                              std::function<void()> changed) {
  rapidjson::Document d;
  RETURN_IF_ERROR(json::ParseJson(a.agent, &d));
  if (!d.IsObject() || !d.HasMember("name") || !d["name"].IsString()) {
    return InvalidArgument("the assignment's agent has no name");
  }
  if (options.dais_binary.empty()) return FailedPrecondition("the dais binary is not known");
  AgentJobOptions own = options;
  const std::string tenant =
      d.HasMember("tenant") && d["tenant"].IsString()
          ? std::string(d["tenant"].GetString(), d["tenant"].GetStringLength())
          : "";
  if (!options.tokens_dir.empty()) {
    // The tenant's own token, or no runtime: the node's --agent-token names another tenant, and
    // running the agent as that one would step over the gateway's tenancy.
    const bool safe = !tenant.empty() && tenant[0] != '.' &&
                      tenant.find_first_of(std::string("/\0", 2)) == std::string::npos;
    std::string token;
    if (safe) {
      std::ifstream f(options.tokens_dir + "/" + tenant);
      if (f) std::getline(f, token);
    }
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) {
      token.pop_back();
    }
    if (token.empty()) {
      return FailedPrecondition("no token for tenant '" + tenant + "' in " + options.tokens_dir +
                                " (dais node --agent-tokens): the agent's runtime is not started");
    }
    own.token = token;
  }
  return std::unique_ptr<cluster::AssignedJob>(
      std::make_unique<AgentJob>(own, d["name"].GetString(), std::move(changed)));
}

}  // namespace dais::cmd
