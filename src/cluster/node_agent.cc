#include "cluster/node_agent.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <chrono>
#include <set>

#include "cluster/assignment.h"
#include "cluster/keys.h"
#include "common/logging.h"
#include "runtime/repository.h"

namespace dais::cluster {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void Str(Writer& w, const std::string& s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

// What the repositories hold now: model -> versions (empty when they cannot be read: the node
// then reports nothing, and the scheduler leaves the version to the node's policy).
RepositoryVersions ScanVersions(const std::vector<std::string>& repositories) {
  RepositoryVersions out;
  if (repositories.empty()) return out;
  auto models = runtime::ListModels(repositories);
  if (!models.ok()) return out;
  for (const std::string& name : *models) {
    auto source = runtime::ScanModel(repositories, name);
    if (!source.ok()) continue;
    for (const auto& [version, fingerprint] : source->versions) out[name].insert(version);
  }
  return out;
}

std::string NodeJson(const NodeAgentOptions& o, const RepositoryVersions& versions) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("node");
  Str(w, o.node_id);
  w.Key("http");
  Str(w, o.http_endpoint);
  w.Key("grpc");
  Str(w, o.grpc_endpoint);
  if (!o.metrics_endpoint.empty()) {
    w.Key("metrics");
    Str(w, o.metrics_endpoint);
  }
  w.Key("cpu_milli");
  w.Int64(o.capacity.cpu_milli);
  w.Key("memory_mib");
  w.Int64(o.capacity.memory_mib);
  w.Key("gpus");
  w.StartArray();
  for (const Gpu& g : o.capacity.gpus) {
    w.StartObject();
    w.Key("model");
    Str(w, g.model);
    w.Key("memory_mib");
    w.Int64(g.memory_mib);
    w.EndObject();
  }
  w.EndArray();
  w.Key("labels");
  w.StartObject();
  for (const auto& [k, v] : o.capacity.labels) {
    Str(w, k);
    Str(w, v);
  }
  w.EndObject();
  w.Key("versions");
  w.StartObject();
  for (const auto& [model, held] : versions) {
    Str(w, model);
    w.StartArray();
    for (int64_t v : held) w.Int64(v);
    w.EndArray();
  }
  w.EndObject();
  w.EndObject();
  return sb.GetString();
}

// /dais/instances/<node>/<name>: a model instance's state, or a job's (training_job.h).
std::string StateJson(const std::string& node, const std::string& name, const std::string& version,
                      const std::string& state, const std::string& reason,
                      const std::vector<int>& gpus) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("node");
  Str(w, node);
  w.Key("model");
  Str(w, name);
  w.Key("version");
  Str(w, version);
  w.Key("state");
  Str(w, state);
  w.Key("reason");
  Str(w, reason);
  w.Key("gpus");
  w.StartArray();
  for (int g : gpus) w.Int(g);
  w.EndArray();
  w.EndObject();
  return sb.GetString();
}

std::string InstanceJson(const std::string& node, const runtime::IndexEntry& e,
                         const std::vector<int>& gpus) {
  // The cluster's words: LOADING, READY, FAILED (a load that did not succeed), UNLOADED.
  std::string state(runtime::ModelStateName(e.state));
  if (state == "UNAVAILABLE") state = e.reason == "unloaded" ? "UNLOADED" : "FAILED";
  return StateJson(node, e.name, e.version, state, e.reason, gpus);
}

std::string JobJson(const std::string& node, const std::string& name,
                    const AssignedJob::State& state) {
  return StateJson(node, name, "", state.state, state.reason, {});
}

std::string ModelOfKey(const std::string& key, const std::string& prefix) {
  return key.size() > prefix.size() ? key.substr(prefix.size()) : "";
}

}  // namespace

NodeAgent::NodeAgent(NodeAgentOptions options, runtime::ModelManager* manager)
    : options_(std::move(options)), manager_(manager), cv_(&mu_) {}

NodeAgent::~NodeAgent() { Stop(/*leave=*/false); }

