#include "runtime/model_manager.h"

#include <malloc.h>

#include <algorithm>
#include <mutex>

#include "common/logging.h"
#include "dais/backend.h"
#include "dais/clock.h"
#include "fmt/format.h"
#include "metrics/registry.h"
#include "runtime/model_config.h"
#include "runtime/model_features.h"
#include "runtime/repository.h"

// jemalloc's control interface, when linked (see ReleaseFreedMemory).
extern "C" int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen)
    __attribute__((weak));

namespace dais::runtime {

namespace {

// Gives freed pages back to the OS after an unload, so RSS returns near its baseline: jemalloc's
// arenas when the executable links jemalloc (CMake DAIS_JEMALLOC; its mallctl is then defined,
// otherwise this weak reference is null), glibc's heap otherwise. Never glibc's malloc_trim in a
// jemalloc process: glibc's allocator is then unused, and malloc_trim initialising it on an
// unload thread broke its arena accounting at that thread's exit (abort in
// __malloc_arena_thread_freeres, or a segfault: test_three_nodes_hot_update_under_traffic).
void ReleaseFreedMemory() {
  if (&mallctl != nullptr) {
    // "arena.<MALLCTL_ARENAS_ALL>.purge": every arena's unused dirty pages.
    mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0);
  } else {
    malloc_trim(0);
  }
}

// The model manager's series in the global registry (docs/metrics.md), resolved once.
struct ManagerMetrics {
  metrics::Family<metrics::Counter>& load_failures;
  metrics::Family<metrics::Counter>& switch_rejections;
  metrics::Family<metrics::Gauge>& ready;

  static ManagerMetrics& Get() {
    auto& r = metrics::Registry::Global();
    static ManagerMetrics m{
        r.AddCounter("dais_model_load_failures_total",
                     "Model version loads that failed on this node", {"model"}),
        r.AddCounter(
            "dais_model_switch_rejections_total",
            "Version switches refused by fencing (lease lost or an older token than already "
            "applied)",
            {"model"}),
        r.AddGauge("dais_model_ready",
                   "1 when the model version is ready, 0 while loading or after a failed load.",
                   {"model", "version"}),
    };
    return m;
  }
};
ManagerMetrics& Metrics() { return ManagerMetrics::Get(); }

void SetReady(const std::string& model, int64_t version, bool ready) {
  Metrics().ready.Get({model, std::to_string(version)}).Set(ready ? 1 : 0);
}

}  // namespace

std::string_view ModelStateName(ModelState state) {
  switch (state) {
    case ModelState::kLoading:
      return "LOADING";
    case ModelState::kReady:
      return "READY";
    case ModelState::kUnavailable:
      return "UNAVAILABLE";
  }
  return "UNAVAILABLE";
}

ModelManager::ModelManager(ManagerOptions options) : options_(std::move(options)) {}

ModelManager::~ModelManager() { Stop(); }

Status ModelManager::Start() {
  ASSIGN_OR_RETURN(std::vector<std::string> names, ListModels(options_.repositories));
  std::vector<std::string> to_load;
  if (options_.mode == ModelControlMode::kExplicit) {
    for (const auto& m : options_.startup_models) {
      if (m == "*") {
        to_load = names;
        break;
      }
      to_load.push_back(m);
    }
  } else {
    to_load = names;
  }
  std::sort(to_load.begin(), to_load.end());
  to_load.erase(std::unique(to_load.begin(), to_load.end()), to_load.end());
  LOG_INFO("model repository: {} model(s) found, {} to load", names.size(), to_load.size());
  {
    // Every model to load counts as LOADING (and the server as not ready) from now on.
    MutexLock l(&mu_);
    for (const auto& name : to_load) models_[name].wanted = true;
  }
  {
    MutexLock lock(&load_mu_);
    LoadAllLocked(to_load, /*from_poll=*/false);
  }
  if (options_.mode == ModelControlMode::kPoll) {
    poll_thread_ = std::thread([this] { PollLoop(); });
  }
  return OkStatus();
}

void ModelManager::Stop() {
  {
    MutexLock lock(&stop_mu_);
    if (stop_) return;
    stop_ = true;
    stop_cv_.SignalAll();
  }
  if (poll_thread_.joinable()) poll_thread_.join();
  MutexLock lock(&load_mu_);
  std::vector<std::string> names;
  {
    MutexLock l(&mu_);
    for (const auto& [name, e] : models_) names.push_back(name);
  }
  // Process exit: requests still queued after --exit-timeout-secs are answered, not run.
  for (const auto& n : names) (void)UnloadLocked(n, /*drain=*/false);
}

