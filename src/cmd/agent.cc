#include "cmd/agent.h"

#include <rapidjson/document.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "agents/agent_spec.h"
#include "agents/run.h"
#include "cmd/agent_actions.h"
#include "cmd/agent_http.h"
#include "cmd/agent_live.h"
#include "cmd/agent_runs.h"
#include "cmd/metrics_port.h"
#include "cmd/serve_features.h"
#include "common/json.h"
#include "common/logging.h"
#include "etcd/client.h"
#include "fmt/format.h"
#include "gateway/rollout.h"
#include "metrics/registry.h"
#include "redis/client.h"
#include "streams/event_stream.h"

namespace dais::cmd {

CLI::App* AddAgentCommand(CLI::App* app, AgentCliOptions* o) {
  CLI::App* cmd = app->add_subcommand(
      "agent", "Agents on the cluster (docs/agents.md): 'run' is the runtime of one agent");
  cmd->require_subcommand(1);
  CLI::App* run = cmd->add_subcommand(
      "run",
      "Run an agent: consume its trigger (a Redis stream, with a consumer group; or a timer), "
      "run its steps for each trigger, record each run in dais:agent:<name>:runs");
  run->add_option("--name", o->name, "The agent applied with dais ctl apply (read from etcd).");
  run->add_option("-f,--file", o->file, "Or the agent's spec file (no etcd).");
  run->add_option("--etcd", o->etcd, "etcd endpoints host:port (comma-separated), with --name.")
      ->delimiter(',')
      ->capture_default_str();
  run->add_option("--gateway", o->gateway,
                  "Where infer and memory steps go: the gateway (or a dais serve / node), "
                  "http://HOST:PORT. Default: a gateway registered in etcd (with --name).");
  run->add_option("--features-url", o->features_url,
                  "The feature server of features steps (Feast's /get-online-features; default: "
                  "--gateway).");
  run->add_option("--token", o->token,
                  "Bearer token for the gateway (the agent's tenant). Default: the environment "
                  "variable DAIS_AGENT_TOKEN (how a node passes it).");
  run->add_option("--txn-url", o->txn_url,
                  "dais txn (http://HOST:PORT) for txn steps (POST /v1/txn/<type>, keyed by the "
                  "run: Idempotency-Key <agent>:<run id>:<step>).");
  run->add_option("--consumer", o->consumer,
                  "This runtime's name in the trigger's consumer group: keep it across restarts "
                  "so that its unfinished runs are resumed (default: the host name).");
  run->add_option("--workers", o->workers,
                  "Runs at once (threads). Default: the agent's concurrency.")
      ->check(CLI::Range(1, 256));
  run->add_option("--retry-after-ms", o->retry_after_ms,
                  "A failed run's trigger is tried again after this long (also: how long another "
                  "runtime's unfinished run waits before this one takes it over).")
      ->capture_default_str()
      ->check(CLI::Range(100, 86400000));
  run->add_option("--emit-max-len", o->emit_max_len,
                  "Streams written by emit steps stay near "
                  "this many entries.")
      ->capture_default_str();
  run->add_option("--http-queue", o->http_queue,
                  "HTTP triggers waiting for a worker; more are answered 503 (Retry-After).")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  run->add_flag("--drain", o->drain,
                "Exit once no new trigger arrives (a batch run; failed runs waiting for their "
                "retry stay pending for the next start).");
  run->add_option("--metrics-port", o->metrics_port,
                  "Port of GET /metrics (dais_agent_*) and, for an agent with trigger.http, POST "
                  "/v1/agents/<name>/runs; 0 picks a free one, logged as 'ports: metrics=N'. "
                  "Default (-1): none (0 with trigger.http).");
  run->add_option("--metrics-address", o->metrics_address, "Address the metrics port binds.")
      ->capture_default_str();
  run->add_option("--advertise-host", o->advertise_host,
                  "Where the gateway reaches this runtime's HTTP trigger (published in etcd). "
                  "Default: --metrics-address (the host name when that is 0.0.0.0).");
  run->add_option("--trigger-key", o->trigger_key,
                  "The key callers of the HTTP trigger send (x-dais-agent-key). Default: a "
                  "random one per start, published in etcd for the gateway (with --name); none "
                  "for a spec file run alone.");
  return cmd;
}

namespace {

StatusOr<agents::AgentSpec> LoadSpec(const AgentCliOptions& o) {
  if (o.file.empty() == o.name.empty()) {
    return InvalidArgument("give --name (an agent applied to etcd) or -f FILE");
  }
  if (!o.file.empty()) {
    std::ifstream f(o.file);
    if (!f) return InvalidArgument("cannot read " + o.file);
    std::stringstream s;
    s << f.rdbuf();
    auto spec = agents::ParseAgentYaml(s.str());
    if (!spec.ok()) return InvalidArgument(o.file + ": " + spec.status().message());
    return spec;
  }
  ASSIGN_OR_RETURN(auto client, etcd::Client::Create({o.etcd}));
  ASSIGN_OR_RETURN(etcd::RangeResult r, client->Get(agents::kAgentsPrefix + o.name));
  if (r.kvs.empty()) {
    return NotFound("no agent " + o.name + " (dais ctl apply it first; dais ctl get agents)");
  }
  return agents::ParseAgentYaml(r.kvs[0].value);
}

// One trigger of the stream: runs it (attempt counted in Redis), then acknowledges it, leaves it
// for a retry, or dead-letters it after max_attempts.
class TriggerHandler {
 public:
  TriggerHandler(const agents::AgentSpec& spec, const AgentCliOptions& o, redis::Client* redis,
                 streams::EventStream* stream, AgentMetrics* metrics, AgentLive* live)
      : spec_(spec), o_(o), redis_(redis), stream_(stream), metrics_(metrics), live_(live) {}