Status NodeAgent::Start() {
  if (options_.node_id.empty()) return InvalidArgument("--node-id is required");
  if (options_.lease_ttl_secs < 2) return InvalidArgument("--lease-ttl-secs must be at least 2");
  if (manager_->mode() != runtime::ModelControlMode::kExplicit) {
    return InvalidArgument("a node loads what the scheduler assigns: explicit model control");
  }
  ASSIGN_OR_RETURN(client_, etcd::Client::Create({options_.etcd_endpoints}));
  registration_ = std::thread([this] { RegistrationLoop(); });
  reconcile_ = std::thread([this] { ReconcileLoop(); });
  etcd::Watcher::Callbacks cb;
  cb.on_snapshot = [this](const etcd::RangeResult& r) { OnAssignments({}, &r); };
  cb.on_events = [this](const std::vector<etcd::Event>& e) { OnAssignments(e, nullptr); };
  watcher_ = std::make_unique<etcd::Watcher>(client_.get(), AssignmentsPrefix(options_.node_id),
                                             std::move(cb));
  return OkStatus();
}

void NodeAgent::Stop(bool leave) {
  {
    MutexLock l(&mu_);
    if (stop_ && !registration_.joinable()) return;
    stop_ = true;
    cv_.SignalAll();
  }
  watcher_.reset();
  if (registration_.joinable()) registration_.join();
  if (reconcile_.joinable()) reconcile_.join();
  int64_t lease = 0;
  std::map<std::string, std::shared_ptr<AssignedJob>> jobs;
  {
    MutexLock l(&mu_);
    lease = lease_;
    jobs.swap(jobs_);
  }
  jobs.clear();  // each waits for what it started
  if (leave && lease != 0 && client_) {
    if (Status s = client_->RevokeLease(lease); !s.ok()) {
      LOG_WARNING("node {}: could not leave the cluster now ({}); its entry expires with the lease",
                  options_.node_id, s.message());
    } else {
      LOG_INFO("node {}: left the cluster", options_.node_id);
    }
  }
}

Status NodeAgent::Register() {
  ASSIGN_OR_RETURN(int64_t lease, client_->GrantLease(options_.lease_ttl_secs));
  RepositoryVersions versions = ScanVersions(options_.repositories);
  RETURN_IF_ERROR(
      client_->Put(NodeKey(options_.node_id), NodeJson(options_, versions), lease).status());
  registered_versions_ = std::move(versions);
  MutexLock l(&mu_);
  lease_ = lease;
  published_.clear();  // the instances go again, under the new lease
  return OkStatus();
}

// Renews the lease every third of its TTL, registers again when it was lost, publishes instance
// states that changed.
void NodeAgent::RegistrationLoop() DAIS_NO_THREAD_SAFETY_ANALYSIS {
  const auto period = std::chrono::milliseconds(options_.lease_ttl_secs * 1000 / 3);
  auto backoff = std::chrono::milliseconds(200);
  auto next_keepalive = std::chrono::steady_clock::now();
  bool warned = false;
  while (true) {
    int64_t lease = 0;
    {
      MutexLock l(&mu_);
      if (stop_) return;
      lease = lease_;
    }
    Status s;
    const auto now = std::chrono::steady_clock::now();
    if (lease == 0 || now >= next_keepalive) {
      s = lease == 0 ? Register() : client_->KeepAliveOnce(lease).status();
      next_keepalive = now + (s.ok() ? period : backoff);
    }
    if (s.code() == StatusCode::kNotFound) {
      LOG_WARNING(
          "node {}: its lease expired (etcd was unreachable longer than {} s): registering "
          "again",
          options_.node_id, options_.lease_ttl_secs);
      MutexLock l(&mu_);
      lease_ = 0;
      continue;
    }
    if (!s.ok()) {
      if (!warned) {
        LOG_WARNING("node {}: etcd unreachable ({}); serving on, retrying", options_.node_id,
                    s.message());
      }
      warned = true;
      backoff = std::min(backoff * 2, period);
    } else {
      if (warned || lease == 0) {
        LOG_INFO("node {}: registered in etcd ({})", options_.node_id,
                 options_.etcd_endpoints.front());
      }
      warned = false;
      backoff = std::chrono::milliseconds(200);
      RepublishIfRepositoryChanged(lease);
      Publish();  // only what changed is written
    }
    // Woken early when a load finished (its state is published at once).
    MutexLock l(&mu_);
    if (!stop_) cv_.WaitUntil(next_keepalive);
  }
}