void ModelManager::PollLoop() {
  while (true) {
    {
      MutexLock lock(&stop_mu_);
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::seconds(options_.poll_secs);
      while (!stop_ && stop_cv_.WaitUntil(deadline)) {
      }
      if (stop_) return;
    }
    Poll();
  }
}

void ModelManager::Poll() {
  auto names = ListModels(options_.repositories);
  if (!names.ok()) {
    LOG_ERROR("repository poll: {}", names.status().message());
    return;
  }
  MutexLock lock(&load_mu_);
  std::vector<std::string> gone;
  {
    MutexLock l(&mu_);
    for (const auto& [name, e] : models_) {
      if (!std::binary_search(names->begin(), names->end(), name)) gone.push_back(name);
    }
  }
  for (const auto& n : gone) {
    LOG_INFO("repository poll: model '{}' was removed; unloading", n);
    (void)UnloadLocked(n, /*drain=*/true);
    MutexLock l(&mu_);
    models_.erase(n);
  }
  LoadAllLocked(*names, /*from_poll=*/true);
}

void ModelManager::LoadAllLocked(const std::vector<std::string>& names, bool from_poll) {
  auto load = [this, from_poll](const std::string& name) DAIS_NO_THREAD_SAFETY_ANALYSIS {
    Status s = LoadLocked(name, from_poll);  // under the caller's load_mu_
    if (s.ok()) return;
    if (from_poll) {
      LOG_VERBOSE(1, "repository poll: model '{}': {}", name, s.message());
    } else {
      LOG_ERROR("model '{}' failed to load: {}", name, s.message());
    }
  };
  size_t threads = std::min<size_t>(std::max(1, options_.load_threads), names.size());
  if (threads <= 1) {
    for (const auto& n : names) load(n);
    return;
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> workers;
  for (size_t t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      for (size_t i = next++; i < names.size(); i = next++) load(names[i]);
    });
  }
  for (auto& w : workers) w.join();
}

void ModelManager::SetError(const std::string& name, const std::string& error) {
  MutexLock lock(&mu_);
  Entry& e = models_[name];
  e.wanted = true;
  e.error = error;
}

bool ModelManager::Stopping() {
  MutexLock lock(&stop_mu_);
  return stop_;
}

Status ModelManager::LoadModel(const std::string& name) { return LoadModel(name, -1); }

Status ModelManager::LoadModel(const std::string& name, int64_t pinned_version) {
  MutexLock lock(&load_mu_);
  if (Stopping()) return Unavailable("server is shutting down");
  return LoadLocked(name, /*from_poll=*/false, pinned_version < 0 ? -1 : pinned_version);
}

Status ModelManager::UnloadModel(const std::string& name) {
  MutexLock lock(&load_mu_);
  if (Stopping()) return Unavailable("server is shutting down");
  return UnloadLocked(name, /*drain=*/true);
}

StatusOr<ModelManager::Resolved> ModelManager::Resolve(const std::string& name, int64_t pinned) {
  auto src = ScanModel(options_.repositories, name);
  if (!src.ok()) {
    if (src.status().code() != StatusCode::kNotFound) SetError(name, src.status().message());
    return src.status();
  }
  auto config = LoadModelConfig(*src, options_.allow_gpu);
  if (!config.ok()) {
    std::string previous;
    {
      MutexLock l(&mu_);
      if (models_.count(name)) previous = models_[name].error;
    }
    if (previous != config.status().message()) {
      LOG_ERROR("model '{}': {}", name, config.status().message());
    }
    SetError(name, config.status().message());
    return config.status();
  }
  auto features = LoadModelFeatures(*src, *config);
  if (!features.ok()) {
    LOG_ERROR("model '{}': {}", name, features.status().message());
    SetError(name, features.status().message());
    return features.status();
  }
  Resolved r{
      std::move(src).value(), std::move(config).value(), std::move(features).value(), nullptr, {}};
  r.backend = FindBackend(r.config.backend());
  if (r.backend == nullptr) {
    std::string available;
    for (const auto& b : BackendNames()) available += (available.empty() ? "" : ", ") + b;
    Status s = InvalidArgument("model '" + name + "': backend '" + r.config.backend() +
                               "' is not available in this build (available: " + available + ")");
    SetError(name, s.message());
    return s;
  }
  std::vector<int64_t> available;
  for (const auto& [v, fp] : r.source.versions) available.push_back(v);
  {
    MutexLock l(&mu_);
    auto it = models_.find(name);
    if (pinned == kKeepPin) pinned = it != models_.end() ? it->second.pinned : -1;
  }
  if (pinned >= 0 && !r.source.versions.count(pinned)) {
    std::string have;
    for (int64_t v : available) have += (have.empty() ? "" : ", ") + std::to_string(v);
    Status s = InvalidArgument("model '" + name + "' has no version " + std::to_string(pinned) +
                               " in '" + r.source.dir +
                               "' (versions there: " + (have.empty() ? "none" : have) + ")");
    SetError(name, s.message());
    return s;
  }
  r.wanted = pinned >= 0 ? std::vector<int64_t>{pinned}
                         : SelectVersions(r.config.version_policy(), available);
  {
    MutexLock l(&mu_);
    models_[name].pinned = pinned;
  }
  if (r.wanted.empty()) {
    Status s = InvalidArgument("model '" + name + "' has no version directory to serve in '" +
                               r.source.dir + "'");
    SetError(name, s.message());
    return s;
  }
  return r;
}

