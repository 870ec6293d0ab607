#include "cluster/cluster_scheduler.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <set>

#include "cluster/deployment.h"
#include "cluster/keys.h"
#include "common/json.h"
#include "common/logging.h"
#include "scheduler/policy.h"

namespace dais::cluster {
namespace {

constexpr const char* kLeaderKey = "/dais/scheduler/leader";
constexpr const char* kStatusPrefix = "/dais/status/";

struct LiveNode {
  scheduler::NodeSpec spec;
  std::map<std::string, std::string> labels;
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

std::string StatusJson(int replicas, int assigned, int pending, const std::string& reason) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
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

std::string AssignmentJson(const DeploymentSpec& d) {
  return "{\"deployment\":\"" + d.name + "\",\"model\":\"" + d.model +
         "\",\"version\":" + std::to_string(d.version) + "}";
}

// Why `task` fits on no node: the nodes counted by the first thing they lack.
std::string PendingReason(const scheduler::Cluster& c, const scheduler::TaskSpec& task) {
  int excluded = 0, cpu = 0, memory = 0, model = 0, gpus = 0, spread = 0;
  int largest_free = 0;
  for (const scheduler::NodeState& n : c.nodes()) {
    if (task.num_gpu > 0 && n.ModelAllowed(task)) {
      largest_free = std::max(largest_free, n.GpusWithFree(task.gpu_milli));
    }
    if (n.excluded) {
      ++excluded;
    } else if (task.cpu_milli > n.cpu_free) {
      ++cpu;
    } else if (task.memory_mib > n.memory_free) {
      ++memory;
    } else if (task.num_gpu > 0 && !n.ModelAllowed(task)) {
      ++model;
    } else if (task.num_gpu > 0 && n.GpusWithFree(task.gpu_milli) < task.num_gpu) {
      ++gpus;
    } else {
      ++spread;
    }
  }
  std::string r = "no node fits one instance (" + std::to_string(c.nodes().size()) + " nodes:";
  auto add = [&r](int n, const std::string& what) {
    if (n > 0) r += " " + std::to_string(n) + " " + what + ";";
  };
  add(excluded, "cordoned, or excluded by labels or a recent failure");
  add(cpu, "without the CPU");
  add(memory, "without the memory");
  add(model, "without an allowed GPU model");
  if (gpus > 0) {
    r += " " + std::to_string(gpus) + " without " + std::to_string(task.num_gpu) + " free GPU(s)" +
         (task.gpu_milli < scheduler::kGpuMilli
              ? " with " + std::to_string(task.gpu_milli) + " milli"
              : "") +
         " (largest free: " + std::to_string(largest_free) + ");";
  }
  add(spread, "already running one of this model or deployment");
  if (r.back() == ';') r.pop_back();
  return r + ")";
}

}  // namespace

ClusterScheduler::ClusterScheduler(ClusterSchedulerOptions options)
    : options_(std::move(options)), cv_(&mu_) {}

ClusterScheduler::~ClusterScheduler() { Stop(); }

Status ClusterScheduler::Start() {
  if (options_.id.empty()) return InvalidArgument("--id is required");
  if (options_.lease_ttl_secs < 2) return InvalidArgument("--lease-ttl-secs must be at least 2");
  RETURN_IF_ERROR(scheduler::MakePolicy(options_.policy, {}).status());
  ASSIGN_OR_RETURN(client_, etcd::Client::Create({options_.etcd_endpoints}));
  Watch(kNodesPrefix, &nodes_);
  Watch("/dais/deployments/", &deployments_);
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
  LOG_INFO("scheduler {}: leader (revision {})", options_.id, leader_revision_);
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
        leader_revision_ = 0;
      }
      next_keepalive = std::chrono::steady_clock::now() + period;
    }
    if (leader_revision_ != 0 && dirty && !Reconcile()) {
      LOG_WARNING("scheduler {}: lost leadership (a newer leader holds the key)", options_.id);
      leader_revision_ = 0;
    }
    MutexLock l(&mu_);
    if (!dirty_ && !stop_) cv_.WaitUntil(std::chrono::steady_clock::now() + period);
  }
}

// What one reconciliation sees and decides.
struct ClusterScheduler::Plan {
  std::map<std::string, std::string> assignments, instances;
  std::vector<scheduler::NodeSpec> specs;  // live nodes, in name order
  std::vector<std::map<std::string, std::string>> labels;
  std::map<std::string, int> index;  // node name -> position
  std::map<std::string, DeploymentSpec> wanted;
  std::map<std::string, std::string> cordoned;  // node -> "cordon" | "drain"
  std::unique_ptr<scheduler::Cluster> cluster;
  std::map<std::string, int> count;  // deployment -> replicas assigned
  std::vector<etcd::Op> ops;
  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();
};

