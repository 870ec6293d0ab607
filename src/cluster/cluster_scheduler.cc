#include "cluster/cluster_scheduler.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <set>

#include "cluster/agent_placement.h"
#include "cluster/assignment.h"
#include "cluster/collection_placement.h"
#include "cluster/deployment.h"
#include "cluster/keys.h"
#include "cluster/pending_reason.h"
#include "cluster/scheduler_metrics.h"
#include "cluster/training_job.h"
#include "cluster/version_resolution.h"
#include "common/json.h"
#include "common/logging.h"
#include "placement/fragmentation.h"
#include "placement/policy.h"

namespace dais::cluster {
namespace {

constexpr const char* kLeaderKey = "/dais/scheduler/leader";
constexpr const char* kStatusPrefix = "/dais/status/";

struct LiveNode {
  placement::NodeSpec spec;
  std::map<std::string, std::string> labels;
  RepositoryVersions versions;  // what its repository holds (absent from nodes of older dais)
};

std::optional<LiveNode> ParseNode(const std::string& json) {
  rapidjson::Document d;
  if (!json::ParseJson(json, &d).ok() || !d.IsObject() || !d.HasMember("node")) {
    return std::nullopt;
  }
  LiveNode n;
  n.spec.name = d["node"].IsString() ? d["node"].GetString() : "";
  if (d.HasMember("cpu_milli") && d["cpu_milli"].IsInt64()) {
    n.spec.cpu_milli = d["cpu_milli"].GetInt64();
  }
  if (d.HasMember("memory_mib") && d["memory_mib"].IsInt64()) {
    n.spec.memory_mib = d["memory_mib"].GetInt64();
  }
  if (d.HasMember("gpus") && d["gpus"].IsArray()) {
    for (const auto& g : d["gpus"].GetArray()) {
      if (!g.IsObject() || !g.HasMember("model") || !g["model"].IsString()) continue;
      if (n.spec.gpus == 0) n.spec.gpu_model = g["model"].GetString();
      ++n.spec.gpus;
    }
  }
  if (d.HasMember("labels") && d["labels"].IsObject()) {
    for (const auto& l : d["labels"].GetObject()) {
      if (l.value.IsString()) n.labels[l.name.GetString()] = l.value.GetString();
    }
  }
  if (d.HasMember("versions") && d["versions"].IsObject()) {
    for (const auto& m : d["versions"].GetObject()) {
      if (!m.value.IsArray()) continue;
      std::set<int64_t>& held = n.versions[m.name.GetString()];
      for (const auto& v : m.value.GetArray()) {
        if (v.IsInt64()) held.insert(v.GetInt64());
      }
    }
  }
  return n;
}

std::string Field(const std::string& json, const char* key) {
  rapidjson::Document d;
  if (!json::ParseJson(json, &d).ok() || !d.IsObject() || !d.HasMember(key) || !d[key].IsString()) {
    return "";
  }
  return d[key].GetString();
}

// "<node>/<model>" of a key under `prefix`.
std::pair<std::string, std::string> NodeAndModel(const std::string& key,
                                                 const std::string& prefix) {
  const std::string rest = key.substr(prefix.size());
  const size_t slash = rest.find('/');
  if (slash == std::string::npos) return {"", ""};
  return {rest.substr(0, slash), rest.substr(slash + 1)};
}

// `version`: what the replicas run (-1: the nodes' policy); `latest`: resolved from the nodes'
// repositories rather than pinned by the spec.
std::string StatusJson(int replicas, int assigned, int pending, const std::string& reason,
                       int64_t version, bool latest) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("version");
  w.Int64(version);
  w.Key("version_source");
  w.String(latest ? "latest" : "spec");
  w.Key("replicas");
  w.Int(replicas);
  w.Key("assigned");
  w.Int(assigned);
  w.Key("pending");
  w.Int(pending);
  w.Key("reason");
  w.String(reason.c_str());
  w.EndObject();
  return sb.GetString();
}

}  // namespace

ClusterScheduler::ClusterScheduler(ClusterSchedulerOptions options)
    : options_(std::move(options)), cv_(&mu_) {}

ClusterScheduler::~ClusterScheduler() { Stop(); }

