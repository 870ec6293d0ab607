// The model manager: which models and versions are loaded, their states, and the routing of an
// inference request to a loaded version. Implements Triton's model control modes:
//   none     - load every model in the repositories at start; the API cannot change them;
//   poll     - like none, and rescan every --repository-poll-secs: load new versions, unload
//              removed ones, reload changed ones (new instance loaded and warmed before the old
//              one is drained, so no request fails);
//   explicit - load only --load-model at start; the repository API loads and unloads.
//
// Concurrency: `mu_` guards the table and is held only for lookups and swaps, never while a
// model loads or drains. `load_mu_` serializes load/unload/poll operations (one at a time).
// Infer may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "runtime/inference_request.h"
#include "runtime/load_checker.h"
#include "runtime/load_coordinator.h"
#include "runtime/model_version.h"
#include "runtime/repository.h"
#include "runtime/request_enricher.h"

namespace dais::runtime {

enum class ModelControlMode { kNone, kPoll, kExplicit };

struct ManagerOptions {
  std::vector<std::string> repositories;
  ModelControlMode mode = ModelControlMode::kNone;
  std::vector<std::string> startup_models;  // explicit mode; "*" = all
  int poll_secs = 15;
  bool strict_readiness = true;
  bool allow_gpu = false;
  // Models loaded in parallel at start and by a poll (Triton's --model-load-thread-count).
  int load_threads = 4;
  // A version whose load (instances created and warmed up) takes longer fails with that reason
  // (0: no limit). The load's thread cannot be stopped: it is abandoned (AbandonedLoads()), and
  // discards its result if it ever finishes.
  int load_timeout_secs = 0;
};

// Loads abandoned at their deadline that have not finished (process-wide). A process that exits
// with some should leave with _exit: their threads may still be inside a backend library.
int64_t AbandonedLoads();

// A model (version)'s state as the repository index reports it. UNAVAILABLE covers a failed or
// timed-out load and an unloaded model, with the reason beside it (Triton's states and names).
enum class ModelState { kLoading, kReady, kUnavailable };
// "LOADING", "READY", "UNAVAILABLE".
std::string_view ModelStateName(ModelState state);

struct IndexEntry {
  std::string name;
  std::string version;  // empty when no version is known
  ModelState state = ModelState::kUnavailable;
  std::string reason;
};

class ModelManager {
 public:
  explicit ModelManager(ManagerOptions options);
  ~ModelManager();

  // Initial load according to the mode; starts the poll thread in poll mode. A model that fails
  // to load is reported (log, index, readiness) but does not fail Start; a missing repository does.
  Status Start();
  // Stops polling and unloads every model, letting in-flight requests finish.
  void Stop();

  // Routes the request to `model_version` (or the highest ready version when -1) and queues it.
  // Always answers through request->on_complete, on some thread, exactly once.
  void Infer(RequestPtr request);

  // A ready version (-1: the highest ready one).
  StatusOr<std::shared_ptr<ModelVersion>> Find(const std::string& name, int64_t version) const;
  // The highest ready version of every model (no repository scan: cheap enough per request).
  std::vector<std::shared_ptr<ModelVersion>> LatestReady() const;
  // Ready versions of a model, ascending.
  std::vector<int64_t> ReadyVersions(const std::string& name) const;

  // Repository API (explicit mode; also used by poll). Blocking until done.
  Status LoadModel(const std::string& name);
  // Serves exactly `pinned_version` of `name` (its other versions are retired), overriding the
  // configuration's version policy until the model is unloaded or loaded again without a pin;
  // -1 is the policy. Used by cluster nodes for a deployment's version. A version that is not
  // in the repository is InvalidArgument naming the versions there.
  Status LoadModel(const std::string& name, int64_t pinned_version);
  Status UnloadModel(const std::string& name);
  std::vector<IndexEntry> Index(bool ready_only) const;

  // Models that should be loaded but are not ready, with the reason.
  std::vector<std::pair<std::string, std::string>> NotReady() const;
  // Server readiness as Triton defines it with --strict-readiness.
  bool Ready() const;

  // Rescans the repositories once (poll mode does this periodically).
  void Poll();

  ModelControlMode mode() const { return options_.mode; }

  // Requests to models with features go through `enricher` (borrowed; set before Start). Without
  // one, such requests must carry the feature inputs themselves.
  void SetEnricher(RequestEnricher* enricher) { enricher_ = enricher; }
  // Loads of new or changed versions take a permit from `coordinator` (borrowed; set before
  // Start) and switch traffic only under its fencing token.
  void SetCoordinator(LoadCoordinator* coordinator) { coordinator_ = coordinator; }
  // Every version is first tried by `checker` (borrowed; set before Start) and loaded here only
  // when that succeeded (runtime/load_checker.h).
  void SetLoadChecker(LoadChecker* checker) { checker_ = checker; }