bool ModelManager::NeedsLoad(const std::string& name, int64_t v, const std::string& fp,
                             bool from_poll, Status* first_error, bool* has_old) {
  MutexLock l(&mu_);
  Entry& e = models_[name];
  e.wanted = true;
  e.error.clear();
  auto it = e.versions.find(v);
  if (it != e.versions.end() && it->second.fingerprint == fp) {
    if (it->second.version) return false;  // unchanged and serving
    if (from_poll && !it->second.reason.empty()) {
      // Unchanged and broken: polling again would only repeat the failure.
      if (first_error->ok()) *first_error = InvalidArgument(it->second.reason);
      return false;
    }
  }
  *has_old = it != e.versions.end() && it->second.version != nullptr;
  Slot& slot = e.versions[v];
  if (!*has_old) {
    slot.state = ModelState::kLoading;
    SetReady(name, v, false);
  }
  return true;
}

Status ModelManager::LoadOneVersion(const std::string& name, const Resolved& r, int64_t v,
                                    bool has_old, Retired* retired, bool* attempted) {
  std::unique_ptr<LoadPermit> permit;
  if (coordinator_ != nullptr) {
    auto granted = coordinator_->BeginLoad(name, v);
    if (!granted.ok()) {
      // Not loaded now; the next poll (or load request) tries again.
      std::string reason = "waiting for the load lock: " + granted.status().message();
      LOG_WARNING("model '{}' version {}: {}", name, v, reason);
      MutexLock l(&mu_);
      Slot& slot = models_[name].versions[v];
      if (!slot.version) slot.state = ModelState::kUnavailable;
      slot.reason = reason;
      slot.fingerprint.clear();
      return granted.status();
    }
    permit = std::move(granted).value();
  }
  *attempted = true;
  LOG_INFO("loading model '{}' version {}{}{}", name, v, has_old ? " (changed on disk)" : "",
           permit ? fmt::format(" (fencing token {})", permit->token()) : "");
  auto loaded = LoadVersion(name, v, r.source.dir, r.config, r.backend);
  MutexLock l(&mu_);
  Slot& slot = models_[name].versions[v];
  if (loaded.ok() && permit) {
    Status fenced = CheckFencing(name, *permit);
    if (!fenced.ok()) {
      std::string reason = "switch rejected: " + fenced.message();
      LOG_WARNING("model '{}' version {}: {}; it will be loaded again", name, v, reason);
      Metrics().switch_rejections.Get({name}).Increment();
      retired->push_back(std::move(loaded).value());
      slot.reason = reason;
      slot.fingerprint.clear();
      if (!slot.version) slot.state = ModelState::kUnavailable;
      return fenced;
    }
  }
  if (!loaded.ok()) {
    Metrics().load_failures.Get({name}).Increment();
    std::string reason = loaded.status().message();
    LOG_ERROR("model '{}' version {} failed to load: {}", name, v, reason);
    slot.reason = reason;
    slot.fingerprint = r.source.versions.at(v);  // an unchanged broken version is not retried
    if (!slot.version) {
      slot.state = ModelState::kUnavailable;
      SetReady(name, v, false);
    }
    return loaded.status();
  }
  if (slot.version) retired->push_back(std::move(slot.version));
  (*loaded)->set_features(r.features);
  slot.version = std::move(loaded).value();
  slot.fingerprint = r.source.versions.at(v);
  slot.state = ModelState::kReady;
  slot.reason.clear();
  SetReady(name, v, true);
  return OkStatus();
}