Status ClusterScheduler::Start() {
  if (options_.id.empty()) return InvalidArgument("--id is required");
  if (options_.lease_ttl_secs < 2) return InvalidArgument("--lease-ttl-secs must be at least 2");
  RETURN_IF_ERROR(placement::MakePolicy(options_.policy, {}).status());
  // Every replica exposes the metrics from the start (a standby: leader 0, counters at 0), so an
  // alert on "no leader" sees the standbys' zeros (docs/cluster.md).
  SchedulerMetrics& metrics = SchedulerMetrics::Get();
  metrics.leader.Set(0);
  metrics.placements.Get({options_.policy});
  ASSIGN_OR_RETURN(client_, etcd::Client::Create({options_.etcd_endpoints}));
  Watch(kNodesPrefix, &nodes_);
  Watch("/dais/deployments/", &deployments_);
  Watch(kTrainingsPrefix, &trainings_);
  Watch(kCollectionsPrefix, &collections_);
  Watch(kAgentsPrefix, &agents_);
  Watch(kAssignmentsPrefix, &assignments_);
  Watch(kInstancesPrefix, &instances_);
  Watch(kLeaderKey, &leader_view_);
  Watch(kCordonedPrefix, &cordoned_);
  loop_ = std::thread([this] { Loop(); });
  return OkStatus();
}

void ClusterScheduler::Stop() {
  {
    MutexLock l(&mu_);
    if (stop_) return;
    stop_ = true;
    cv_.SignalAll();
  }
  if (loop_.joinable()) loop_.join();
  watchers_.clear();
  if (leader_revision_ != 0 && client_) {
    (void)client_->RevokeLease(lease_);  // hand over at once
    LOG_INFO("scheduler {}: stepped down", options_.id);
  }
}

void ClusterScheduler::Watch(const std::string& prefix, View* view) {
  etcd::Watcher::Callbacks cb;
  cb.on_snapshot = [this, view](const etcd::RangeResult& r) {
    MutexLock l(&mu_);
    view->kv.clear();
    for (const auto& kv : r.kvs) view->kv[kv.key] = kv.value;
    dirty_ = true;
    cv_.SignalAll();
  };
  cb.on_events = [this, view](const std::vector<etcd::Event>& events) {
    MutexLock l(&mu_);
    for (const auto& e : events) {
      if (e.type == etcd::Event::Type::kPut) {
        view->kv[e.kv.key] = e.kv.value;
      } else {
        view->kv.erase(e.kv.key);
      }
    }
    dirty_ = true;
    cv_.SignalAll();
  };
  watchers_.push_back(std::make_unique<etcd::Watcher>(client_.get(), prefix, std::move(cb)));
}

bool ClusterScheduler::Campaign() {
  auto lease = client_->GrantLease(options_.lease_ttl_secs);
  if (!lease.ok()) return false;
  etcd::Compare absent{kLeaderKey, etcd::Compare::Target::kCreateRevision,
                       etcd::Compare::Op::kEqual, 0, ""};
  auto txn = client_->Txn({absent},
                          {etcd::Op{etcd::Op::Kind::kPut, kLeaderKey, options_.id, *lease, false}});
  if (!txn.ok() || !txn->succeeded) {
    (void)client_->RevokeLease(*lease);
    return false;
  }
  lease_ = *lease;
  leader_revision_ = txn->revision;  // the key was created by this transaction
  leader_revision_shared_.store(leader_revision_);
  SchedulerMetrics::Get().leader.Set(1);
  LOG_INFO("scheduler {}: leader (revision {})", options_.id, leader_revision_);
  pending_events_.push_back(NewEvent("leader", "", "", "became the leader"));
  return true;
}

