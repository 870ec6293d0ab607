#include "cmd/txn.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <thread>

#include "cmd/grpc_credentials.h"
#include "cmd/serve_features.h"
#include "common/logging.h"
#include "features/store/feature_store.h"
#include "features/store/redis_tier.h"
#include "frontends/grpc/h2_server.h"
#include "frontends/http/http_server.h"
#include "redis/client.h"
#include "streams/event_stream.h"
#include "txn/coordinator.h"
#include "txn/outbox_relay.h"
#include "txn/recent_items.h"
#include "txn/txn_grpc.h"
#include "txn/txn_http.h"

namespace dais::cmd {

namespace {

void AddConsumerFlags(CLI::App* c, TxnCliOptions* o) {
  c->add_option("--stream", o->stream, "The purchase events' stream (an event's `stream:`).")
      ->capture_default_str();
  c->add_option("--group", o->group, "The consumer group.")->capture_default_str();
  c->add_option("--consumer", o->consumer,
                "This consumer's name in the group (stable across restarts; default: host-pid).");
  c->add_option("--feature", o->feature,
                "group:feature of --feature-spec kept as the recently purchased items (an INT64 "
                "or INT32 vector, newest first).")
      ->capture_default_str();
  c->add_option("--entity-field", o->entity_field, "Event field holding the entity id.")
      ->capture_default_str();
  c->add_option("--item-field", o->item_field, "Event field holding the item id.")
      ->capture_default_str();
  c->add_option("--claim-idle-ms", o->claim_idle_ms,
                "Entries another consumer left unacknowledged this long are taken over.")
      ->check(CLI::Range(100, 3600000))
      ->capture_default_str();
}

std::string ConsumerName(const TxnCliOptions& o) {
  if (!o.consumer.empty()) return o.consumer;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return std::string(host) + "-" + std::to_string(getpid());
}

StatusOr<std::unique_ptr<redis::Client>> Redis(const std::string& seeds,
                                               const tls::ClientConfig& tls) {
  FeatureFlags f;
  f.redis = seeds;
  f.redis_tls = tls;
  ASSIGN_OR_RETURN(auto client, ConnectRedis(f));
  if (!client->WaitUntilReachable(std::chrono::seconds(10))) {
    return Unavailable("Redis " + seeds + " is not reachable");
  }
  return client;
}

txn::RecentItemsOptions ConsumerOptions(const TxnCliOptions& o) {
  txn::RecentItemsOptions r;
  r.stream = o.stream;
  r.group = o.group;
  r.consumer = ConsumerName(o);
  r.feature = o.feature;
  r.entity_field = o.entity_field;
  r.item_field = o.item_field;
  r.claim_idle_ms = o.claim_idle_ms;
  return r;
}

void WaitForSignal() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  int sig = 0;
  sigwait(&stop, &sig);
  LOG_INFO("dais txn: received {}: stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
}

void BlockStopSignals() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
}

int RunConsume(const TxnCliOptions& o) {
  BlockStopSignals();
  auto specs = LoadSpecs({o.feature_spec});
  if (!specs.ok()) {
    LOG_ERROR("dais txn consume: {}", specs.status().message());
    return 2;
  }
  auto client = Redis(o.redis, o.redis_tls);
  if (!client.ok()) {
    LOG_ERROR("dais txn consume: --redis: {}", client.status().message());
    return 2;
  }
  txn::RecentItemsUpdater updater(client->get(), specs->front(), ConsumerOptions(o));
  if (Status s = updater.Start(); !s.ok()) {
    LOG_ERROR("dais txn consume: {}", s.message());
    return 2;
  }
  LOG_INFO("dais txn consume: {} in group {} of {} -> {}", ConsumerName(o), o.group, o.stream,
           o.feature);
  WaitForSignal();
  updater.Stop();
  return 0;
}

int RunRecover(const TxnCliOptions& o, txn::TxnSpecPtr spec) {
  txn::CoordinatorOptions co;
  co.id = o.id;
  txn::Coordinator c(spec, co, nullptr);
  Status locked = c.LockId();
  for (int tries = 0; !locked.ok() && tries < 20; ++tries) {  // a predecessor just killed
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    locked = c.LockId();
  }
  if (!locked.ok()) {
    std::fprintf(stderr, "dais txn recover: %s\n", locked.message().c_str());
    return 1;
  }
  auto actions = c.Recover(o.dry_run);
  if (!actions.ok()) {
    std::fprintf(stderr, "dais txn recover: %s\n", actions.status().message().c_str());
    return 1;
  }
  std::printf("%-12s %-18s %-48s %s\n", o.dry_run ? "WOULD" : "DID", "PARTICIPANT", "GLOBAL ID",
              "WHY");
  for (const auto& a : *actions) {
    std::printf("%-12s %-18s %-48s %s\n", a.action.c_str(),
                a.participant.empty() ? "(log)" : a.participant.c_str(), a.gid.c_str(),
                a.why.c_str());
  }
  std::printf("%zu action(s)%s\n", actions->size(), o.dry_run ? " (dry run: nothing changed)" : "");
  return 0;
}

}  // namespace