// A repository change (a version added or removed) is told to the scheduler by rewriting the
// registration under the same lease. Runs on the registration thread, as Register does.
void NodeAgent::RepublishIfRepositoryChanged(int64_t lease) {
  if (lease == 0) return;
  RepositoryVersions now = ScanVersions(options_.repositories);
  if (now == registered_versions_) return;
  if (client_->Put(NodeKey(options_.node_id), NodeJson(options_, now), lease).ok()) {
    LOG_INFO("node {}: the repository changed; its versions are published again", options_.node_id);
    registered_versions_ = std::move(now);
  }
}

void NodeAgent::Publish() {
  int64_t lease = 0;
  std::map<std::string, Assignment> models;
  std::map<std::string, std::string> published;
  std::map<std::string, std::string> failed;
  std::map<std::string, std::shared_ptr<AssignedJob>> jobs;
  {
    MutexLock l(&mu_);
    lease = lease_;
    models = desired_;
    published = published_;
    failed = failed_;
    jobs = jobs_;
  }
  if (lease == 0) return;
  std::map<std::string, std::string> now;
  for (const auto& [name, job] : jobs) {
    if (!models.count(name)) continue;
    now[name] = JobJson(options_.node_id, name, job->Current());
  }
  for (const auto& [model, reason] : failed) {
    if (!models.count(model)) continue;
    runtime::IndexEntry e;
    e.name = model;
    e.state = runtime::ModelState::kUnavailable;
    e.reason = reason;
    now[model] = InstanceJson(options_.node_id, e, models[model].gpus);
  }
  for (const runtime::IndexEntry& e : manager_->Index(/*ready_only=*/false)) {
    auto assigned = models.find(e.name);
    if (assigned == models.end() && !published.count(e.name)) continue;
    if (assigned == models.end() && e.state != runtime::ModelState::kReady &&
        e.state != runtime::ModelState::kLoading) {
      continue;  // unassigned and gone: its key is deleted below
    }
    // While a pinned version replaces another, the other is not what the scheduler asked for.
    if (assigned != models.end() && assigned->second.version >= 0 && !e.version.empty() &&
        e.version != std::to_string(assigned->second.version)) {
      continue;
    }
    runtime::IndexEntry shown = e;
    if (assigned != models.end() && e.state == runtime::ModelState::kUnavailable &&
        e.reason == "unloaded") {
      shown.state = runtime::ModelState::kLoading;  // assigned, its load not started yet
      shown.reason = "waiting to load";
    }
    now[e.name] =
        InstanceJson(options_.node_id, shown,
                     assigned != models.end() ? assigned->second.gpus : std::vector<int>{});
  }
  const std::string prefix = InstancesPrefix(options_.node_id);
  for (const auto& [model, json] : now) {
    auto it = published.find(model);
    if (it != published.end() && it->second == json) continue;
    if (!client_->Put(prefix + model, json, lease).ok()) return;  // next round
    published[model] = json;
  }
  for (auto it = published.begin(); it != published.end();) {
    if (now.count(it->first)) {
      ++it;
      continue;
    }
    if (!client_->Delete(prefix + it->first).ok()) return;
    it = published.erase(it);
  }
  MutexLock l(&mu_);
  if (lease_ == lease) published_ = std::move(published);
}

void NodeAgent::OnAssignments(const std::vector<etcd::Event>& events,
                              const etcd::RangeResult* snapshot) {
  const std::string prefix = AssignmentsPrefix(options_.node_id);
  auto parse = [this](const std::string& model, const std::string& json) {
    auto a = AssignmentFromJson(json);
    if (!a.ok()) {
      LOG_WARNING("node {}: ignoring the assignment of '{}': {}", options_.node_id, model,
                  a.status().message());
      Assignment unreadable;
      unreadable.model = model;
      return unreadable;
    }
    return *a;
  };
  MutexLock l(&mu_);
  if (snapshot != nullptr) {
    desired_.clear();
    for (const auto& kv : snapshot->kvs) {
      const std::string model = ModelOfKey(kv.key, prefix);
      desired_[model] = parse(model, kv.value);
    }
  }
  for (const etcd::Event& e : events) {
    const std::string model = ModelOfKey(e.kv.key, prefix);
    if (e.type == etcd::Event::Type::kPut) {
      desired_[model] = parse(model, e.kv.value);
    } else {
      desired_.erase(model);
    }
  }
  desired_.erase("");
  desired_changed_ = true;
  cv_.SignalAll();
}

