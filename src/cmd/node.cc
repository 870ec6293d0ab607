#include "cmd/node.h"

#include <CLI/CLI.hpp>
#include <filesystem>

#include "cluster/node_agent.h"
#include "cluster/node_load.h"
#include "cluster/nvml.h"
#include "cmd/agent_job.h"
#include "cmd/memory_shard_job.h"
#include "cmd/serve_memory.h"
#include "common/logging.h"
#ifdef DAIS_HAVE_LEARN
#include "cmd/training_runner.h"
#endif

namespace dais::cmd {

CLI::App* AddNodeCommand(CLI::App* app, NodeCliOptions* o) {
  CLI::App* cmd = app->add_subcommand(
      "node",
      "dais serve as a cluster member: registers in etcd (under a lease) with its capacity, "
      "loads the models the scheduler assigns to it, and reports their states");
  AddServeFlags(cmd, &o->serve);
  o->serve.model_control_mode = "explicit";
  cmd->add_option("--etcd", o->etcd, "etcd endpoints host:port (comma-separated or repeated).")
      ->delimiter(',')
      ->required()
      ->envname("DAIS_ETCD");
  cmd->add_option("--gpus", o->gpus,
                  "GPUs this node offers. Default: those NVML finds (libnvidia-ml.so.1; none "
                  "without the NVIDIA driver). Declared instead (simulation, tests): "
                  "[Nx]MODEL:MEMORY, comma-separated, e.g. 2xA100:80GiB,T4:16GiB; 'none': no GPU.");
  cmd->add_option("--labels", o->labels, "Node labels for placement constraints: k=v,k2=v2.");
  cmd->add_option("--agent-gateway", o->agent_gateway,
                  "http://HOST:PORT: where the agents this node runs send their inference and "
                  "memory steps (docs/agents.md). Default: a gateway registered in etcd.");
  cmd->add_option("--agent-token", o->agent_token,
                  "Bearer token the agents this node runs send to the gateway (one with --jwks "
                  "refuses them without one). Default: none.");
  cmd->add_option("--agent-tokens", o->agent_tokens,
                  "A folder of bearer tokens by tenant: an agent of tenant T sends the token in "
                  "DIR/T (one line) to the gateway, so the gateway's tenancy applies to it; an "
                  "agent whose tenant has no file is not started. Passed in the runtime's "
                  "environment.");
  cmd->add_option("--agent-txn-url", o->agent_txn_url,
                  "http://HOST:PORT: the dais txn coordinator of those agents' txn steps.");
  cmd->add_option("--agent-features-url", o->agent_features_url,
                  "http://HOST:PORT: the feature server (Feast API) of those agents' features "
                  "steps. Default: this node.");
  cmd->add_option("--lease-ttl-secs", o->lease_ttl_secs,
                  "The node's registration lease: a killed node leaves the cluster within this.")
      ->check(CLI::Range(2, 300))
      ->capture_default_str();
  cmd->add_option("--advertise-host", o->advertise_host,
                  "Host name or address other members reach this node at.")
      ->capture_default_str();
  return cmd;
}

namespace {

// NVML's GPUs, logged; none (and why) without the driver.
StatusOr<std::vector<cluster::Gpu>> DiscoveredGpus() {
  auto gpus = cluster::DiscoverGpus();
  if (!gpus.ok()) {
    LOG_INFO("no GPU discovered ({}); declare some with --gpus to simulate",
             gpus.status().message());
    return std::vector<cluster::Gpu>{};
  }
  for (size_t i = 0; i < gpus->size(); ++i) {
    LOG_INFO("GPU {}: {} with {} MiB (NVML)", i, (*gpus)[i].model, (*gpus)[i].memory_mib);
  }
  return gpus;
}

}  // namespace

int RunNode(const NodeCliOptions& o) {
  cluster::NodeAgentOptions ao;
  ao.node_id = o.serve.features.node_id;
  if (ao.node_id.empty()) {
    LOG_ERROR("dais node needs --node-id");
    return 1;
  }
  ao.etcd_endpoints = o.etcd;
  ao.lease_ttl_secs = o.lease_ttl_secs;
  ao.capacity = cluster::LocalCapacity();
  auto gpus =
      o.gpus.empty() ? DiscoveredGpus() : cluster::ParseGpus(o.gpus == "none" ? "" : o.gpus);
  auto labels = cluster::ParseLabels(o.labels);
  if (!gpus.ok() || !labels.ok()) {
    LOG_ERROR("{}", (!gpus.ok() ? gpus.status() : labels.status()).message());
    return 1;
  }
  ao.capacity.gpus = std::move(*gpus);
  ao.capacity.labels = std::move(*labels);
  ao.repositories = o.serve.model_repositories;
  // The jobs a node runs: vector memory shards and (with LibTorch / XGBoost) training jobs.
  MemoryRuntime* memory = nullptr;  // set before the agent starts (on_memory)
#ifdef DAIS_HAVE_LEARN
  TrainingRunnerOptions training;
  training.node_id = ao.node_id;
  training.etcd_endpoints = o.etcd;
  std::error_code ec;
  training.dais_binary = std::filesystem::read_symlink("/proc/self/exe", ec).string();
#endif
  AgentJobOptions agents;
  agents.node_id = ao.node_id;
  agents.etcd_endpoints = o.etcd;
  agents.gateway = o.agent_gateway;
  agents.token = o.agent_token;
  agents.txn_url = o.agent_txn_url;
  agents.tokens_dir = o.agent_tokens;
  agents.host = o.advertise_host;
  {
    std::error_code exe;
    agents.dais_binary = std::filesystem::read_symlink("/proc/self/exe", exe).string();
  }
  ao.jobs = [&](const cluster::Assignment& a,
                std::function<void()> changed) -> StatusOr<std::unique_ptr<cluster::AssignedJob>> {
    if (!a.agent.empty()) return StartAgentJob(agents, a, std::move(changed));
    if (!a.memory.empty())
      return StartMemoryShard(memory ? memory->service() : nullptr, a, std::move(changed));
#ifdef DAIS_HAVE_LEARN
    return StartTrainingJob(training, a, std::move(changed));
#else
    return FailedPrecondition("this build of dais runs no training jobs (no LibTorch/XGBoost)");
#endif
  };
  ServeOptions serve = o.serve;
  serve.model_control_mode = "explicit";
  serve.memory.managed = true;
  std::unique_ptr<cluster::NodeAgent> agent;
  std::unique_ptr<cluster::NodeLoadPublisher> load;
  ServeHooks hooks;
  hooks.on_memory = [&memory](MemoryRuntime* m) { memory = m; };
  hooks.on_ready = [&](runtime::ModelManager* manager, ServeHooks::Ports ports) {
    ao.http_endpoint = o.advertise_host + ":" + std::to_string(ports.http);
    ao.grpc_endpoint = ports.grpc > 0 ? o.advertise_host + ":" + std::to_string(ports.grpc) : "";
    ao.metrics_endpoint = o.advertise_host + ":" + std::to_string(ports.metrics);
    agents.features_url =
        o.agent_features_url.empty() ? "http://" + ao.http_endpoint : o.agent_features_url;
    agent = std::make_unique<cluster::NodeAgent>(ao, manager);
    RETURN_IF_ERROR(agent->Start());
    // The live CPU load, a signal of the agent orchestrator (a node without /proc: none).
    load = std::make_unique<cluster::NodeLoadPublisher>(ao.node_id, o.etcd);
    if (Status s = load->Start(); !s.ok()) {
      LOG_WARNING("node {}: no live load published: {}", ao.node_id, s.message());
      load.reset();
    }
    return OkStatus();
  };
  hooks.on_stop = [&] {
    // The shards' last snapshot (with a cold tier) before the agent lets them go.
    if (memory) memory->SnapshotNow();
    if (load) load->Stop();
    if (agent) agent->Stop(/*leave=*/true);
  };
  return RunServe(serve, &hooks);
}

}  // namespace dais::cmd