// The switch of traffic to the new version is the fenced effect: refused when the lease was
// lost meanwhile (the node was paused past it, Redis lost it) or when an operation with a newer
// token has already been applied to this model here.
Status ModelManager::CheckFencing(const std::string& name, const LoadPermit& permit) {
  Status fenced = permit.Check();
  int64_t& applied = applied_token_[name];
  if (fenced.ok() && permit.token() < applied) {
    fenced = FailedPrecondition(
        fmt::format("fencing token {} is older than {} already applied", permit.token(), applied));
  }
  if (fenced.ok()) applied = permit.token();
  return fenced;
}

// Unloads versions the policy no longer serves — only once one it does serve is ready: when the
// new version failed to load or its switch was refused, the old one keeps serving.
void ModelManager::RetireUnwanted(const std::string& name, const std::vector<int64_t>& wanted,
                                  bool attempted, Retired* retired) {
  MutexLock l(&mu_);
  Entry& e = models_[name];
  bool wanted_ready = false;
  for (int64_t v : wanted) {
    auto it = e.versions.find(v);
    wanted_ready = wanted_ready || (it != e.versions.end() && it->second.version != nullptr);
  }
  for (auto it = e.versions.begin(); it != e.versions.end();) {
    bool unwanted = std::find(wanted.begin(), wanted.end(), it->first) == wanted.end();
    if (unwanted && !wanted_ready && it->second.version) {
      if (attempted) {
        LOG_WARNING(
            "model '{}': keeping version {} serving until a version the policy selects is ready",
            name, it->first);
      }
      ++it;
      continue;
    }
    if (unwanted) {
      LOG_INFO("unloading model '{}' version {} (no longer served)", name, it->first);
      if (it->second.version) retired->push_back(std::move(it->second.version));
      Metrics().ready.Remove({name, std::to_string(it->first)});
      it = e.versions.erase(it);
    } else {
      ++it;
    }
  }
}

Status ModelManager::LoadLocked(const std::string& name, bool from_poll, int64_t pinned) {
  ASSIGN_OR_RETURN(Resolved r, Resolve(name, pinned));
  // Load what is new or changed; the old instance of a changed version keeps serving meanwhile.
  Status first_error;
  bool attempted = false;  // a load was tried in this call (logs once, not on every poll)
  Retired retired;
  for (int64_t v : r.wanted) {
    bool has_old = false;
    if (!NeedsLoad(name, v, r.source.versions.at(v), from_poll, &first_error, &has_old)) continue;
    Status s = LoadOneVersion(name, r, v, has_old, &retired, &attempted);
    if (first_error.ok()) first_error = s;
  }
  RetireUnwanted(name, r.wanted, attempted, &retired);
  Retire(std::move(retired), /*remove_metrics=*/false, /*drain=*/true);
  return first_error;
}

namespace {

std::atomic<int64_t> g_abandoned_loads{0};

// A load on its own thread, waited for with a deadline. Shared by the waiter and the thread,
// which outlives the waiter when abandoned.
struct TimedLoad {
  Mutex mu;
  CondVar cv{&mu};
  bool done DAIS_GUARDED_BY(mu) = false;
  bool abandoned DAIS_GUARDED_BY(mu) = false;
  StatusOr<std::shared_ptr<ModelVersion>> result DAIS_GUARDED_BY(mu){Internal("not loaded")};
};

// Waits until the load is done or `deadline` passes; true when done. (No analysis inside:
// CondVar's DAIS_REQUIRES names its own pointer to the mutex.)
bool WaitDone(TimedLoad& load, std::chrono::steady_clock::time_point deadline)
    DAIS_REQUIRES(load.mu) DAIS_NO_THREAD_SAFETY_ANALYSIS {
  while (!load.done && load.cv.WaitUntil(deadline)) {
  }
  return load.done;
}

}  // namespace

int64_t AbandonedLoads() { return g_abandoned_loads.load(); }