// Loads what is assigned and not loaded, unloads what is loaded and no longer assigned, one at
// a time (a load can take minutes; the watch and the lease do not wait for it).
void NodeAgent::ReconcileLoop() DAIS_NO_THREAD_SAFETY_ANALYSIS {
  std::map<std::string, int64_t> held;  // models this agent loaded -> version asked (-1: policy)
  std::map<std::string, std::string> held_jobs;  // jobs running -> their spec
  while (true) {
    std::map<std::string, Assignment> desired;
    {
      MutexLock l(&mu_);
      while (!stop_ && !desired_changed_) cv_.Wait();
      if (stop_) return;
      desired_changed_ = false;
      desired = desired_;
    }
    ReconcileJobs(desired, &held_jobs);
    for (const auto& [model, assignment] : desired) {
      if (assignment.IsJob()) continue;  // a job (ReconcileJobs)
      auto h = held.find(model);
      if (h != held.end() && h->second == assignment.version) continue;
      const std::string which =
          assignment.version >= 0 ? "version " + std::to_string(assignment.version) : "";
      LOG_INFO("node {}: assigned '{}' {}: loading", options_.node_id, model, which);
      held[model] = assignment.version;
      Status s = manager_->LoadModel(model, assignment.version);
      if (!s.ok()) {
        LOG_WARNING("node {}: '{}' failed to load: {}", options_.node_id, model, s.message());
      }
      {
        MutexLock l(&mu_);
        if (s.ok()) {
          failed_.erase(model);
        } else {
          failed_[model] = s.message();
        }
        cv_.SignalAll();  // publish the new state soon
        if (stop_) return;
      }
    }
    for (auto it = held.begin(); it != held.end();) {
      if (auto d = desired.find(it->first); d != desired.end() && !d->second.IsJob()) {
        ++it;
        continue;
      }
      LOG_INFO("node {}: '{}' no longer assigned: unloading", options_.node_id, it->first);
      if (Status s = manager_->UnloadModel(it->first); !s.ok()) {
        LOG_WARNING("node {}: unloading '{}': {}", options_.node_id, it->first, s.message());
      }
      {
        MutexLock l(&mu_);
        failed_.erase(it->first);
      }
      it = held.erase(it);
    }
  }
}

}  // namespace dais::cluster

namespace dais::cluster {

void NodeAgent::ReconcileJobs(const std::map<std::string, Assignment>& desired,
                              std::map<std::string, std::string>* held) {
  auto stop = [this](const std::string& name) {
    std::shared_ptr<AssignedJob> job;
    {
      MutexLock l(&mu_);
      auto it = jobs_.find(name);
      if (it == jobs_.end()) return;
      job = std::move(it->second);
      jobs_.erase(it);
    }
    job.reset();  // outside the lock: it waits for what the job started
  };
  for (auto it = held->begin(); it != held->end();) {
    auto d = desired.find(it->first);
    if (d != desired.end() && d->second.JobSpec() == it->second) {
      ++it;
      continue;
    }
    LOG_INFO("node {}: job '{}' {}: stopping it", options_.node_id, it->first,
             d == desired.end() ? "no longer assigned" : "changed");
    stop(it->first);
    {
      MutexLock l(&mu_);
      failed_.erase(it->first);
    }
    it = held->erase(it);
  }
  for (const auto& [name, assignment] : desired) {
    if (!assignment.IsJob() || held->count(name)) continue;
    (*held)[name] = assignment.JobSpec();
    LOG_INFO("node {}: assigned job '{}': starting it", options_.node_id, name);
    StatusOr<std::unique_ptr<AssignedJob>> job = options_.jobs
                                                     ? options_.jobs(assignment,
                                                                     [this] {
                                                                       MutexLock l(&mu_);
                                                                       cv_.SignalAll();
                                                                     })
                                                     : FailedPrecondition("this node runs no jobs");
    MutexLock l(&mu_);
    if (job.ok()) {
      jobs_[name] = std::move(*job);
      failed_.erase(name);
    } else {
      LOG_WARNING("node {}: job '{}' cannot run: {}", options_.node_id, name,
                  job.status().message());
      failed_[name] = job.status().message();
    }
    cv_.SignalAll();
  }
}

}  // namespace dais::cluster