CLI::App* AddTxnCommand(CLI::App* app, TxnCliOptions* o) {
  CLI::App* cmd = app->add_subcommand(
      "txn",
      "Distributed transactions: a two-phase-commit coordinator over PostgreSQL with a model "
      "gate in the prepare phase, events through an outbox to Redis Streams "
      "(docs/transactions.md)");
  cmd->require_subcommand(1);
  CLI::App* serve = cmd->add_subcommand(
      "serve", "Run the coordinator: POST /v1/txn/<type> with the parameters as JSON");
  CLI::App* recover = cmd->add_subcommand(
      "recover",
      "Resolve the prepared transactions a coordinator left behind (commit where its log says "
      "commit, roll back the rest) and print what was done");
  CLI::App* consume = cmd->add_subcommand(
      "consume", "Run the recent-items consumer: purchase events -> a feature of the store");
  for (CLI::App* c : {serve, recover}) {
    c->add_option("--config", o->config, "The transactions file (participants, log, types).")
        ->required()
        ->check(CLI::ExistingFile);
    c->add_option("--id", o->id,
                  "This coordinator's id: part of every global transaction id; a restarted "
                  "coordinator must keep it to recover its transactions.")
        ->capture_default_str();
  }
  recover->add_flag("--dry-run", o->dry_run, "Only print what would be done.");
  serve->add_option("--http-address", o->http_address, "Address the HTTP port binds.")
      ->capture_default_str();
  AddListenerLimitFlags(serve, &o->limits);
  serve->add_option("--http-port", o->http_port, "HTTP port (0: a free one, logged as 'ports:').")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  serve->add_option("--grpc-address", o->grpc_address, "Address the gRPC port binds.")
      ->capture_default_str();
  serve
      ->add_option(
          "--grpc-port", o->grpc_port,
          "gRPC port (dais.txn.v1.Transactions, proto/txn.proto; 0: a free one; -1: none).")
      ->check(CLI::Range(-1, 65535))
      ->capture_default_str();
  serve
      ->add_option("--workers", o->workers,
                   "Transactions executed at once; each worker holds one connection per "
                   "participant and one to the log.")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  serve
      ->add_option("--gate-server", o->gate_server,
                   "gRPC host:port of the model server the gates call (dais serve).")
      ->capture_default_str();
  serve->add_option("--feature-spec", o->feature_spec,
                    "features.yaml with the gates' features and the recent-items feature.");
  serve->add_option("--redis", o->redis,
                    "Redis host:port: the event streams, the feature store (gates, recent items).");
  serve
      ->add_option("--events-max-len", o->events_max_len,
                   "Streams are capped near this many entries (XADD MAXLEN ~).")
      ->capture_default_str();
  serve->add_option("--relay", o->relay, "Relay the participants' outboxes to the streams.")
      ->capture_default_str();
  serve
      ->add_option("--relay-poll-ms", o->relay_poll_ms,
                   "Outbox poll period besides the wake-up after each commit.")
      ->check(CLI::Range(1, 60000))
      ->capture_default_str();
  serve
      ->add_option("--resolve-interval-ms", o->resolve_interval_ms,
                   "Period of the resolver (prepared transactions left by failures).")
      ->check(CLI::Range(10, 600000))
      ->capture_default_str();
  AddTracingFlags(serve, &o->tracing, "transactions");
  serve->add_flag("--recent-items", o->recent_items,
                  "Also run the recent-items consumer in this process (see `txn consume`).");
  serve
      ->add_option("--crash-at", o->crash_at,
                   "Testing only: SIGKILL this process at a step of the first transaction that "
                   "reaches it (after_branches, after_prepare, after_decision, during_commit).")
      ->check(
          CLI::IsMember({"after_branches", "after_prepare", "after_decision", "during_commit"}));
  AddConsumerFlags(serve, o);
  consume->add_option("--redis", o->redis, "Redis host:port.")->required();
  for (CLI::App* c : {serve, consume}) {
    AddClientTlsFlags(c, "redis", "Redis (streams, features)", &o->redis_tls);
  }
  AddListenerTlsFlags(serve, "http", "the HTTP API (HTTPS)", &o->http_tls);
  AddListenerTlsFlags(serve, "grpc", "the gRPC API (ALPN h2)", &o->grpc_tls);
  AddTlsCommonFlags(serve, &o->tls_common);
  AddClientTlsFlags(serve, "gate", "the model server the gates call (gRPC)", &o->gate_tls);
  consume->add_option("--feature-spec", o->feature_spec, "features.yaml declaring --feature.")
      ->required()
      ->check(CLI::ExistingFile);
  AddConsumerFlags(consume, o);
  return cmd;
}

