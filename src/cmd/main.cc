// dais: one binary, one subcommand per role. main only wires.
#include <CLI/CLI.hpp>

#include "cmd/agent.h"
#include "cmd/archive.h"
#include "cmd/check_model.h"
#include "cmd/cli_habits.h"
#include "cmd/features.h"
#include "cmd/label_events.h"
#include "cmd/locks.h"
#include "cmd/memory.h"
#include "cmd/train.h"
#ifdef DAIS_HAVE_GRPC
#include "cmd/console.h"
#include "cmd/ctl.h"
#include "cmd/etcd_flags.h"
#include "cmd/gateway.h"
#include "cmd/node.h"
#endif
#include "cmd/perf.h"
#include "cmd/scheduler.h"
#include "cmd/serve.h"
#include "cmd/stream.h"
#ifdef DAIS_HAVE_TXN
#include "cmd/txn.h"
#endif
#ifdef DAIS_HAVE_FED
#include "cmd/fed.h"
#endif

namespace {

int PrintCompletion(const CLI::App& app) {
  const std::string kinds =
      "nodes deployments instances assignments events routes tenants trainings collections";
  std::fputs(dais::cmd::BashCompletion(
                 app, {{"ctl get", kinds},
                       {"ctl describe", kinds},
                       {"ctl delete", "deployment route tenant training collection"}})
                 .c_str(),
             stdout);
  return 0;
}

// Triton's flags accepted by the serving roles, and their --help in groups.
void SetUpServerRoles(CLI::App& app, CLI::App* serve_cmd) {
  for (CLI::App* role : {serve_cmd, dais::cmd::FindSubcommand(app, "node")}) {
    if (role != nullptr) dais::cmd::AcceptTritonFlags(role);
  }
  for (const char* role : {"serve", "node", "gateway"}) {
    if (CLI::App* cmd = dais::cmd::FindSubcommand(app, role)) {
      dais::cmd::GroupFlags(cmd, dais::cmd::ServerFlagGroups());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dais: a distributed AI serving system (KServe v2 / Triton-compatible)"};
  app.require_subcommand(1);
  dais::cmd::ServeOptions serve;
  CLI::App* serve_cmd = app.add_subcommand(
      "serve", "Serve the models of a Triton-style model repository over KServe v2 HTTP");
  dais::cmd::AddServeFlags(serve_cmd, &serve);
  dais::perf::PerfOptions perf;
  CLI::App* perf_cmd = app.add_subcommand(
      "perf", "Measure a model's throughput and latency on a KServe v2 server (perf_analyzer)");
  dais::cmd::AddPerfFlags(perf_cmd, &perf);
  dais::cmd::FeaturesCliOptions features;
  CLI::App* features_cmd = dais::cmd::AddFeaturesCommand(&app, &features);
  dais::cmd::LocksCliOptions locks;
  CLI::App* locks_cmd = dais::cmd::AddLocksCommand(&app, &locks);
  dais::cmd::CheckModelOptions check;
  CLI::App* check_cmd = dais::cmd::AddCheckModelCommand(&app, &check);
  dais::cmd::StreamCliOptions stream;
  CLI::App* stream_cmd = dais::cmd::AddStreamCommand(&app, &stream);
  dais::cmd::ArchiveCliOptions archive;
  CLI::App* archive_cmd = dais::cmd::AddArchiveCommand(&app, &archive);
  dais::cmd::LabelEventsCliOptions label_events;
  CLI::App* label_events_cmd = dais::cmd::AddLabelEventsCommand(&app, &label_events);
  dais::cmd::MemoryCliOptions memory;
  CLI::App* memory_cmd = dais::cmd::AddMemoryCommand(&app, &memory);
  dais::cmd::SchedulerCliOptions scheduler;
  CLI::App* scheduler_cmd = dais::cmd::AddSchedulerCommand(&app, &scheduler);
#ifdef DAIS_HAVE_GRPC
  dais::cmd::NodeCliOptions node;
  CLI::App* node_cmd = dais::cmd::AddNodeCommand(&app, &node);
  dais::cmd::CtlOptions ctl;
  CLI::App* ctl_cmd = dais::cmd::AddCtlCommand(&app, &ctl);
  dais::cmd::GatewayCliOptions gateway;
  CLI::App* gateway_cmd = dais::cmd::AddGatewayCommand(&app, &gateway);
  dais::cmd::ConsoleCliOptions console;
  CLI::App* console_cmd = dais::cmd::AddConsoleCommand(&app, &console);
  dais::cmd::AgentCliOptions agent;
  CLI::App* agent_cmd = dais::cmd::AddAgentCommand(&app, &agent);
  for (CLI::App* cmd : {node_cmd, ctl_cmd, gateway_cmd, scheduler_cmd, console_cmd,
                        agent_cmd->get_subcommand("run")}) {
    dais::cmd::AddEtcdTlsFlags(cmd);
  }
#endif
#ifdef DAIS_HAVE_LEARN
  dais::cmd::TrainCliOptions train;
  CLI::App* train_cmd = dais::cmd::AddTrainCommand(&app, &train);
#endif
#ifdef DAIS_HAVE_TXN
  dais::cmd::TxnCliOptions txn;
  CLI::App* txn_cmd = dais::cmd::AddTxnCommand(&app, &txn);
#endif
#ifdef DAIS_HAVE_FED
  dais::cmd::FedCliOptions fed;
  CLI::App* fed_cmd = dais::cmd::AddFedCommand(&app, &fed);
#endif
  SetUpServerRoles(app, serve_cmd);
  CLI::App* completion_cmd = app.add_subcommand(
      "completion", "Print a shell completion script: source <(dais completion bash)");
  std::string shell = "bash";
  completion_cmd->add_option("shell", shell, "bash")->check(CLI::IsMember({"bash"}));
  dais::cmd::AddCommonFlags(&app);
  if (int rc = dais::cmd::ParseCommandLine(app, argc, argv); rc >= 0) return rc;
  if (completion_cmd->parsed()) return PrintCompletion(app);
  for (CLI::App* role : {serve_cmd, dais::cmd::FindSubcommand(app, "node")}) {
    if (role != nullptr && role->parsed()) dais::cmd::WarnUnimplementedFlags(role);
  }
#ifdef DAIS_HAVE_GRPC
  dais::cmd::ApplyEtcdTlsFlags();
#endif
#ifdef DAIS_HAVE_LEARN
  if (train_cmd->parsed()) return dais::cmd::RunTrain(train);
#endif
#ifdef DAIS_HAVE_TXN
  if (txn_cmd->parsed()) return dais::cmd::RunTxn(txn_cmd, txn);
#endif
#ifdef DAIS_HAVE_FED
  if (fed_cmd->parsed()) return dais::cmd::RunFed(fed);
#endif
#ifdef DAIS_HAVE_GRPC
  if (node_cmd->parsed()) return dais::cmd::RunNode(node);
  if (ctl_cmd->parsed()) return dais::cmd::RunCtl(ctl_cmd, ctl);
  if (gateway_cmd->parsed()) return dais::cmd::RunGateway(gateway);
  if (console_cmd->parsed()) return dais::cmd::RunConsole(console);
  if (agent_cmd->parsed()) return dais::cmd::RunAgentCommand(agent);
#endif
  if (serve_cmd->parsed()) return dais::cmd::RunServe(serve);
  if (perf_cmd->parsed()) return dais::cmd::RunPerf(perf);
  if (features_cmd->parsed()) return dais::cmd::RunFeatures(features_cmd, features);
  if (locks_cmd->parsed()) return dais::cmd::RunLocks(locks_cmd, locks);
  if (check_cmd->parsed()) return dais::cmd::RunCheckModel(check);
  if (scheduler_cmd->parsed()) return dais::cmd::RunScheduler(scheduler_cmd, scheduler);
  if (stream_cmd->parsed()) return dais::cmd::RunStream(stream_cmd, stream);
  if (archive_cmd->parsed()) return dais::cmd::RunArchive(archive, archive_cmd);
  if (label_events_cmd->parsed()) return dais::cmd::RunLabelEvents(label_events);
  if (memory_cmd->parsed()) return dais::cmd::RunMemory(memory_cmd, memory);
  return 1;
}