void ClusterScheduler::Loop() DAIS_NO_THREAD_SAFETY_ANALYSIS {
  const auto period = std::chrono::milliseconds(options_.lease_ttl_secs * 1000 / 3);
  auto next_keepalive = std::chrono::steady_clock::now();
  while (true) {
    bool dirty = false;
    bool leader_key_present = false;
    {
      MutexLock l(&mu_);
      if (stop_) return;
      dirty = dirty_ || retry_;
      dirty_ = false;
      retry_ = false;
      leader_key_present = leader_view_.kv.count(kLeaderKey) > 0;
    }
    if (leader_revision_ == 0 && !leader_key_present && Campaign()) dirty = true;
    if (leader_revision_ != 0 && std::chrono::steady_clock::now() >= next_keepalive) {
      auto ka = client_->KeepAliveOnce(lease_);
      if (ka.status().code() == StatusCode::kNotFound) {
        LOG_WARNING("scheduler {}: lost leadership (lease expired)", options_.id);
        StepDown();
      }
      next_keepalive = std::chrono::steady_clock::now() + period;
    }
    if (leader_revision_ != 0 && dirty && !Reconcile()) {
      LOG_WARNING("scheduler {}: lost leadership (a newer leader holds the key)", options_.id);
      StepDown();
    }
    MutexLock l(&mu_);
    if (!dirty_ && !stop_) cv_.WaitUntil(std::chrono::steady_clock::now() + period);
  }
}

void ClusterScheduler::StepDown() {
  leader_revision_ = 0;
  leader_revision_shared_.store(0);
  pending_events_.clear();
  SchedulerMetrics::Get().leader.Set(0);
}

ClusterEvent ClusterScheduler::NewEvent(std::string kind, std::string deployment, std::string node,
                                        std::string message) const {
  ClusterEvent e;
  e.time_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  e.kind = std::move(kind);
  e.deployment = std::move(deployment);
  e.node = std::move(node);
  e.message = std::move(message);
  e.scheduler = options_.id;
  return e;
}

// What one reconciliation sees and decides.
struct ClusterScheduler::Plan {
  std::map<std::string, std::string> assignments, instances;
  std::vector<placement::NodeSpec> specs;  // live nodes, in name order
  std::vector<std::map<std::string, std::string>> labels;
  std::vector<RepositoryVersions> versions;  // per live node
  std::set<std::string> resolved;            // deployments whose version came from `versions`
  std::map<std::string, int> index;          // node name -> position
  std::map<std::string, DeploymentSpec> wanted;
  std::map<std::string, std::string> training;  // "training:<job>" -> the job's spec (JSON)
  std::map<std::string, std::string> memory;    // "memory:<c>:<shard>" -> the shard's (JSON)
  std::map<std::string, std::string> agent;     // "agent:<name>" -> the agent's spec (JSON)
  std::map<std::string, std::string> cordoned;  // node -> "cordon" | "drain"
  std::unique_ptr<placement::Cluster> cluster;
  std::map<std::string, int> count;  // deployment -> replicas assigned
  // The assignments kept, as applied to `cluster` (preemption may release them).
  struct Kept {
    std::string key, deployment;
    placement::TaskSpec task;
    placement::Placement placement;
    bool removed = false;
  };
  std::vector<Kept> kept;
  std::vector<etcd::Op> ops;
  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();
};