 private:
  struct Slot {
    std::shared_ptr<ModelVersion> version;
    std::string fingerprint;
    ModelState state = ModelState::kLoading;  // when `version` is null; READY while it is set
    std::string reason;
  };
  struct Entry {
    bool wanted = false;
    std::string error;    // why the model as a whole is unavailable
    int64_t pinned = -1;  // LoadModel's version override; -1: the configured policy
    std::map<int64_t, Slot> versions;
  };
  // What a load of `name` works from: its files, config, features, backend and the versions its
  // policy selects.
  struct Resolved {
    ModelSource source;
    inference::ModelConfig config;
    features::FeatureSpecPtr features;
    Backend* backend = nullptr;
    std::vector<int64_t> wanted;
  };
  using Retired = std::vector<std::shared_ptr<ModelVersion>>;

  // Resolve, load each new or changed version, apply it under fencing, retire what the policy no
  // longer serves. `from_poll`: an unchanged version that failed before is not retried.
  // `pinned`: LoadModel's version override, or kKeepPin for the one the model has (polls).
  static constexpr int64_t kKeepPin = -2;
  Status LoadLocked(const std::string& name, bool from_poll, int64_t pinned = kKeepPin)
      DAIS_REQUIRES(load_mu_);
  // Errors are recorded as the model's (index, readiness).
  StatusOr<Resolved> Resolve(const std::string& name, int64_t pinned) DAIS_REQUIRES(load_mu_);
  // Whether version `v` (files `fp`) must be loaded; marks it LOADING when nothing serves it.
  bool NeedsLoad(const std::string& name, int64_t v, const std::string& fp, bool from_poll,
                 Status* first_error, bool* has_old) DAIS_REQUIRES(load_mu_) DAIS_EXCLUDES(mu_);
  // Takes a load permit (coordination), loads the version and switches traffic to it.
  // `attempted` is set once a load was started (a permit that was not granted is no attempt).
  Status LoadOneVersion(const std::string& name, const Resolved& r, int64_t v, bool has_old,
                        Retired* retired, bool* attempted) DAIS_REQUIRES(load_mu_)
      DAIS_EXCLUDES(mu_);
  Status CheckFencing(const std::string& name, const LoadPermit& permit) DAIS_REQUIRES(mu_);
  void RetireUnwanted(const std::string& name, const std::vector<int64_t>& wanted, bool attempted,
                      Retired* retired) DAIS_REQUIRES(load_mu_) DAIS_EXCLUDES(mu_);
  Status UnloadLocked(const std::string& name, bool drain) DAIS_REQUIRES(load_mu_);
  void Retire(std::vector<std::shared_ptr<ModelVersion>> versions, bool remove_metrics, bool drain);
  // The checker (if any), then ModelVersion::Load under the load timeout.
  StatusOr<std::shared_ptr<ModelVersion>> LoadVersion(const std::string& name, int64_t version,
                                                      const std::string& model_dir,
                                                      const inference::ModelConfig& config,
                                                      Backend* backend);
  bool Stopping();
  void SetError(const std::string& name, const std::string& error) DAIS_EXCLUDES(mu_);
  void Enqueue(RequestPtr request, std::shared_ptr<ModelVersion> version);
  // Polls every poll_secs until Stop. (No analysis: CondVar's DAIS_REQUIRES names its own
  // pointer to stop_mu_.)
  void PollLoop() DAIS_NO_THREAD_SAFETY_ANALYSIS;
  // LoadLocked for several models at once, on up to options_.load_threads threads. The caller
  // holds load_mu_ for all of them; each worker touches only its own model's entry.
  void LoadAllLocked(const std::vector<std::string>& names, bool from_poll) DAIS_REQUIRES(load_mu_);

  const ManagerOptions options_;
  RequestEnricher* enricher_ = nullptr;
  LoadCoordinator* coordinator_ = nullptr;
  LoadChecker* checker_ = nullptr;
  // Per model: the highest fencing token a version switch was applied with.
  std::map<std::string, int64_t> applied_token_ DAIS_GUARDED_BY(mu_);
  Mutex load_mu_;
  mutable Mutex mu_;
  std::map<std::string, Entry> models_ DAIS_GUARDED_BY(mu_);

  std::thread poll_thread_;
  Mutex stop_mu_;
  CondVar stop_cv_{&stop_mu_};
  bool stop_ DAIS_GUARDED_BY(stop_mu_) = false;
};

}  // namespace dais::runtime