  // True when the run failed and is to be tried again (the entry stays pending).
  bool Handle(const streams::Entry& entry, agents::Actions& actions) {
    const std::string attempts_key = "dais:agent:" + spec_.name + ":attempts";
    auto n = redis_->Run({attempts_key, {"HINCRBY", attempts_key, entry.entry_id, "1"}});
    const int attempt =
        n.ok() && n->type == redis::Reply::Type::kInteger ? static_cast<int>(n->integer) : 1;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(spec_.run_timeout_ms);
    agents::RunTrace t =
        agents::RunAgent(spec_, entry.entry_id, attempt, entry.fields, actions, deadline);
    metrics_->Record(t);
    // The latency the SLA is about: from the trigger's publication (its entry id's milliseconds)
    // to the run's end, time in the backlog included; but not from before this runtime started
    // (a backlog left while the agent was not running is not a shortage of resources now).
    if (t.outcome != "failed") {
      const double published_ms =
          std::max(std::strtod(entry.entry_id.c_str(), nullptr), static_cast<double>(started_ms_));
      const double latency_ms = std::max(0.0, static_cast<double>(UnixMs()) - published_ms);
      live_->RecordRun(latency_ms);
      metrics_->RecordLatency(latency_ms);
    }
    std::vector<redis::KeyedCommand> writes;
    writes.push_back(RunRecord(spec_, o_.runs_max_len, t));
    const bool give_up = t.outcome == "failed" && attempt >= spec_.max_attempts;
    if (give_up) {
      metrics_->dead->Get({spec_.name}).Increment();
      redis::Command c = {"XADD", spec_.DeadLetterStream(), "*", "run_id", t.run_id, "error",
                          t.error};
      for (const auto& [k, v] : entry.fields) c.insert(c.end(), {k, v});
      writes.push_back({spec_.DeadLetterStream(), std::move(c)});
      LOG_WARNING("agent {}: run {} failed {} times, dead-lettered: {}", spec_.name, t.run_id,
                  attempt, t.error);
    } else if (t.outcome == "failed") {
      LOG_INFO("agent {}: run {} attempt {} failed (retried in {} ms): {}", spec_.name, t.run_id,
               attempt, o_.retry_after_ms, t.error);
    }
    const std::vector<StatusOr<redis::Reply>> wrote = redis_->RunBatch(std::move(writes));
    for (size_t i = 0; i < wrote.size(); ++i) {
      if (wrote[i].ok() && !wrote[i]->is_error()) continue;
      const std::string why = wrote[i].ok() ? wrote[i]->str : wrote[i].status().message();
      if (i == 1) {  // the dead letter: without it the trigger stays pending, given up later
        LOG_WARNING("agent {}: run {} not dead-lettered ({}): left pending", spec_.name, t.run_id,
                    why);
        return true;
      }
      LOG_WARNING("agent {}: run {} not recorded: {}", spec_.name, t.run_id, why);
    }
    if (t.outcome != "failed" || give_up) {
      // Acknowledged after the run is recorded: a crash before leaves it pending (run again;
      // its writes are recognised by the run's id).
      if (Status s = stream_->Ack(spec_.TriggerStreamName(), spec_.group, {entry.entry_id});
          !s.ok()) {
        LOG_WARNING("agent {}: ack of {}: {}", spec_.name, entry.entry_id, s.message());
      }
      // A count left behind (Redis away) is harmless: the entry is done.
      (void)redis_->Run({attempts_key, {"HDEL", attempts_key, entry.entry_id}});
      return false;
    }
    return true;
  }