bool ClusterScheduler::Reconcile() DAIS_NO_THREAD_SAFETY_ANALYSIS {
  const auto started = std::chrono::steady_clock::now();
  Plan plan;
  std::map<std::string, std::string> nodes, deployments, trainings, collections, agents;
  {
    MutexLock l(&mu_);
    nodes = nodes_.kv;
    deployments = deployments_.kv;
    trainings = trainings_.kv;
    collections = collections_.kv;
    agents = agents_.kv;
    plan.assignments = assignments_.kv;
    plan.instances = instances_.kv;
    for (const auto& [key, value] : cordoned_.kv) {
      plan.cordoned[key.substr(std::string(kCordonedPrefix).size())] = value;
    }
  }
  for (const auto& [key, json] : nodes) {
    std::optional<LiveNode> n = ParseNode(json);
    if (!n || n->spec.name.empty()) continue;
    plan.index[n->spec.name] = static_cast<int>(plan.specs.size());
    plan.specs.push_back(n->spec);
    plan.labels.push_back(n->labels);
    plan.versions.push_back(std::move(n->versions));
  }
  for (const auto& [key, json] : deployments) {
    auto d = DeploymentFromJson(json);
    if (!d.ok()) {
      // Written around `ctl apply`: not scheduled, and said so (repeats are rate-limited).
      LOG_WARNING("scheduler {}: ignoring the deployment at {}: {}", options_.id, key,
                  d.status().message());
      continue;
    }
    if (d->version < 0) {
      // No `version:`: one version for every replica, from the nodes' repositories; it moves
      // (every replica, in place) only when they change.
      d->version = ResolveLatestVersion(plan.versions, d->model);
      if (d->version >= 0) plan.resolved.insert(d->name);
    }
    plan.wanted[d->name] = std::move(*d);
  }
  // A training job is placed as a one-replica best-effort deployment "training:<job>"; its
  // assignment carries the spec, which the node runs (training_job.h).
  for (const auto& [key, json] : trainings) {
    auto job = ParseTrainingJobYaml(json);
    if (!job.ok()) {
      LOG_WARNING("scheduler {}: ignoring the training job at {}: {}", options_.id, key,
                  job.status().message());
      continue;
    }
    DeploymentSpec d = job->AsDeployment();
    plan.training[d.name] = TrainingJobToJson(*job);
    plan.wanted[d.name] = std::move(d);
  }
  // A collection's shard is a deployment "memory:<c>:<shard>" whose assignments carry the
  // shard's spec; the node holds that shard (collection_placement.h).
  for (const auto& [key, json] : collections) {
    auto c = ParseCollectionPlacement(json);
    if (!c.ok()) {
      LOG_WARNING("scheduler {}: ignoring the collection at {}: {}", options_.id, key,
                  c.status().message());
      continue;
    }
    for (int s = 0; s < c->shards; ++s) {
      DeploymentSpec d = c->ShardDeployment(s);
      plan.memory[d.name] = c->ShardJob(s);
      plan.wanted[d.name] = std::move(d);
    }
  }
  // An agent's runtime is a deployment "agent:<name>" whose assignment carries the agent's spec
  // (agent_placement.h).
  for (const auto& [key, json] : agents) {
    auto d = AgentDeployment(json);
    if (!d.ok()) {
      LOG_WARNING("scheduler {}: ignoring the agent at {}: {}", options_.id, key,
                  d.status().message());
      continue;
    }
    plan.agent[d->name] = json;
    plan.wanted[d->name] = std::move(*d);
  }
  plan.cluster = std::make_unique<placement::Cluster>(plan.specs);
  KeepOrDrop(plan);
  PlaceMissing(plan);
  const bool ok = Write(plan);
  SchedulerMetrics::Get().reconcile.Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  return ok;
}

bool ClusterScheduler::Write(Plan& plan) DAIS_NO_THREAD_SAFETY_ANALYSIS {
  if (plan.ops.empty() && pending_events_.empty()) return true;
  // Events expire with a lease of an hour, replaced every half hour (events.h).
  const auto now = std::chrono::steady_clock::now();
  if (!pending_events_.empty() &&
      (events_lease_ == 0 || now - events_lease_granted_ > std::chrono::minutes(30))) {
    auto lease = client_->GrantLease(3600);
    if (lease.ok()) {
      events_lease_ = *lease;
      events_lease_granted_ = now;
    }
  }
  // One op per key: etcd refuses a transaction naming a key twice (an assignment rewritten,
  // then preempted, in the same round); the last decision is the one that holds.
  std::map<std::string, size_t> last;
  for (size_t i = 0; i < plan.ops.size(); ++i) last[plan.ops[i].key] = i;
  std::vector<etcd::Op> ops;
  for (size_t i = 0; i < plan.ops.size(); ++i) {
    if (last[plan.ops[i].key] == i) ops.push_back(plan.ops[i]);
  }
  if (events_lease_ != 0) {
    for (const ClusterEvent& e : pending_events_) {
      ops.push_back(
          etcd::Op{etcd::Op::Kind::kPut, e.Key(++event_sequence_), e.ToJson(), events_lease_});
    }
  }
  etcd::Compare mine{kLeaderKey, etcd::Compare::Target::kCreateRevision, etcd::Compare::Op::kEqual,
                     leader_revision_, ""};
  auto txn = client_->Txn({mine}, ops);
  pending_events_.clear();  // a decision made again next time is told again
  if (!txn.ok() || !txn->succeeded) status_.clear();  // written again next time
  if (!txn.ok()) {
    // The events lease may be gone (etcd's data lost): a new one next time.
    if (txn.status().code() == StatusCode::kNotFound) events_lease_ = 0;
    retry_ = true;  // etcd away: again after the loop's wait (a third of the TTL), not at once
    return true;
  }
  if (txn->succeeded) {
    // The next reconciliation must see these writes even if their watch events are not in yet;
    // otherwise it would place the same replicas again (and briefly run more than asked).
    MutexLock l(&mu_);
    for (const etcd::Op& op : plan.ops) {
      if (op.key.rfind(kAssignmentsPrefix, 0) != 0) continue;
      if (op.kind == etcd::Op::Kind::kPut) {
        assignments_.kv[op.key] = op.value;
      } else {
        assignments_.kv.erase(op.key);
      }
    }
  }
  return txn->succeeded;
}

