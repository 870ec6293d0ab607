#include "cmd/scheduler.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>

#include "common/logging.h"
#include "fmt/format.h"
#ifdef DAIS_HAVE_GRPC
#include <signal.h>

#include "cluster/cluster_scheduler.h"
#include "gateway/rollout_controller.h"
#include "streams/live_accuracy.h"
#endif
#include "cmd/metrics_port.h"
#ifdef DAIS_HAVE_GRPC
#include "cmd/agent_orchestrator.h"
#include "cmd/service_discovery.h"
#endif
#include "frontends/http/http_server.h"
#include "metrics/registry.h"
#include "placement/simulator.h"
#include "placement/trace.h"

namespace dais::cmd {
namespace {

void PrintResult(const placement::SimulationResult& r) {
  fmt::print(
      "\npolicy {}: {:.0f} GPUs; {} decisions, {:.0f} placements/s, decision p50 {:.0f} µs, "
      "p99 {:.0f} µs\n",
      r.policy, r.gpu_capacity, r.decisions,
      r.decision_seconds > 0 ? static_cast<double>(r.decisions) / r.decision_seconds : 0,
      r.decision_p50_us, r.decision_p99_us);
  fmt::print(
      "| arrived | GPU allocation | unallocated GPUs | fragmented GPUs | tasks | failed |\n");
  fmt::print("|---:|---:|---:|---:|---:|---:|\n");
  for (const placement::SimulationPoint& p : r.checkpoints) {
    fmt::print("| {:.0f} % | {:.1f} % | {:.1f} | {:.1f} | {} | {} |\n", p.arrived * 100,
               p.allocated_ratio * 100, p.unallocated_gpus, p.fragmented_gpus, p.tasks_arrived,
               p.tasks_failed);
  }
}

std::string ResultJson(const placement::SimulationResult& r) {
  std::string out = fmt::format(
      "{{\"policy\":\"{}\",\"gpu_capacity\":{},\"decisions\":{},\"decision_seconds\":{},"
      "\"decision_p50_us\":{},\"decision_p99_us\":{},\"checkpoints\":[",
      r.policy, r.gpu_capacity, r.decisions, r.decision_seconds, r.decision_p50_us,
      r.decision_p99_us);
  for (size_t i = 0; i < r.checkpoints.size(); ++i) {
    const placement::SimulationPoint& p = r.checkpoints[i];
    out += fmt::format(
        "{}{{\"arrived\":{},\"allocated_ratio\":{},\"unallocated_gpus\":{},"
        "\"fragmented_gpus\":{},\"tasks\":{},\"failed\":{}}}",
        i > 0 ? "," : "", p.arrived, p.allocated_ratio, p.unallocated_gpus, p.fragmented_gpus,
        p.tasks_arrived, p.tasks_failed);
  }
  return out + "]}";
}

int Simulate(const SchedulerCliOptions& o) {
  auto nodes = placement::ReadNodeList(o.nodes);
  if (!nodes.ok()) {
    fmt::print(stderr, "scheduler simulate: {}\n", nodes.status().message());
    return 2;
  }
  auto tasks = placement::ReadTaskList(o.pods);
  if (!tasks.ok()) {
    fmt::print(stderr, "scheduler simulate: {}\n", tasks.status().message());
    return 2;
  }
  const placement::Workload workload = placement::Workload::FromTasks(*tasks);
  fmt::print("{} nodes from {}, {} tasks from {}, {} task classes in the workload\n", nodes->size(),
             o.nodes, tasks->size(), o.pods, workload.classes.size());
  std::ofstream csv;
  if (!o.csv.empty()) {
    csv.open(o.csv);
    if (!csv) {
      fmt::print(stderr, "scheduler simulate: cannot write {}\n", o.csv);
      return 2;
    }
    csv << "policy,arrived,allocated_ratio,unallocated_gpus,fragmented_gpus,tasks,failed\n";
  }
  placement::SimulationOptions so;
  so.seed = o.seed;
  so.stop_at = o.stop_at;
  std::string json = "[";
  for (const std::string& name : o.policies) {
    auto policy = placement::MakePolicy(name, workload);
    if (!policy.ok()) {
      fmt::print(stderr, "scheduler simulate: {}\n", policy.status().message());
      return 2;
    }
    auto r = placement::Simulate(*nodes, *tasks, **policy, workload, so);
    if (!r.ok()) {
      fmt::print(stderr, "scheduler simulate: {}\n", r.status().message());
      return 2;
    }
    PrintResult(*r);
    json += (json.size() > 1 ? "," : "") + ResultJson(*r);
    for (const placement::SimulationPoint& p : r->curve) {
      if (csv.is_open()) {
        csv << fmt::format("{},{:.4f},{:.4f},{:.2f},{:.2f},{},{}\n", r->policy, p.arrived,
                           p.allocated_ratio, p.unallocated_gpus, p.fragmented_gpus,
                           p.tasks_arrived, p.tasks_failed);
      }
    }
    std::fflush(stdout);
  }
  if (!o.json.empty()) {
    std::ofstream out(o.json);
    out << json << "]\n";
    if (!out) {
      fmt::print(stderr, "scheduler simulate: cannot write {}\n", o.json);
      return 2;
    }
  }
  return 0;
}

#ifdef DAIS_HAVE_GRPC
// GET /sd/targets[?role=node|gateway] on the metrics port (service_discovery.h).
ExtraRoute ServiceDiscoveryRoute(std::shared_ptr<etcd::Client> client) {
  return [client](const frontends::http::Request& r, frontends::http::Responder& w) {
    if (r.path != "/sd/targets") return false;
    if (r.method != "GET") {
      w({405, "text/plain", "GET /sd/targets[?role=node|gateway]\n", {}});
      return true;
    }
    std::string role;
    for (size_t at = 0; at < r.query.size();) {
      size_t end = r.query.find('&', at);
      if (end == std::string::npos) end = r.query.size();
      const std::string pair = r.query.substr(at, end - at);
      if (pair.starts_with("role=")) role = pair.substr(5);
      at = end + 1;
    }
    auto targets = PrometheusTargets(*client, role);
    if (!targets.ok()) {
      const bool bad = targets.status().code() == StatusCode::kInvalidArgument;
      w({bad ? 400 : 503, "text/plain", targets.status().message() + "\n", {}});
      return true;
    }
    w({200, "application/json", *targets, {}});
    return true;
  };
}
#endif

int RunLive(const SchedulerCliOptions& o) {
#ifdef DAIS_HAVE_GRPC
  if (o.etcd.empty()) {
    fmt::print(stderr, "dais scheduler: --etcd is required (or a subcommand: simulate)\n");
    return 2;
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  cluster::ClusterSchedulerOptions so;
  so.id = o.id;
  so.etcd_endpoints = o.etcd;
  so.policy = o.policy;
  so.lease_ttl_secs = o.lease_ttl_secs;
  std::unique_ptr<frontends::http::Server> metrics;
  if (o.metrics_port >= 0) {
    auto sd_client = etcd::Client::Create({o.etcd});
    if (!sd_client.ok()) {
      LOG_ERROR("dais scheduler: {}", sd_client.status().message());
      return 2;
    }
    metrics =
        MetricsServer(o.metrics_address, o.metrics_port,
                      ServiceDiscoveryRoute(std::shared_ptr<etcd::Client>(std::move(*sd_client))));
    if (Status s = metrics->Start(); !s.ok()) {
      LOG_ERROR("dais scheduler: --metrics-port: {}", s.message());
      return 2;
    }
    LOG_INFO("ports: metrics={}", metrics->port());
  }
  cluster::ClusterScheduler scheduler(so);
  if (Status s = scheduler.Start(); !s.ok()) {
    LOG_ERROR("dais scheduler: {}", s.message());
    return 2;
  }
  gateway::AccuracySource accuracy;
  if (!o.feedback_stream.empty() || !o.label_stream.empty()) {
    auto live = streams::LiveAccuracy::Create(o.feedback_stream, o.label_stream);
    if (!live.ok()) {
      LOG_ERROR("dais scheduler: --feedback-stream / --label-stream: {}", live.status().message());
      return 2;
    }
    std::shared_ptr<streams::LiveAccuracy> join = std::move(*live);
    accuracy = [join](const gateway::AccuracyQuery& q)
        -> StatusOr<std::map<int64_t, gateway::LabelledAnswers>> {
      ASSIGN_OR_RETURN(auto counts,
                       join->Counts(q.model, {q.canary, q.stable}, q.label, q.since_ms));
      std::map<int64_t, gateway::LabelledAnswers> out;
      for (const auto& [version, c] : counts) out[version] = {c.labeled, c.correct};
      return out;
    };
    LOG_INFO("rollouts: live accuracy from {} joined with {}", o.feedback_stream, o.label_stream);
  }
  gateway::RolloutController rollouts(
      o.etcd, [&scheduler] { return scheduler.leader_revision(); }, "/dais/scheduler/leader",
      o.prometheus, std::move(accuracy));
  if (Status s = rollouts.Start(); !s.ok()) {
    LOG_ERROR("dais scheduler: rollouts: {}", s.message());
    return 2;
  }
  agents::OrchestratorOptions ao;
  ao.calm_ms = o.agent_calm_ms;
  ao.pause_fraction = o.agent_pause_fraction;
  ao.throttle_fraction = o.agent_throttle_fraction;
  ao.cpu_busy = o.agent_cpu_busy;
  ao.cpu_calm = std::min(ao.cpu_calm, o.agent_cpu_busy);
  AgentOrchestratorLoop orchestrator(
      o.etcd, o.id, [&scheduler] { return scheduler.leader_revision(); }, ao);
  if (Status s = orchestrator.Start(); !s.ok()) {
    LOG_ERROR("dais scheduler: agents: {}", s.message());
    return 2;
  }
  LOG_INFO("dais scheduler {} started (policy {}, lease {} s, etcd {})", o.id, o.policy,
           o.lease_ttl_secs, o.etcd.front());
  int sig = 0;
  sigwait(&stop, &sig);
  orchestrator.Stop();
  rollouts.Stop();
  scheduler.Stop();
  if (metrics) metrics->Stop();
  LOG_INFO("dais scheduler {} stopped", o.id);
  return 0;
#else
  (void)o;
  fmt::print(stderr, "dais scheduler: this build has no gRPC (needed for etcd)\n");
  return 2;
#endif
}

}  // namespace

CLI::App* AddSchedulerCommand(CLI::App* app, SchedulerCliOptions* o) {
  CLI::App* cmd = app->add_subcommand(
      "scheduler",
      "The cluster's placement: run as 2+ replicas with --etcd (one leads, through an etcd "
      "lease); 'simulate' replays a trace");
  cmd->require_subcommand(0, 1);
  cmd->add_option("--etcd", o->etcd, "etcd endpoints host:port (comma-separated or repeated).")
      ->delimiter(',')
      ->envname("DAIS_ETCD");
  cmd->add_option("--id", o->id, "This replica's name (default: the host name and PID).");
  cmd->add_option("--policy", o->policy, "Placement policy: first-fit, best-fit, fgd, dais.")
      ->check(CLI::IsMember({"first-fit", "best-fit", "fgd", "dais"}))
      ->capture_default_str();
  cmd->add_option("--lease-ttl-secs", o->lease_ttl_secs,
                  "Leadership lease: a standby takes over within this after the leader dies.")
      ->check(CLI::Range(2, 300))
      ->capture_default_str();
  cmd->add_option("--metrics-port", o->metrics_port,
                  "Port of GET /metrics (Prometheus; docs/cluster.md lists the metrics); 0 picks "
                  "a free one, logged as 'ports: metrics=N'. Default (-1): none.")
      ->check(CLI::Range(-1, 65535))
      ->capture_default_str();
  cmd->add_option("--metrics-address", o->metrics_address, "Address the metrics port binds.")
      ->capture_default_str();
  cmd->add_option("--prometheus", o->prometheus,
                  "host:port of a Prometheus that scrapes the gateways: rollout analysis queries "
                  "it (PromQL). Default: the gateways' /metrics are scraped directly.");
  cmd->add_option("--agent-pause-fraction", o->agent_pause_fraction,
                  "Agents of lower priority are paused once an agent's p99 passes this share of "
                  "its SLA (below 1: before the SLA is missed, as the pause takes effect within "
                  "about half a second).")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 1.0));
  cmd->add_option("--agent-throttle-fraction", o->agent_throttle_fraction,
                  "Agents of lower priority are throttled (to half the rate they ran at) once an "
                  "agent's p99 passes this share of its SLA; at or above --agent-pause-fraction: "
                  "no throttling on latency.")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 1.0));
  cmd->add_option("--agent-cpu-busy", o->agent_cpu_busy,
                  "Agents of lower priority are throttled while a node where an agent with an SLA "
                  "runs has this share of its CPU busy (its live load, /dais/node-load/); 1: the "
                  "CPU is no signal.")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 1.0));
  cmd->add_option("--agent-calm-ms", o->agent_calm_ms,
                  "Agents that gave way to a higher priority step back (paused -> throttled -> "
                  "running) once every agent has been within its SLA by a margin, and its nodes' "
                  "CPU below 75 %, for this long (docs/agents.md).")
      ->capture_default_str()
      ->check(CLI::Range(100, 3600000));
  cmd->add_option("--feedback-stream", o->feedback_stream,
                  "redis://HOST:PORT/STREAM: the nodes' --feedback-stream. With --label-stream, "
                  "rollouts started with --accuracy-label compare the live accuracy of canary "
                  "and stable on the labels posted for their answers.");
  cmd->add_option("--label-stream", o->label_stream,
                  "redis://HOST:PORT/STREAM: the nodes' --label-stream (with --feedback-stream).");
  CLI::App* sim = cmd->add_subcommand(
      "simulate",
      "The FGD paper's experiment: tasks of --pods arrive in order (then sampled with "
      "replacement) and never leave, until their GPU demand reaches --stop-at times the GPU "
      "capacity of --nodes; each placement policy's GPU allocation, unallocated and fragmented "
      "GPUs at 80-120 % of capacity arrived.");
  sim->add_option("--nodes", o->nodes, "Node list CSV (sn,cpu_milli,memory_mib,gpu,model).")
      ->required();
  sim->add_option("--pods", o->pods,
                  "Task list CSV: an openb pod list (name,cpu_milli,memory_mib,num_gpu,gpu_milli,"
                  "gpu_spec) or the 2025 DLRM trace.")
      ->required();
  sim->add_option("--policy", o->policies, "Policies to compare, in order.")
      ->delimiter(',')
      ->capture_default_str();
  sim->add_option("--seed", o->seed, "Seed of the sampling once the trace is used up.")
      ->capture_default_str();
  sim->add_option("--stop-at", o->stop_at, "Stop when arrived GPU demand / capacity reaches this.")
      ->check(CLI::Range(0.1, 10.0))
      ->capture_default_str();
  sim->add_option("--csv", o->csv,
                  "Write each policy's curve (a point every 2 % of capacity) to this CSV.");
  sim->add_option("--json", o->json,
                  "Write every policy's checkpoints and decision times to this JSON file.");
  return cmd;
}

int RunScheduler(CLI::App* command, const SchedulerCliOptions& options) {
  if (command->get_subcommand("simulate")->parsed()) return Simulate(options);
  SchedulerCliOptions o = options;
  if (o.id.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    o.id = std::string(host) + "-" + std::to_string(getpid());
  }
  return RunLive(o);
}

}  // namespace dais::cmd
