#include "cmd/fed.h"

#include <CLI/CLI.hpp>

namespace dais::cmd {

CLI::App* AddFedCommand(CLI::App* app, FedCliOptions* options) {
  FedServeOptions* s = &options->serve;
  FedJoinOptions* j = &options->join;
  CLI::App* fed = app->add_subcommand(
      "fed",
      "Federated learning (docs/federated.md): edge trainers train a TorchScript model on data "
      "that stays with them and send only their updates; the aggregator averages them round "
      "by round and publishes the result as a repository version.");
  fed->require_subcommand(1);
  CLI::App* serve = fed->add_subcommand(
      "serve",
      "The aggregator: runs the rounds of a federation.yaml (selection, quorum, deadline, "
      "FedAvg / FedProx, secure aggregation, differential privacy), scores each round on the "
      "held-out rows, keeps its state in --state-dir (a restarted aggregator resumes after the "
      "last completed round), publishes the result and releases it by canary. Exit 0 when all "
      "rounds are done; 2: a bad spec.");
  CLI::Option* config =
      serve->add_option("--config", s->config, "The federation.yaml (fields: docs/federated.md).");
  CLI::Option* name = serve->add_option(
      "--federation", s->federation,
      "Or the federation `dais ctl apply` wrote to --etcd (/dais/federations/<name>).");
  config->excludes(name);
  serve->add_option("--etcd", s->etcd,
                    "The cluster's etcd (host:port): where --federation is read, and where a "
                    "release with strategy canary starts its rollout.");
  serve
      ->add_option("--state-dir", s->state_dir,
                   "Where the rounds' state is kept (state.json, global-<round>.f32).")
      ->required();
  serve->add_option("--address", s->address, "The address to listen on.")->capture_default_str();
  serve->add_option("--port", s->port, "The gRPC port trainers call (0: a free one).")
      ->capture_default_str();
  AddListenerTlsFlags(serve, "fed", "the aggregator's gRPC port (ALPN h2)", &s->tls);
  AddTlsCommonFlags(serve, &s->tls_common);
  serve
      ->add_option("--retry-after-ms", s->retry_after_ms,
                   "How soon a trainer with nothing to do polls again.")
      ->check(CLI::Range(10, 60000))
      ->capture_default_str();
  CLI::App* join = fed->add_subcommand(
      "join",
      "An edge trainer: polls the aggregator, trains the round's model locally on --data with "
      "LibTorch (SGD; FedProx's term when the federation asks), and sends only the change to "
      "the parameters (plain, 8-bit, or masked for secure aggregation). Reconnects after a "
      "disconnection; an update trained past the round's deadline is not sent. Exit 0 when the "
      "federation is done.");
  join->add_option("--aggregator", j->aggregator, "The aggregator's host:port.")->required();
  join->add_option("--federation", j->federation, "The federation's name.")->required();
  join->add_option("--client", j->client, "This trainer's id (letters, digits, '-', '_', '.').")
      ->required();
  join->add_option("--data", j->data,
                   "The local rows: a folder of dt=YYYY-MM-DD/*.jsonl.gz files, each line "
                   "{\"x\": [numbers], \"y\": class}.")
      ->required();
  AddClientTlsFlags(join, "fed", "the aggregator", &j->tls);
  join->add_flag("--int8", j->int8,
                 "Send 8-bit updates (a quarter of the bytes; not with secure aggregation).");
  join->add_option("--delay-ms", j->delay_ms,
                   "Wait this long before sending each update (to play a slow device).");
  join->add_option("--give-up-s", j->give_up_s,
                   "Exit 1 after this long without reaching the aggregator.")
      ->capture_default_str();
  options->serve_cmd = serve;
  options->join_cmd = join;
  return fed;
}

int RunFed(const FedCliOptions& o) {
  return o.serve_cmd->parsed() ? RunFedServe(o.serve) : RunFedJoin(o.join);
}

}  // namespace dais::cmd