void ClusterScheduler::Unassign(Plan& plan, const std::string& key, const std::string& deployment,
                                const std::string& node, const std::string& reason,
                                const std::string& why) {
  LOG_INFO("scheduler {}: unassigning {} from {}: {}", options_.id, deployment, node, why);
  plan.ops.push_back(etcd::Op{etcd::Op::Kind::kDelete, key, "", 0, false});
  plan.assignments.erase(key);
  SchedulerMetrics::Get().unassignments.Get({reason}).Increment();
  const std::string kind = reason == "failed" || reason == "preempted" ? reason : "unassigned";
  pending_events_.push_back(NewEvent(kind, deployment, node, why));
}

void ClusterScheduler::KeepOrDrop(Plan& plan) {
  for (const auto& [key, json] : std::map<std::string, std::string>(plan.assignments)) {
    const auto [node, model] = NodeAndModel(key, kAssignmentsPrefix);
    const auto assignment = AssignmentFromJson(json);
    const std::string name = assignment.ok() ? assignment->deployment : "";
    auto d = plan.wanted.find(name);
    auto n = plan.index.find(node);
    const std::string& instance = plan.instances[InstancesPrefix(node) + model];
    std::string why, reason;
    if (n == plan.index.end()) {
      why = "node " + node + " left the cluster";
      reason = "node_left";
    } else if (auto c = plan.cordoned.find(node);
               c != plan.cordoned.end() && c->second == "drain") {
      why = "node " + node + " is being drained";
      reason = "drain";
    } else if (d == plan.wanted.end()) {
      why = "deployment " + name + " was deleted";
      reason = "deleted";
    } else if (plan.count[name] >= d->second.replicas) {
      why = "more than " + std::to_string(d->second.replicas) + " replicas";
      reason = "scaled_down";
    } else if (Field(instance, "state") == "FAILED") {
      Backoff& b = avoid_[name + "@" + node];
      b.length =
          std::min(std::max(b.length * 2, std::chrono::seconds(10)), std::chrono::seconds(300));
      b.until = plan.now + b.length;
      why = "it failed on " + node + " (" + Field(instance, "reason") +
            "); that node is avoided for " + std::to_string(b.length.count()) + " s";
      reason = "failed";
    }
    if (!why.empty()) {
      Unassign(plan, key, name, node, reason, why);
      continue;
    }
    placement::TaskSpec task = d->second.Task();
    task.max_per_node = -1;
    // The GPUs the assignment names, unless they no longer hold (then packed again); the
    // assignment is rewritten when that or the deployment's version or priority changed (the
    // node loads the new version in place).
    placement::Placement p{n->second, assignment->gpus};
    if (!plan.cluster->CheckPlacement(task, p).empty()) {
      p.gpus = placement::PackedGpus(plan.cluster->node(n->second), task);
    }
    if (!plan.cluster->CheckPlacement(task, p).empty()) {
      // Its deployment now asks for more than the node has left: placed again, elsewhere if
      // need be (counting it here would leave its real use out of the model).
      Unassign(plan, key, name, node, "resized",
               "it no longer fits on " + node + " (the deployment's resources changed)");
      continue;
    }
    Assignment now = *assignment;
    now.training = plan.training.count(name) ? plan.training[name] : "";
    now.memory = plan.memory.count(name) ? plan.memory[name] : "";
    now.agent = plan.agent.count(name) ? plan.agent[name] : "";
    now.version = d->second.version;
    now.priority = d->second.priority;
    now.gpus = p.gpus;
    if (now.ToJson() != json) {
      plan.ops.push_back(etcd::Op{etcd::Op::Kind::kPut, key, now.ToJson(), 0, false});
      plan.assignments[key] = now.ToJson();
      if (now.version != assignment->version) {
        pending_events_.push_back(NewEvent("version", name, node,
                                           "version " + std::to_string(assignment->version) +
                                               " -> " + std::to_string(now.version)));
      }
    }
    plan.cluster->Apply(task, p);
    plan.kept.push_back({key, name, task, p});
    ++plan.count[name];
  }
}

