#include "cmd/training_runner.h"

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "cluster/events.h"
#include "cluster/keys.h"
#include "cluster/training_job.h"
#include "cmd/canary_release.h"
#include "common/json.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "gateway/rollout_start.h"
#include "learn/training_spec.h"
#include "streams/redis_feedback.h"

namespace dais::cmd {
namespace {

using cluster::TrainingJobSpec;
using cluster::TrainingRunState;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What dais train's exit status means, for the run's result line.
std::string ExitMeaning(int exit) {
  switch (exit) {
    case 0:
      return "published";
    case 3:
      return "not better than the serving version: nothing published";
    case 2:
      return "the training.yaml is not valid (see the node's log)";
    default:
      return "failed with exit status " + std::to_string(exit) + " (see the node's log)";
  }
}

class TrainingRunner : public cluster::AssignedJob {
 public:
  TrainingRunner(TrainingRunnerOptions options, TrainingJobSpec spec, std::function<void()> changed)
      : options_(std::move(options)),
        spec_(std::move(spec)),
        changed_(std::move(changed)),
        cv_(&mu_) {
    Set("RUNNING", "starting");
    thread_ = std::thread([this] { Loop(); });
  }

  ~TrainingRunner() override {
    {
      MutexLock l(&mu_);
      stop_ = true;
      cv_.SignalAll();
    }
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

  bool Stopping() const {
    MutexLock l(&mu_);
    return stop_;
  }

  // Sleeps up to `ms`; false when the job is being stopped.
  bool Sleep(int64_t ms) {
    MutexLock l(&mu_);
    if (!stop_) cv_.WaitUntil(std::chrono::steady_clock::now() + std::chrono::milliseconds(ms));
    return !stop_;
  }

  std::string RunsKey() const { return cluster::kTrainingRunsPrefix + spec_.name; }

  // The job's run state from etcd (retried until etcd answers); false when stopping.
  bool ReadState() {
    while (!Stopping()) {
      auto r = client_->Get(RunsKey());
      if (r.ok()) {
        if (!r->kvs.empty()) {
          auto s = cluster::TrainingRunStateFromJson(r->kvs[0].value);
          if (s.ok()) run_ = *s;
        }
        return true;
      }
      Set("RUNNING", "waiting for etcd: " + r.status().message());
      Sleep(1000);
    }
    return false;
  }

  void WriteState() {
    for (int tries = 0; tries < 20 && !Stopping(); ++tries) {
      if (client_->Put(RunsKey(), cluster::TrainingRunStateToJson(run_)).ok()) return;
      Sleep(500);
    }
    LOG_WARNING("training {}: could not record its run state in etcd", spec_.name);
  }

  // An event in /dais/events/ (`dais ctl get events`, kind "training"), under an hour's lease.
  void Event(const std::string& message) {
    LOG_INFO("training {}: {}", spec_.name, message);
    if (events_lease_ == 0) {
      auto lease = client_->GrantLease(3600);
      if (!lease.ok()) return;
      events_lease_ = *lease;
    }
    cluster::ClusterEvent e;
    e.time_ms = NowMs();
    e.kind = "training";
    e.deployment = cluster::kTrainingTaskPrefix + spec_.name;
    e.node = options_.node_id;
    e.message = message;
    e.scheduler = options_.node_id + "." + spec_.name;  // the key's writer: one per job
    if (!client_->Put(e.Key(++event_sequence_), e.ToJson(), events_lease_).ok()) {
      events_lease_ = 0;  // a new lease next time
    }
  }

  // The label stream's entries-added (all labels ever appended, trimming aside); -1 when Redis
  // cannot be asked.
  int64_t LabelsAdded() {
    if (spec_.after_labels <= 0) return -1;
    if (!redis_) {
      auto address = streams::ParseStreamUrl(spec_.label_stream);
      if (!address.ok()) return -1;
      stream_ = address->stream;
      auto c = streams::ConnectStreamClient(*address, {}, std::chrono::milliseconds(2000));
      if (!c.ok()) return -1;
      redis_ = std::move(*c);
    }
    auto r = redis_->Run({stream_, {"XINFO", "STREAM", stream_}}, std::chrono::milliseconds(2000));
    if (!r.ok()) return -1;
    if (r->is_error()) return r->str.find("no such key") != std::string::npos ? 0 : -1;
    int64_t length = -1;
    for (size_t i = 0; i + 1 < r->elements.size(); i += 2) {
      if (r->elements[i].str == "entries-added") return r->elements[i + 1].integer;
      if (r->elements[i].str == "length") length = r->elements[i + 1].integer;
    }
    return length;  // Redis before 7: the length (trimming makes it undercount)
  }

  // The label stream's entries not yet committed by its archivers (every consumer group's
  // pending and lag: `dais archive` acknowledges an entry only once its file is durable); -1 when
  // Redis cannot be asked or no group reads the stream.
  int64_t LabelsNotArchived() {
    if (!redis_) return -1;
    auto r = redis_->Run({stream_, {"XINFO", "GROUPS", stream_}}, std::chrono::milliseconds(2000));
    if (!r.ok() || r->is_error() || r->elements.empty()) return -1;
    int64_t left = 0;
    for (const redis::Reply& group : r->elements) {
      for (size_t i = 0; i + 1 < group.elements.size(); i += 2) {
        const std::string& k = group.elements[i].str;
        if (k == "pending" || k == "lag")
          left += std::max<int64_t>(group.elements[i + 1].integer, 0);
      }
    }
    return left;
  }

  // A run triggered by labels waits (up to a minute) until the archivers committed them, so that
  // it trains on what triggered it.
  void WaitForArchive() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (int64_t left = LabelsNotArchived(); left > 0; left = LabelsNotArchived()) {
      if (std::chrono::steady_clock::now() >= until) {
        LOG_WARNING("training {}: {} labels still not archived after 60 s; running anyway",
                    spec_.name, left);
        return;
      }
      Set("RUNNING", fmt::format("waiting for the archivers to commit {} labels", left));
      if (!Sleep(200)) return;
    }
  }