 private:
  const agents::AgentSpec& spec_;
  const AgentCliOptions& o_;
  redis::Client* redis_;
  streams::EventStream* stream_;
  AgentMetrics* metrics_;
  AgentLive* live_;
  const int64_t started_ms_ = UnixMs();
};

// Whether `e` is still pending for `consumer` (not taken over by another, nor acknowledged).
bool StillPending(redis::Client* redis, const std::string& stream, const std::string& group,
                  const std::string& consumer, const streams::Entry& e) {
  auto r = redis->Run({stream, {"XPENDING", stream, group, e.entry_id, e.entry_id, "1", consumer}});
  return r.ok() && r->type == redis::Reply::Type::kArray && !r->elements.empty();
}

// A worker: its own Redis connection for the blocking reads; first what it left unfinished
// (after a restart), then new triggers, and every --retry-after-ms what is pending too long
// (its own failed runs, or another runtime's that died).
void StreamWorker(const agents::AgentSpec& spec, const AgentCliOptions& o,
                  const std::string& consumer, redis::Client* shared, AgentMetrics* metrics,
                  AgentLive* live, std::atomic<bool>* stop, std::atomic<int>* idle_workers) {
  FeatureFlags f;
  f.redis = spec.RedisAddress();
  f.redis_tls = o.redis_tls;
  f.redis_pool = 1;
  auto own = ConnectRedis(f);
  if (!own.ok()) {
    LOG_ERROR("agent {}: redis {}: {}", spec.name, f.redis, own.status().message());
    idle_workers->fetch_add(1);  // (--drain does not wait for it)
    return;
  }
  if (!(*own)->WaitUntilReachable(std::chrono::seconds(5))) {
    LOG_WARNING("agent {}: redis {} not reachable yet (reads retry)", spec.name, f.redis);
  }
  auto reader = streams::MakeRedisEventStream(own->get(), 0);
  auto acker = streams::MakeRedisEventStream(shared, 0);
  const AgentEndpoints endpoints = Endpoints(o);
  AgentActions actions(endpoints, shared);
  TriggerHandler handler(spec, o, shared, acker.get(), metrics, live);
  const std::string stream = spec.TriggerStreamName();
  bool pending = true;
  bool counted_idle = false;
  using Clock = std::chrono::steady_clock;
  std::deque<std::pair<Clock::time_point, streams::Entry>> retries;  // due in order
  auto last_claim = Clock::now();
  const auto retry_after = std::chrono::milliseconds(o.retry_after_ms);
  auto handle = [&](const streams::Entry& e) {
    if (handler.Handle(e, actions)) retries.emplace_back(Clock::now() + retry_after, e);
  };
  // Every run takes the orchestrator's leave first (paused, or throttled and this second's runs
  // spent: wait), before its entry is read or claimed, so that no entry ages while it waits.
  auto admitted = [&] {
    while (!live->Admit()) {
      if (stop->load()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(live->paused() ? 100 : 10));
    }
    return true;
  };
  // One entry at a time (the workers are the concurrency): an entry waiting in a batch behind
  // slow runs would age past the claim's idle time and be run by another worker as well.
  const int64_t claim_idle_ms = std::max<int64_t>(o.retry_after_ms, spec.run_timeout_ms) + 1000;
  while (!stop->load()) {
    if (!retries.empty() && retries.front().first <= Clock::now()) {
      if (!admitted()) break;
      streams::Entry e = std::move(retries.front().second);
      retries.pop_front();
      // Still ours? Claiming it again resets its idle time (no other worker takes it while it
      // runs); nothing comes back when another took it over or it was acknowledged meanwhile.
      auto mine = shared->Run({stream,
                               {"XCLAIM", stream, spec.group, consumer,
                                std::to_string(o.retry_after_ms), e.entry_id, "JUSTID"}});
      if (mine.ok() && mine->type == redis::Reply::Type::kArray && !mine->elements.empty()) {
        handle(e);
      } else {
        live->Refund();  // (not ours any more: no run made)
      }
      continue;
    }
    if (!admitted()) break;
    StatusOr<std::vector<streams::Entry>> batch = std::vector<streams::Entry>();
    const auto now = Clock::now();
    if (now - last_claim >= retry_after) {
      last_claim = now;
      // Another runtime's unfinished runs: not before a run in progress there could have ended,
      // nor before a failed one's retry there was due.
      batch = reader->Claim(stream, spec.group, consumer, static_cast<int>(claim_idle_ms), 1);
    }
    if (batch.ok() && batch->empty()) {
      // Once at the start: what this consumer left unfinished before a restart.
      int64_t block_ms = 500;
      if (!retries.empty()) {
        block_ms = std::clamp<int64_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(retries.front().first - now)
                .count(),
            1, 500);
      }
      batch = reader->Read(stream, spec.group, consumer, pending ? 1000 : 1,
                           pending ? 0 : static_cast<int>(block_ms), pending);
      if (pending && batch.ok() && !batch->empty()) pending = false;
    }
    if (!batch.ok()) {
      LOG_WARNING("agent {}: reading {}: {}", spec.name, stream, batch.status().message());
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    const bool idle = batch->empty() && !pending;  // (retries due later stay pending)
    if (batch->empty() && pending) pending = false;
    if (idle != counted_idle) {
      counted_idle = idle;
      idle_workers->fetch_add(idle ? 1 : -1);
    }
    if (batch->empty()) live->Refund();  // (nothing came: the leave taken is given back)
    for (size_t i = 0; i < batch->size(); ++i) {
      if (stop->load()) break;  // (the rest stays pending)
      const streams::Entry& e = (*batch)[i];
      // A claim also returns this worker's own failed runs waiting for their retry.
      const bool queued = std::any_of(retries.begin(), retries.end(), [&](const auto& r) {
        return r.second.entry_id == e.entry_id;
      });
      // (The first was admitted before the read; a restart's pending ones come in a batch, and
      // one that waited for its leave may have been taken over meanwhile: still ours?)
      if (queued) continue;
      if (i > 0 && (!admitted() || !StillPending(shared, stream, spec.group, consumer, e))) {
        continue;
      }
      handle(e);
    }
  }
}

// A timer agent: one run per period, taken by one runtime (a marker per period in Redis).
void TimerLoop(const agents::AgentSpec& spec, const AgentCliOptions& o, redis::Client* redis,
               AgentMetrics* metrics, AgentLive* live, std::atomic<bool>* stop) {
  const AgentEndpoints endpoints = Endpoints(o);
  AgentActions actions(endpoints, redis);
  while (!stop->load()) {
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    const int64_t slot = now_ms / spec.trigger_every_ms;
    const std::string key = "dais:agent:" + spec.name + ":slot:" + std::to_string(slot);
    auto taken = redis->Run(
        {key, {"SET", key, o.consumer, "NX", "PX", std::to_string(spec.trigger_every_ms * 2)}});
    if (!live->paused() && taken.ok() && taken->type == redis::Reply::Type::kStatus) {
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(spec.run_timeout_ms);
      const std::string run_id = "t" + std::to_string(slot);
      agents::RunTrace t = agents::RunAgent(spec, run_id, 1, agents::Fields(), actions, deadline);
      metrics->Record(t);
      if (t.outcome != "failed") {
        const double late_ms = static_cast<double>(UnixMs() - slot * spec.trigger_every_ms);
        live->RecordRun(late_ms);
        metrics->RecordLatency(late_ms);
      }
      auto recorded = redis->Run(RunRecord(spec, o.runs_max_len, t));
      if (!recorded.ok()) {
        LOG_WARNING("agent {}: run {} not recorded: {}", spec.name, t.run_id,
                    recorded.status().message());
      }
    }
    const int64_t next = (slot + 1) * spec.trigger_every_ms;
    while (!stop->load() && std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                    .count() < next) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

// The first gateway registered in the cluster (http://HOST:PORT), or empty.
std::string RegisteredGateway(etcd::Client& etcd) {
  auto g = etcd.Get(gateway::kGatewaysPrefix, true);
  if (!g.ok()) return "";
  for (const auto& kv : g->kvs) {
    rapidjson::Document d;
    if (json::ParseJson(kv.value, &d).ok() && d.IsObject() && d.HasMember("http") &&
        d["http"].IsString()) {
      return std::string("http://") + d["http"].GetString();
    }
  }
  return "";
}

// The agent's spec, and the options it completes (workers, consumer).
StatusOr<agents::AgentSpec> Prepare(AgentCliOptions* o) {
  ASSIGN_OR_RETURN(agents::AgentSpec spec, LoadSpec(*o));
  if (o->workers == 0) o->workers = spec.concurrency;
  if (o->drain && spec.trigger_stream.empty()) {
    return InvalidArgument("--drain is for a stream trigger (" + spec.name + " has none)");
  }
  if (o->consumer.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    o->consumer = host;
  }
  return spec;
}

// The timer's loop, or the stream's workers.
Status StartTriggers(const agents::AgentSpec& spec, const AgentCliOptions& o, redis::Client* redis,
                     AgentMetrics* metrics, AgentLive* live, std::atomic<bool>* stop,
                     std::atomic<int>* idle, std::vector<std::thread>* threads) {
  if (spec.trigger_every_ms > 0) {
    threads->emplace_back(TimerLoop, std::cref(spec), std::cref(o), redis, metrics, live, stop);
  }
  if (spec.trigger_stream.empty()) return OkStatus();
  auto group = streams::MakeRedisEventStream(redis, 0);
  if (Status s = group->EnsureGroup(spec.TriggerStreamName(), spec.group); !s.ok()) {
    return Unavailable("consumer group " + spec.group + ": " + s.message());
  }
  for (int i = 0; i < o.workers; ++i) {
    threads->emplace_back(StreamWorker, std::cref(spec), std::cref(o),
                          o.consumer + "-" + std::to_string(i), redis, metrics, live, stop, idle);
  }
  return OkStatus();
}

// The metrics port (none with --metrics-port -1), with the HTTP trigger's route when `http`.
StatusOr<std::unique_ptr<frontends::http::Server>> StartPort(const agents::AgentSpec& spec,
                                                             const AgentCliOptions& o,
                                                             AgentHttpTrigger* http,
                                                             AgentLive* live) {
  if (o.metrics_port < 0) return std::unique_ptr<frontends::http::Server>();
  ExtraRoute extra = nullptr;
  if (http != nullptr) {
    extra = [http](const frontends::http::Request& r, frontends::http::Responder& w) {
      return http->Handle(r, w);
    };
  }
  // Room for the HTTP trigger's calls waiting (workers and queue) beside the scrapes.
  const int connections = http != nullptr ? o.workers + o.http_queue + 64 : 64;
  auto server = MetricsServer(o.metrics_address, o.metrics_port, std::move(extra), connections);
  RETURN_IF_ERROR(server->Start());
  LOG_INFO("ports: metrics={}", server->port());
  if (http != nullptr) {
    std::string host = o.advertise_host.empty() ? o.metrics_address : o.advertise_host;
    if (host == "0.0.0.0" || host == "::") {
      char name[256] = {};
      gethostname(name, sizeof(name) - 1);
      host = name;
    }
    const std::string address = host + ":" + std::to_string(server->port());
    live->SetEndpoint(address, spec.tenant, spec.run_timeout_ms, o.trigger_key);
    LOG_INFO("agent {}: HTTP trigger POST http://{}{}", spec.name, address, http->path());
  }
  return server;
}

// The HTTP trigger (null without trigger.http). Its key: --trigger-key, else a random one when
// the endpoint is published in etcd (only the gateway, reading etcd, learns it); none for a spec
// file run alone (called directly). With another trigger too, the workers are split between
// them (the agent's concurrency holds for the runtime).
std::unique_ptr<AgentHttpTrigger> MakeHttpTrigger(const agents::AgentSpec& spec, AgentCliOptions* o,
                                                  redis::Client* redis, AgentMetrics* metrics,
                                                  AgentLive* live) {
  if (!spec.trigger_http) return nullptr;
  if (o->trigger_key.empty() && !o->name.empty()) {
    std::random_device random;
    for (int i = 0; i < 4; ++i) o->trigger_key += fmt::format("{:08x}", random());
  }
  // With a stream trigger too, the workers are split (at least one each: a concurrency of 1
  // runs up to two at once then). A timer runs one run per period on its own thread.
  int http_workers = o->workers;
  if (!spec.trigger_stream.empty()) {
    http_workers = std::max(1, o->workers / 2);
    o->workers = std::max(1, o->workers - http_workers);
  }
  if (o->metrics_port < 0) o->metrics_port = 0;
  return std::make_unique<AgentHttpTrigger>(spec, *o, redis, metrics, live, http_workers,
                                            static_cast<size_t>(o->http_queue), o->trigger_key);
}

std::string TriggerText(const agents::AgentSpec& spec) {
  std::string text = spec.trigger_every_ms > 0 ? fmt::format("every {} ms", spec.trigger_every_ms)
                     : spec.trigger_stream.empty() ? ""
                                                   : "stream " + spec.trigger_stream;
  if (spec.trigger_http) text += text.empty() ? "HTTP" : " and HTTP";
  return text;
}

}  // namespace

int RunAgentCommand(const AgentCliOptions& in) {
  AgentCliOptions o = in;
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  if (o.token.empty()) {
    if (const char* t = std::getenv("DAIS_AGENT_TOKEN"); t != nullptr) o.token = t;
  }
  auto spec = Prepare(&o);
  if (!spec.ok()) {
    LOG_ERROR("dais agent run: {}", spec.status().message());
    return 2;
  }
  const std::string address = spec->RedisAddress();
  FeatureFlags f;
  f.redis = address;
  f.redis_tls = o.redis_tls;
  auto redis = ConnectRedis(f);
  if (!redis.ok() || !(*redis)->WaitUntilReachable(std::chrono::seconds(10))) {
    LOG_ERROR("dais agent run: redis {}: {}", address,
              redis.ok() ? "not reachable" : redis.status().message());
    return 2;
  }
  AgentMetrics metrics(spec->name);
  std::unique_ptr<etcd::Client> etcd;
  if (!o.name.empty()) {
    auto c = etcd::Client::Create({o.etcd});
    if (!c.ok()) {
      LOG_ERROR("dais agent run: --etcd: {}", c.status().message());
      return 2;
    }
    etcd = std::move(*c);
  }
  if (o.gateway.empty() && etcd) o.gateway = RegisteredGateway(*etcd);
  if (o.gateway.empty()) {
    LOG_ERROR("dais agent run: no --gateway, and no gateway registered in etcd");
    return 2;
  }
  AgentLive live(spec->name, o.consumer, etcd.get(), redis->get(), spec->TriggerStreamName(),
                 spec->group, std::chrono::milliseconds(spec->sla_window_ms));
  std::unique_ptr<AgentHttpTrigger> http =
      MakeHttpTrigger(*spec, &o, redis->get(), &metrics, &live);
  auto metrics_server = StartPort(*spec, o, http.get(), &live);
  if (!metrics_server.ok()) {
    LOG_ERROR("dais agent run: --metrics-port: {}", metrics_server.status().message());
    return 2;
  }
  live.Start();
  std::atomic<bool> stop{false};
  std::atomic<int> idle{0};
  std::vector<std::thread> threads;
  // Stops the triggers: the HTTP one is withdrawn from etcd first (the gateway stops sending),
  // then the runs in progress end and their calls are answered, later ones refused.
  auto shut_down = [&] {
    live.WithdrawEndpoint();
    stop = true;
    for (auto& t : threads) t.join();
    if (http) http->Close();
    if (*metrics_server) (*metrics_server)->Stop();
  };
  if (Status s = StartTriggers(*spec, o, redis->get(), &metrics, &live, &stop, &idle, &threads);
      !s.ok()) {
    LOG_ERROR("dais agent run: {}", s.message());
    shut_down();
    return 2;
  }
  LOG_INFO("agent {} running ({}; {} step(s); consumer {})", spec->name, TriggerText(*spec),
           spec->steps.size(), o.consumer);
  const pthread_t main_thread = pthread_self();
  std::thread drain_watch;
  if (o.drain) {
    drain_watch = std::thread([&] {
      while (!stop.load() && idle.load() < o.workers) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      pthread_kill(main_thread, SIGUSR1);
    });
  }
  int sig = 0;
  sigwait(&sigs, &sig);
  LOG_INFO("agent {}: {}: stopping after the runs in progress", spec->name,
           sig == SIGUSR1  ? "drained"
           : sig == SIGINT ? "SIGINT"
                           : "SIGTERM");
  stop = true;
  if (drain_watch.joinable()) drain_watch.join();
  shut_down();
  return 0;
}

}  // namespace dais::cmd