// Sets NodeState::excluded for the nodes that must not take an instance of `d`; `why` gets the
// reason per node (empty where the node is not excluded).
void ClusterScheduler::Exclude(Plan& plan, const DeploymentSpec& d, std::vector<std::string>* why) {
  why->assign(plan.specs.size(), "");
  for (size_t i = 0; i < plan.specs.size(); ++i) {
    std::string& w = (*why)[i];
    for (const auto& [k, v] : d.node_labels) {
      auto it = plan.labels[i].find(k);
      if (w.empty() && (it == plan.labels[i].end() || it->second != v)) {
        w = "without the label " + k + "=" + v;
      }
    }
    auto b = avoid_.find(d.name + "@" + plan.specs[i].name);
    if (w.empty() && b != avoid_.end() && b->second.until > plan.now) {
      w = "avoided after a failure of this deployment";
    }
    if (w.empty() && plan.cordoned.count(plan.specs[i].name)) w = "cordoned";
    // One instance of a model per node (the assignment's key), whatever its deployment.
    if (w.empty() && plan.assignments.count(AssignmentsPrefix(plan.specs[i].name) + d.model)) {
      w = "already running " + d.model;
    }
    plan.cluster->SetExcluded(static_cast<int>(i), !w.empty());
  }
}

std::optional<placement::Placement> ClusterScheduler::Preempt(Plan& plan, const DeploymentSpec& d,
                                                              const placement::TaskSpec& task) {
  // Per node: release best-effort instances, largest first, until the task fits; the node that
  // needs the fewest (then the least GPU capacity) is chosen. Everything is applied back after
  // each try; only the chosen node's victims go.
  int best_node = -1;
  std::vector<size_t> best_victims;
  int64_t best_freed = 0;
  for (size_t i = 0; i < plan.specs.size(); ++i) {
    if (plan.cluster->node(static_cast<int>(i)).excluded) continue;
    std::vector<size_t> candidates;
    for (size_t k = 0; k < plan.kept.size(); ++k) {
      const Plan::Kept& kept = plan.kept[k];
      auto w = plan.wanted.find(kept.deployment);
      if (!kept.removed && kept.placement.node == static_cast<int>(i) && w != plan.wanted.end() &&
          w->second.priority == "best-effort") {
        candidates.push_back(k);
      }
    }
    std::sort(candidates.begin(), candidates.end(), [&plan](size_t a, size_t b) {
      return plan.kept[a].task.GpuDemandMilli() > plan.kept[b].task.GpuDemandMilli();
    });
    std::vector<size_t> victims;
    int64_t freed = 0;
    for (size_t k : candidates) {
      if (plan.cluster->node(static_cast<int>(i)).Fits(task)) break;
      plan.cluster->Release(plan.kept[k].task, plan.kept[k].placement);
      victims.push_back(k);
      freed += plan.kept[k].task.GpuDemandMilli();
    }
    const bool fits = !victims.empty() && plan.cluster->node(static_cast<int>(i)).Fits(task);
    for (size_t k : victims) plan.cluster->Apply(plan.kept[k].task, plan.kept[k].placement);
    if (fits && (best_node < 0 || victims.size() < best_victims.size() ||
                 (victims.size() == best_victims.size() && freed < best_freed))) {
      best_node = static_cast<int>(i);
      best_victims = victims;
      best_freed = freed;
    }
  }
  if (best_node < 0) return std::nullopt;
  const std::string& node = plan.specs[static_cast<size_t>(best_node)].name;
  for (size_t k : best_victims) {
    Plan::Kept& victim = plan.kept[k];
    plan.cluster->Release(victim.task, victim.placement);
    victim.removed = true;
    --plan.count[victim.deployment];
    Unassign(plan, victim.key, victim.deployment, node, "preempted",
             "preempted by " + d.name + " (latency-sensitive)");
    SchedulerMetrics::Get().preemptions.Increment();
  }
  return placement::Placement{best_node,
                              placement::PackedGpus(plan.cluster->node(best_node), task)};
}