StatusOr<std::shared_ptr<ModelVersion>> ModelManager::LoadVersion(
    const std::string& name, int64_t version, const std::string& model_dir,
    const inference::ModelConfig& config, Backend* backend) {
  const auto timeout = std::chrono::seconds(std::max(0, options_.load_timeout_secs));
  if (checker_ != nullptr) {
    Status checked = checker_->Check(model_dir, version, timeout);
    if (!checked.ok()) return checked;
  }
  const std::string version_dir = model_dir + "/" + std::to_string(version);
  if (timeout.count() == 0) return ModelVersion::Load(name, version, version_dir, config, backend);
  auto load = std::make_shared<TimedLoad>();
  std::thread([load, name, version, version_dir, config, backend] {
    auto result = ModelVersion::Load(name, version, version_dir, config, backend);
    bool abandoned = false;
    {
      MutexLock lock(&load->mu);
      abandoned = load->abandoned;
      if (!abandoned) {
        load->result = std::move(result);
        load->done = true;
        load->cv.SignalAll();
      }
    }
    if (abandoned) {
      LOG_WARNING(
          "model '{}' version {}: a load abandoned at its deadline finished ({}); discarded", name,
          version, result.ok() ? "loaded" : result.status().message());
      if (result.ok()) (*result)->Shutdown(/*drain=*/false);
      g_abandoned_loads.fetch_sub(1);
    }
  }).detach();
  MutexLock lock(&load->mu);
  if (!WaitDone(*load, std::chrono::steady_clock::now() + timeout)) {
    load->abandoned = true;
    g_abandoned_loads.fetch_add(1);
    return DeadlineExceeded(fmt::format(
        "load did not finish within {} s (--model-load-timeout-secs); its thread is abandoned",
        timeout.count()));
  }
  return std::move(load->result);
}

Status ModelManager::UnloadLocked(const std::string& name, bool drain) {
  std::vector<std::shared_ptr<ModelVersion>> retired;
  {
    MutexLock l(&mu_);
    auto it = models_.find(name);
    if (it == models_.end()) {
      models_.erase(name);
      return OkStatus();  // Triton answers success for a model that is not loaded
    }
    it->second.wanted = false;
    it->second.error.clear();
    it->second.pinned = -1;
    for (auto& [v, slot] : it->second.versions) {
      if (slot.version) retired.push_back(std::move(slot.version));
      Metrics().ready.Remove({name, std::to_string(v)});
    }
    it->second.versions.clear();
  }
  if (!retired.empty()) LOG_INFO("unloading model '{}'", name);
  Retire(std::move(retired), /*remove_metrics=*/true, drain);
  return OkStatus();
}

void ModelManager::Retire(std::vector<std::shared_ptr<ModelVersion>> versions, bool remove_metrics,
                          bool drain) {
  if (versions.empty()) return;
  for (auto& mv : versions) {
    mv->Shutdown(drain);  // executing (and, when draining, queued) requests finish first
    LOG_INFO("model '{}' version {} unloaded", mv->name(), mv->version());
    if (remove_metrics) ModelStats::RemoveMetrics(mv->name(), std::to_string(mv->version()));
  }
  versions.clear();
  ReleaseFreedMemory();
}

StatusOr<std::shared_ptr<ModelVersion>> ModelManager::Find(const std::string& name,
                                                           int64_t version) const {
  MutexLock l(&mu_);
  auto it = models_.find(name);
  if (it == models_.end() || (it->second.versions.empty() && !it->second.wanted)) {
    return NotFound("unknown model '" + name + "'");
  }
  const auto& versions = it->second.versions;
  if (version < 0) {
    for (auto v = versions.rbegin(); v != versions.rend(); ++v) {
      if (v->second.version) return v->second.version;
    }
    return Unavailable("model '" + name + "' has no ready version" +
                       (it->second.error.empty() ? "" : ": " + it->second.error));
  }
  auto v = versions.find(version);
  if (v == versions.end()) {
    return NotFound("unknown version " + std::to_string(version) + " of model '" + name + "'");
  }
  if (!v->second.version) {
    return Unavailable("model '" + name + "' version " + std::to_string(version) +
                       " is not ready: " + std::string(ModelStateName(v->second.state)) +
                       (v->second.reason.empty() ? "" : " (" + v->second.reason + ")"));
  }
  return v->second.version;
}

std::vector<int64_t> ModelManager::ReadyVersions(const std::string& name) const {
  MutexLock l(&mu_);
  std::vector<int64_t> out;
  auto it = models_.find(name);
  if (it == models_.end()) return out;
  for (const auto& [v, slot] : it->second.versions)
    if (slot.version) out.push_back(v);
  return out;
}