int RunTxnServe(const TxnCliOptions& o, txn::TxnSpecPtr spec);

int RunTxn(CLI::App* command, const TxnCliOptions& o) {
  if (command->got_subcommand("consume")) return RunConsume(o);
  auto spec = txn::LoadTxnSpecFile(o.config);
  if (!spec.ok()) {
    LOG_ERROR("dais txn: {}", spec.status().message());
    return 2;
  }
  if (command->got_subcommand("recover")) return RunRecover(o, *spec);
  return RunTxnServe(o, *spec);
}

txn::CoordinatorOptions CoordinatorOptionsOf(const TxnCliOptions& o) {
  txn::CoordinatorOptions co;
  co.id = o.id;
  co.workers = o.workers;
  co.crash_at = o.crash_at;
  co.resolve_interval_ms = o.resolve_interval_ms;
  return co;
}

// The recent-items consumer inside `dais txn serve`, on a Redis client of its own (*client).
StatusOr<std::unique_ptr<txn::RecentItemsUpdater>> StartRecentItems(
    const TxnCliOptions& o, features::FeatureSpecPtr fspec,
    std::unique_ptr<redis::Client>* client) {
  if (!fspec || o.redis.empty()) return InvalidArgument("needs --redis and --feature-spec");
  ASSIGN_OR_RETURN(*client, Redis(o.redis, o.redis_tls));
  auto updater =
      std::make_unique<txn::RecentItemsUpdater>(client->get(), fspec, ConsumerOptions(o));
  RETURN_IF_ERROR(updater->Start());
  return updater;
}

// The HTTP and gRPC APIs (TLS as the flags ask), started; logs the "ports:" line.
struct Apis {
  std::unique_ptr<frontends::http::Server> http;
  std::unique_ptr<frontends::grpc::H2Server> grpc;
};

StatusOr<Apis> StartApis(const TxnCliOptions& o, txn::Coordinator* coordinator) {
  ASSIGN_OR_RETURN(auto http_tls, ListenerTls("http", o.http_tls, o.tls_common, {"http/1.1"}));
  ASSIGN_OR_RETURN(auto grpc_tls, ListenerTls("grpc", o.grpc_tls, o.tls_common, {"h2"}));
  Apis apis;
  ApplyRequestMemoryLimit(o.limits);
  const frontends::DefaultConnectionLimits limits = frontends::ConnectionLimitsFromRlimit();
  frontends::http::ServerOptions so;
  ApplyListenerLimits(o.limits, o.limits.http_max_connections, limits.http, &so);
  so.tls = http_tls;
  so.address = o.http_address;
  so.port = o.http_port;
  so.threads = o.http_threads;
  so.listener = "txn";
  apis.http = std::make_unique<frontends::http::Server>(so, txn::MakeTxnHandler(coordinator));
  if (Status s = apis.http->Start(); !s.ok()) {
    return Status(s.code(), "--http-port: " + std::string(s.message()));
  }
  if (o.grpc_port < 0) {
    LOG_INFO("ports: http={}", apis.http->port());
    return apis;
  }
  frontends::grpc::H2ServerOptions go;
  ApplyListenerLimits(o.limits, o.limits.grpc_max_connections, limits.grpc, &go);
  go.tls = grpc_tls;
  go.address = o.grpc_address;
  go.port = o.grpc_port;
  go.threads = 1;
  apis.grpc = std::make_unique<frontends::grpc::H2Server>(go, txn::MakeTxnGrpcMethods(coordinator));
  if (Status s = apis.grpc->Start(); !s.ok()) {
    return Status(s.code(), "--grpc-port: " + std::string(s.message()));
  }
  LOG_INFO("ports: http={} grpc={}", apis.http->port(), apis.grpc->port());
  return apis;
}