void ClusterScheduler::PlaceMissing(Plan& plan) {
  std::vector<placement::TaskSpec> expected;  // FGD's workload: the deployments' instances
  for (const auto& [name, d] : plan.wanted) {
    for (int i = 0; i < d.replicas; ++i) expected.push_back(d.Task());
  }
  const placement::Workload workload = placement::Workload::FromTasks(expected, 1.0);
  auto policy = placement::MakePolicy(options_.policy, workload);
  // Latency-sensitive deployments first: they take the room, and may preempt best-effort ones.
  std::vector<const DeploymentSpec*> order;
  for (const auto& [name, d] : plan.wanted) order.push_back(&d);
  std::stable_sort(
      order.begin(), order.end(), [](const DeploymentSpec* a, const DeploymentSpec* b) {
        return a->priority == "latency-sensitive" && b->priority != "latency-sensitive";
      });
  SchedulerMetrics& metrics = SchedulerMetrics::Get();
  int pending = 0;
  for (const DeploymentSpec* d : order) {
    const std::string& name = d->name;
    std::string reason;
    int missing = d->replicas - plan.count[name];
    std::vector<std::string> excluded_why;
    for (; missing > 0; --missing) {
      Exclude(plan, *d, &excluded_why);
      const placement::TaskSpec task = d->Task();
      const auto started = std::chrono::steady_clock::now();
      std::optional<placement::Placement> p = (*policy)->Place(*plan.cluster, task);
      metrics.decision.Observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      if (!p && d->may_preempt) p = Preempt(plan, *d, task);
      if (!p) {
        const Unplaceable u = ExplainUnplaceable(*plan.cluster, task, &excluded_why);
        reason = u.message;
        metrics.failures.Get({u.reason}).Increment();
        break;
      }
      const std::string node = plan.specs[static_cast<size_t>(p->node)].name;
      plan.cluster->Apply(task, *p);
      Assignment a{name, d->model, d->version, p->gpus, task.gpu_milli, d->priority, "", "", ""};
      if (auto t = plan.training.find(name); t != plan.training.end()) a.training = t->second;
      if (auto m = plan.memory.find(name); m != plan.memory.end()) a.memory = m->second;
      if (auto g = plan.agent.find(name); g != plan.agent.end()) a.agent = g->second;
      const std::string key = AssignmentsPrefix(node) + d->model;
      plan.assignments[key] = a.ToJson();
      plan.kept.push_back({key, name, task, *p});
      plan.ops.push_back(etcd::Op{etcd::Op::Kind::kPut, key, a.ToJson(), 0, false});
      metrics.placements.Get({options_.policy}).Increment();
      std::string where = node;
      if (!p->gpus.empty()) {
        where += " GPU";
        for (int g : p->gpus) where += " " + std::to_string(g);
      }
      LOG_INFO("scheduler {}: placed {} ({}) on {} ({} policy)", options_.id, name, d->model, where,
               options_.policy);
      pending_events_.push_back(NewEvent(
          "placed", name, node, "placed on " + where + " by the " + options_.policy + " policy"));
    }
    for (size_t i = 0; i < plan.specs.size(); ++i) {
      plan.cluster->SetExcluded(static_cast<int>(i), false);
    }
    pending += missing;
    const std::string status = StatusJson(d->replicas, d->replicas - missing, missing, reason,
                                          d->version, plan.resolved.count(name) > 0);
    if (status_[name] == status) continue;
    if (missing > 0) {
      LOG_WARNING("scheduler {}: {} has {} pending instance(s): {}", options_.id, name, missing,
                  reason);
      pending_events_.push_back(NewEvent(
          "pending", name, "", std::to_string(missing) + " instance(s) pending: " + reason));
    }
    plan.ops.push_back(etcd::Op{etcd::Op::Kind::kPut, kStatusPrefix + name, status, 0, false});
    status_[name] = status;
  }
  metrics.pending.Set(pending);
  metrics.unallocated_gpus.Set(static_cast<double>(plan.cluster->gpu_capacity_milli() -
                                                   plan.cluster->gpu_allocated_milli()) /
                               placement::kGpuMilli);
  metrics.fragmented_gpus.Set(placement::ClusterFragmentation(*plan.cluster, workload) /
                              placement::kGpuMilli);
}

}  // namespace dais::cluster