void ModelManager::Infer(RequestPtr request) {
  if (request->arrival_ns == 0) request->arrival_ns = NowNs();
  auto mv = Find(request->model_name, request->model_version);
  if (!mv.ok()) {
    request->on_complete(mv.status());
    return;
  }
  if (!request->entity_ids.empty() && !NeedsFeatures(*request, **mv)) {
    request->on_complete(InvalidArgument(
        (*mv)->features()
            ? "model '" + request->model_name +
                  "': give either its feature inputs or parameters.entity_ids, not both"
            : "model '" + request->model_name +
                  "' declares no features (features.yaml): parameters.entity_ids does not apply"));
    return;
  }
  if (enricher_ != nullptr && NeedsFeatures(*request, **mv)) {
    // The request goes to the version whose spec built its features (Enqueue re-routes only if
    // that version was retired meanwhile).
    std::shared_ptr<ModelVersion> version = *mv;
    request->may_run_inline = false;  // it continues on the feature store's thread
    enricher_->Enrich(std::move(request), version,
                      [this, version](RequestPtr r) { Enqueue(std::move(r), version); });
    return;
  }
  Enqueue(std::move(request), std::move(mv).value());
}

void ModelManager::Enqueue(RequestPtr request, std::shared_ptr<ModelVersion> mv) {
  Status s = mv->Enqueue(request);
  if (s.code() == StatusCode::kUnavailable) {
    // The version was retired between Find and Enqueue (a reload or a new version took its
    // place): route once more, to its successor.
    auto next = Find(request->model_name, request->model_version);
    // An enriched request only moves to a successor whose features fill the inputs the same
    // way; otherwise it is answered Unavailable (retry) rather than run on mismatched features.
    if (next.ok() && next->get() != mv.get() &&
        features::SameLayout(mv->features().get(), (*next)->features().get())) {
      s = (*next)->Enqueue(request);
    }
  }
  if (!s.ok()) request->on_complete(s);
}

std::vector<std::shared_ptr<ModelVersion>> ModelManager::LatestReady() const {
  std::vector<std::shared_ptr<ModelVersion>> out;
  MutexLock l(&mu_);
  for (const auto& [name, e] : models_) {
    for (auto it = e.versions.rbegin(); it != e.versions.rend(); ++it) {
      if (it->second.version) {
        out.push_back(it->second.version);
        break;
      }
    }
  }
  return out;
}

std::vector<IndexEntry> ModelManager::Index(bool ready_only) const {
  std::vector<IndexEntry> out;
  auto names = ListModels(options_.repositories);
  MutexLock l(&mu_);
  std::vector<std::string> all;
  if (names.ok()) all = *names;
  for (const auto& [name, e] : models_) all.push_back(name);
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  for (const auto& name : all) {
    auto it = models_.find(name);
    if (it == models_.end() || (it->second.versions.empty() && it->second.error.empty())) {
      bool pending = it != models_.end() && it->second.wanted;
      if (!ready_only) {
        out.push_back({name, "", pending ? ModelState::kLoading : ModelState::kUnavailable,
                       pending ? "" : "unloaded"});
      }
      continue;
    }
    if (!it->second.error.empty() && !ready_only) {
      out.push_back({name, "", ModelState::kUnavailable, it->second.error});
    }
    for (const auto& [v, slot] : it->second.versions) {
      const ModelState state = slot.version ? ModelState::kReady : slot.state;
      if (ready_only && state != ModelState::kReady) continue;
      out.push_back({name, std::to_string(v), state, slot.reason});
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> ModelManager::NotReady() const {
  std::vector<std::pair<std::string, std::string>> out;
  MutexLock l(&mu_);
  for (const auto& [name, e] : models_) {
    if (!e.wanted) continue;
    bool serving = false;
    for (const auto& [v, slot] : e.versions) serving = serving || slot.version != nullptr;
    if (!e.error.empty() && !serving) {
      out.emplace_back(name, e.error);
      continue;
    }
    if (e.versions.empty()) {
      out.emplace_back(name, "not loaded yet");
      continue;
    }
    // A version still loading (or waiting for its lock, or refused) while another version of the
    // model serves does not make the server unready: traffic is answered throughout an update.
    if (serving) continue;
    for (const auto& [v, slot] : e.versions) {
      if (!slot.version) {
        out.emplace_back(name, "version " + std::to_string(v) + " " +
                                   std::string(ModelStateName(slot.state)) +
                                   (slot.reason.empty() ? "" : ": " + slot.reason));
      }
    }
  }
  return out;
}

bool ModelManager::Ready() const {
  if (!options_.strict_readiness) return true;
  return NotReady().empty();
}

}  // namespace dais::runtime