  // When the next run is due: 0 now, else the milliseconds to wait (polling the labels).
  int64_t Due(int64_t labels, std::string* why) {
    const int64_t now = NowMs();
    if (spec_.every_ms > 0) {
      if (run_.last_end_ms == 0) {
        *why = "first run";
        return 0;
      }
      if (now >= run_.last_end_ms + spec_.every_ms) {
        *why = fmt::format("{} s since the last run", (now - run_.last_end_ms) / 1000);
        return 0;
      }
    }
    const int64_t since = labels - std::max<int64_t>(run_.labels_seen, 0);
    if (spec_.after_labels > 0 && labels >= 0 && since >= spec_.after_labels) {
      *why = fmt::format("{} new labels", since);
      return 0;
    }
    std::string wait;
    int64_t sleep = spec_.after_labels > 0 ? 1000 : 60000;
    if (spec_.every_ms > 0) {
      const int64_t left = run_.last_end_ms + spec_.every_ms - now;
      sleep = std::min(sleep, left);
      wait = fmt::format("next run in {} s", (left + 999) / 1000);
    }
    if (spec_.after_labels > 0) {
      wait += (wait.empty() ? "" : ", or ") +
              (labels < 0 ? std::string("after labels (the label stream is unreachable)")
                          : fmt::format("after {} more labels", spec_.after_labels - since));
    }
    *why = wait;
    return std::max<int64_t>(sleep, 1);
  }