int RunTxnServe(const TxnCliOptions& o, txn::TxnSpecPtr spec) {
  BlockStopSignals();
  features::FeatureSpecPtr fspec;
  if (!o.feature_spec.empty()) {
    auto specs = LoadSpecs({o.feature_spec});
    if (!specs.ok()) {
      LOG_ERROR("dais txn: --feature-spec: {}", specs.status().message());
      return 2;
    }
    fspec = specs->front();
  }
  std::unique_ptr<redis::Client> redis, consumer_redis;
  std::unique_ptr<features::FeatureStore> store;
  std::unique_ptr<streams::EventStream> events;
  if (!o.redis.empty()) {
    auto c = Redis(o.redis, o.redis_tls);
    if (!c.ok()) {
      LOG_ERROR("dais txn: --redis: {}", c.status().message());
      return 2;
    }
    redis = std::move(*c);
    features::StoreOptions so;
    so.l1_ttl = std::chrono::milliseconds(1000);
    store = std::make_unique<features::FeatureStore>(
        so, std::make_unique<features::RedisTier>(redis.get()));
    events = streams::MakeRedisEventStream(redis.get(), o.events_max_len);
  }
  auto gate_credentials = GrpcClientCredentials(o.gate_tls);
  if (!gate_credentials.ok()) {
    LOG_ERROR("dais txn: --gate-tls: {}", gate_credentials.status().message());
    return 2;
  }
  txn::Gate gate(o.gate_server, store.get(), fspec, *gate_credentials);
  if (Status s = gate.Validate(*spec); !s.ok()) {
    LOG_ERROR("dais txn: {}", s.message());
    return 2;
  }
  // Declared before the coordinator: destroyed after it (its workers wake the relays and
  // hand spans to the exporter).
  std::map<std::string, std::unique_ptr<txn::OutboxRelay>> relays;
  auto exporter = StartSpanExporter(o.tracing, "dais-txn", "transactions");
  if (!exporter.ok()) {
    LOG_ERROR("dais txn: {}", exporter.status().message());
    return 2;
  }
  txn::CoordinatorOptions co = CoordinatorOptionsOf(o);
  if (*exporter) {
    co.span_sink = [e = exporter->get()](Span span) { e->Add(std::move(span)); };
    co.trace_sample_rate = o.tracing.trace_sample_rate;
  }
  txn::Coordinator coordinator(spec, co, &gate);
  if (o.relay && events) {
    for (const auto& [name, info] : spec->participants) {
      relays[name] = std::make_unique<txn::OutboxRelay>(name, info, events.get(),
                                                        txn::RelayOptions{512, o.relay_poll_ms});
    }
    coordinator.SetCommitListener([&relays](const std::string& participant) {
      auto it = relays.find(participant);
      if (it != relays.end()) it->second->Wake();
    });
  } else if (o.relay) {
    LOG_WARNING("dais txn: no --redis: outbox events stay in the participants' dais_outbox tables");
  }
  if (Status s = coordinator.Start(); !s.ok()) {
    LOG_ERROR("dais txn: {}", s.message());
    return 2;
  }
  for (auto& [_, r] : relays) r->Start();
  std::unique_ptr<txn::RecentItemsUpdater> updater;
  if (o.recent_items) {
    auto started = StartRecentItems(o, fspec, &consumer_redis);
    if (!started.ok()) {
      LOG_ERROR("dais txn: --recent-items: {}", started.status().message());
      return 2;
    }
    updater = std::move(*started);
  }
  auto apis = StartApis(o, &coordinator);
  if (!apis.ok()) {
    LOG_ERROR("dais txn: {}", apis.status().message());
    return 2;
  }
  LOG_INFO("dais txn started: coordinator {}, {} type(s), {} participant(s), {} worker(s)", o.id,
           spec->types.size(), spec->participants.size(), o.workers);
  WaitForSignal();
  apis->http->StopAccepting();
  coordinator.Stop();  // in-flight transactions finish and are answered; queued ones get 503
  if (apis->grpc) apis->grpc->Stop(5000);
  apis->http->Stop();
  for (auto& [_, r] : relays) r->Stop();
  if (updater) updater->Stop();
  return 0;
}

}  // namespace dais::cmd