bool ClusterScheduler::Reconcile() DAIS_NO_THREAD_SAFETY_ANALYSIS {
  Plan plan;
  std::map<std::string, std::string> nodes, deployments;
  {
    MutexLock l(&mu_);
    nodes = nodes_.kv;
    deployments = deployments_.kv;
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
  }
  for (const auto& [key, json] : deployments) {
    auto d = DeploymentFromJson(json);
    if (d.ok()) plan.wanted[d->name] = std::move(*d);
  }
  plan.cluster = std::make_unique<scheduler::Cluster>(plan.specs);
  KeepOrDrop(plan);
  PlaceMissing(plan);
  if (plan.ops.empty()) return true;
  etcd::Compare mine{kLeaderKey, etcd::Compare::Target::kCreateRevision, etcd::Compare::Op::kEqual,
                     leader_revision_, ""};
  auto txn = client_->Txn({mine}, plan.ops);
  if (!txn.ok() || !txn->succeeded) status_.clear();  // written again next time
  if (!txn.ok()) {
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

void ClusterScheduler::KeepOrDrop(Plan& plan) {
  for (const auto& [key, json] : plan.assignments) {
    const auto [node, model] = NodeAndModel(key, kAssignmentsPrefix);
    const std::string name = Field(json, "deployment");
    auto d = plan.wanted.find(name);
    auto n = plan.index.find(node);
    const std::string& instance = plan.instances[InstancesPrefix(node) + model];
    std::string why;
    if (n == plan.index.end()) {
      why = "node " + node + " left the cluster";
    } else if (auto c = plan.cordoned.find(node);
               c != plan.cordoned.end() && c->second == "drain") {
      why = "node " + node + " is being drained";
    } else if (d == plan.wanted.end()) {
      why = "deployment " + name + " was deleted";
    } else if (plan.count[name] >= d->second.replicas) {
      why = "more than " + std::to_string(d->second.replicas) + " replicas";
    } else if (Field(instance, "state") == "FAILED") {
      Backoff& b = avoid_[name + "@" + node];
      b.length =
          std::min(std::max(b.length * 2, std::chrono::seconds(10)), std::chrono::seconds(300));
      b.until = plan.now + b.length;
      why = "it failed on " + node + " (" + Field(instance, "reason") +
            "); that node is avoided for " + std::to_string(b.length.count()) + " s";
    }
    if (!why.empty()) {
      LOG_INFO("scheduler {}: unassigning {} from {}: {}", options_.id, name, node, why);
      plan.ops.push_back(etcd::Op{etcd::Op::Kind::kDelete, key, "", 0, false});
      continue;
    }
    scheduler::TaskSpec task = d->second.Task();
    task.max_per_node = -1;
    scheduler::Placement p{n->second, scheduler::PackedGpus(plan.cluster->node(n->second), task)};
    if (plan.cluster->CheckPlacement(task, p).empty()) plan.cluster->Apply(task, p);
    ++plan.count[name];
  }
}

void ClusterScheduler::PlaceMissing(Plan& plan) {
  std::vector<scheduler::TaskSpec> expected;  // FGD's workload: the deployments' instances
  for (const auto& [name, d] : plan.wanted) {
    for (int i = 0; i < d.replicas; ++i) expected.push_back(d.Task());
  }
  auto policy =
      scheduler::MakePolicy(options_.policy, scheduler::Workload::FromTasks(expected, 1.0));
  for (const auto& [name, d] : plan.wanted) {
    std::string reason;
    int missing = d.replicas - plan.count[name];
    for (; missing > 0; --missing) {
      for (size_t i = 0; i < plan.specs.size(); ++i) {
        bool ok = true;
        for (const auto& [k, v] : d.node_labels) {
          auto it = plan.labels[i].find(k);
          ok = ok && it != plan.labels[i].end() && it->second == v;
        }
        auto b = avoid_.find(name + "@" + plan.specs[i].name);
        if (b != avoid_.end() && b->second.until > plan.now) ok = false;
        if (plan.cordoned.count(plan.specs[i].name)) ok = false;
        // One instance of a model per node (the assignment's key), whatever its deployment.
        if (plan.assignments.count(AssignmentsPrefix(plan.specs[i].name) + d.model)) ok = false;
        plan.cluster->SetExcluded(static_cast<int>(i), !ok);
      }
      const scheduler::TaskSpec task = d.Task();
      std::optional<scheduler::Placement> p = (*policy)->Place(*plan.cluster, task);
      if (!p) {
        reason = PendingReason(*plan.cluster, task);
        break;
      }
      const std::string node = plan.specs[static_cast<size_t>(p->node)].name;
      plan.cluster->Apply(task, *p);
      plan.assignments[AssignmentsPrefix(node) + d.model] = AssignmentJson(d);
      plan.ops.push_back(etcd::Op{etcd::Op::Kind::kPut, AssignmentsPrefix(node) + d.model,
                                  AssignmentJson(d), 0, false});
      LOG_INFO("scheduler {}: placed {} ({}) on {} ({} policy)", options_.id, name, d.model, node,
               options_.policy);
    }
    for (size_t i = 0; i < plan.specs.size(); ++i) {
      plan.cluster->SetExcluded(static_cast<int>(i), false);
    }
    const std::string status = StatusJson(d.replicas, d.replicas - missing, missing, reason);
    if (status_[name] == status) continue;
    if (missing > 0) {
      LOG_WARNING("scheduler {}: {} has {} pending instance(s): {}", options_.id, name, missing,
                  reason);
    }
    plan.ops.push_back(etcd::Op{etcd::Op::Kind::kPut, kStatusPrefix + name, status, 0, false});
    status_[name] = status;
  }
}

}  // namespace dais::cluster