  // Runs `dais train` and waits for it; its exit status, kStopped when the job was stopped
  // meanwhile, or kNotStarted (fork or waitpid failed; errno says why).
  static constexpr int kStopped = -2, kNotStarted = -1;
  int RunTrain(const std::string& result_file) {
    std::vector<std::string> args = {options_.dais_binary, "train",         "--config",
                                     spec_.config,         "--result-file", result_file};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) return kNotStarted;
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // dies with the node
      if (::getppid() != parent) ::_exit(127);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    int status = 0;
    while (true) {
      const pid_t w = ::waitpid(pid, &status, WNOHANG);
      if (w == pid) break;
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return kNotStarted;
      if (Stopping()) {
        ::kill(pid, SIGTERM);
        ::waitpid(pid, &status, 0);
        return kStopped;
      }
      Sleep(100);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  void RunOnce(int64_t labels, const std::string& why) {
    ++run_.runs;
    run_.last_start_ms = NowMs();
    if (labels >= 0) run_.labels_seen = labels;
    run_.node = options_.node_id;
    Set("RUNNING", fmt::format("run {} ({})", run_.runs, why));
    Event(fmt::format("run {} started on {} ({})", run_.runs, options_.node_id, why));
    const std::string result_file =
        (std::filesystem::temp_directory_path() /
         fmt::format("dais-training-{}-{}.json", spec_.name, ::getpid()))
            .string();
    const int exit = RunTrain(result_file);
    const int err = errno;
    if (exit == kStopped) return;  // the next node runs it again
    run_.last_end_ms = NowMs();
    run_.last_exit = exit;
    // Not started: recorded like a failed run, so the schedule waits for its next point instead
    // of trying again at once.
    run_.last_result = exit == kNotStarted
                           ? "could not run dais train: " + std::string(std::strerror(err))
                           : ExitMeaning(exit);
    int64_t version = 0;
    if (exit == 0 || exit == 3) {
      std::ifstream in(result_file);
      std::stringstream text;
      text << in.rdbuf();
      rapidjson::Document d;
      if (json::ParseJson(text.str(), &d).ok() && d.IsObject() && d.HasMember("version") &&
          d["version"].IsInt64()) {
        version = d["version"].GetInt64();
      }
    }
    std::error_code ec;
    std::filesystem::remove(result_file, ec);
    if (exit == 0 && version > 0) {
      run_.published = version;
      run_.last_result = fmt::format("published version {}", version);
      if (spec_.release.strategy == "canary") {
        run_.release_pending = version;
      } else {
        run_.last_result += " (release: manual)";
      }
    }
    WriteState();
    Event(fmt::format("run {}: {} ({:.1f} s)", run_.runs, run_.last_result,
                      (run_.last_end_ms - run_.last_start_ms) / 1000.0));
  }

  // The canary release of `version` (canary_release.h); the outcome is recorded either way.
  void Release(int64_t version) {
    ReleaseHooks hooks;
    hooks.stopping = [this] { return Stopping(); };
    hooks.waiting = [this, version](const std::string& why) {
      Set("RUNNING", fmt::format("releasing v{}: {}", version, why));
    };
    hooks.event = [this](const std::string& e) { Event(e); };
    hooks.sleep_ms = [this](int64_t ms) { Sleep(ms); };
    hooks.now_ms = NowMs;
    const std::string outcome = ReleaseByCanary(*client_, spec_.release, version, hooks);
    if (outcome.empty()) return;  // stopped: release_pending stays, the next node finishes it
    run_.release_pending = 0;
    run_.last_result = fmt::format("published version {}; {}", version, outcome);
    WriteState();
    Event(run_.last_result);
  }

  void Loop() {
    auto client = etcd::Client::Create({options_.etcd_endpoints});
    if (!client.ok()) {
      Set("FAILED", client.status().message());
      return;
    }
    client_ = std::move(*client);
    if (!ReadState()) return;
    while (!Stopping()) {
      if (run_.release_pending > 0) {
        Release(run_.release_pending);
        continue;
      }
      std::string why;
      const int64_t labels = LabelsAdded();
      const int64_t wait = Due(labels, &why);
      if (wait == 0) {
        if (spec_.after_labels > 0) WaitForArchive();
        if (Stopping()) return;
        RunOnce(labels, why);
        continue;
      }
      Set("RUNNING", "waiting: " + why);  // the runs and their results: the run record
      Sleep(wait);
    }
  }

  const TrainingRunnerOptions options_;
  const TrainingJobSpec spec_;
  const std::function<void()> changed_;
  mutable Mutex mu_;
  CondVar cv_;
  bool stop_ DAIS_GUARDED_BY(mu_) = false;
  State state_ DAIS_GUARDED_BY(mu_);
  // The job's thread only.
  std::unique_ptr<etcd::Client> client_;
  std::unique_ptr<redis::Client> redis_;
  std::string stream_;
  TrainingRunState run_;
  int64_t events_lease_ = 0;
  int64_t event_sequence_ = 0;
  std::thread thread_;
};

}  // namespace

StatusOr<std::unique_ptr<cluster::AssignedJob>> StartTrainingJob(
    const TrainingRunnerOptions& options, const cluster::Assignment& assignment,
    std::function<void()> changed) {
  ASSIGN_OR_RETURN(TrainingJobSpec spec, cluster::ParseTrainingJobYaml(assignment.training));
  // Read here, so that a node that cannot read it reports the job FAILED (and the scheduler
  // places it on another node) instead of failing every run.
  if (auto t = learn::LoadTrainingSpec(spec.config); !t.ok()) {
    return InvalidArgument("config " + spec.config + ": " + t.status().message());
  }
  return std::unique_ptr<cluster::AssignedJob>(
      new TrainingRunner(options, std::move(spec), std::move(changed)));
}

}  // namespace dais::cmd
