#include "cmd/console.h"

#include <fmt/format.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <set>

#include "cluster/events.h"
#include "cluster/keys.h"
#include "cmd/console_assets.h"
#include "cmd/console_state.h"
#include "cmd/ctl_rollout.h"
#include "cmd/metrics_port.h"
#include "common/json.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "etcd/client.h"
#include "gateway/jwt.h"
#include "metrics/registry.h"

namespace dais::cmd {
namespace {

namespace http = frontends::http;

http::Response JsonAnswer(int status, const std::string& body) {
  http::Response r{status, "application/json", body, {}};
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

http::Response Error(int status, const std::string& message) {
  return JsonAnswer(status, "{\"error\":" + JsonQuoted(message) + "}");
}

// The open event streams; a published change goes to each, a closed one is dropped.
class Broadcaster {
 public:
  void Add(std::shared_ptr<http::StreamSink> sink, const std::string& state,
           const std::string& metrics) {
    sink->Send(Frame("state", state) + Frame("metrics", metrics));
    MutexLock l(&mu_);
    if (closed_) return sink->Close();
    sinks_.push_back(std::move(sink));
  }
  void Publish(const std::string& event, const std::string& json) {
    const std::string frame = Frame(event, json);
    MutexLock l(&mu_);
    std::erase_if(sinks_, [&](const auto& s) { return !s->Send(frame); });
  }
  size_t size() {
    MutexLock l(&mu_);
    std::erase_if(sinks_, [](const auto& s) { return !s->open(); });
    return sinks_.size();
  }
  void CloseAll() {
    MutexLock l(&mu_);
    for (auto& s : sinks_) s->Close();
    sinks_.clear();
    closed_ = true;  // from now on nothing is kept: the server's I/O is about to stop
  }

 private:
  static std::string Frame(const std::string& event, const std::string& json) {
    return "event: " + event + "\ndata: " + json + "\n\n";  // json has no newline
  }
  Mutex mu_;
  std::vector<std::shared_ptr<http::StreamSink>> sinks_ DAIS_GUARDED_BY(mu_);
  bool closed_ DAIS_GUARDED_BY(mu_) = false;
};

struct Caller {
  bool ok = false;
  bool admin = false;
  std::string who;     // the token's subject
  std::string reason;  // !ok: why
};

class Console {
 public:
  Console(const ConsoleCliOptions& o, etcd::Client* etcd) : o_(o), etcd_(etcd) {
    const size_t eq = o.admin_claim.find('=');
    admin_claim_ = o.admin_claim.substr(0, eq);
    admin_value_ = eq == std::string::npos ? "true" : o.admin_claim.substr(eq + 1);
    policy_.issuer = o.jwt_issuer;
    policy_.audiences = o.jwt_audiences;
    auto& r = metrics::Registry::Global();
    actions_ = &r.AddCounter("dais_console_actions_total",
                             "Operator actions taken or refused through the console",
                             {"action", "outcome"});
    clients_ = &r.AddGauge("dais_console_clients", "Open event streams (browsers)", {});
  }

  Status LoadKeys() {
    if (o_.jwks.empty()) return OkStatus();
    jwks_ = std::make_unique<gateway::JwksFile>(o_.jwks);
    return jwks_->Load();
  }

  void Handle(const http::Request& r, const http::Responder& w, ConsoleState& state) {
    if (r.method == "GET" && (r.path == "/" || r.path == "/index.html"))
      return Asset("index.html", w);
    if (r.method == "GET" && FindAsset(r.path.substr(1)) != nullptr)
      return Asset(r.path.substr(1), w);
    if (r.method == "GET" && r.path == "/api/state") return w(JsonAnswer(200, state.State()));
    if (r.method == "GET" && r.path == "/api/metrics") return w(JsonAnswer(200, state.Metrics()));
    if (r.method == "GET" && r.path == "/api/stream") {
      http::Response s{200, "text/event-stream", "", {}};
      s.stream = [this, &state](std::shared_ptr<http::StreamSink> sink) {
        streams_.Add(std::move(sink), state.State(), state.Metrics());
        clients_->Get({}).Set(static_cast<double>(streams_.size()));
      };
      return w(std::move(s));
    }
    if (r.method == "GET" && r.path == "/api/whoami") {
      const Caller c = Authenticate(r);
      if (!c.ok) return w(Error(401, c.reason));
      return w(JsonAnswer(
          200, fmt::format(R"({{"subject":{},"admin":{}}})", JsonQuoted(c.who), c.admin)));
    }
    if (r.path == "/api/actions") {
      if (r.method != "POST") return w(Error(405, "POST an action"));
      return w(Act(r));
    }
    w(Error(404, "no such page: " + r.path));
  }

  void Publish(const std::string& event, const std::string& json) {
    streams_.Publish(event, json);
    clients_->Get({}).Set(static_cast<double>(streams_.size()));
  }
  void CloseStreams() { streams_.CloseAll(); }

 private:
  static void Asset(const std::string& name, const http::Responder& w) {
    const ConsoleAsset* a = FindAsset(name);
    http::Response r{200, std::string(a->content_type), std::string(a->body), {}};
    // No inline script or style anywhere: a script injected through a cluster object's name
    // (rendered as text anyway) could not run.
    r.headers.emplace_back("Content-Security-Policy",
                           "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'");
    r.headers.emplace_back("X-Content-Type-Options", "nosniff");
    r.compressible = true;
    w(std::move(r));
  }

  Caller Authenticate(const http::Request& r) const {
    Caller c;
    if (!jwks_) {
      c.reason = "the console was started without --jwks: it is read-only";
      return c;
    }
    const std::string_view header = r.Header("authorization");
    if (header.size() < 8 || header.substr(0, 7) != "Bearer ") {
      c.reason = "an Authorization: Bearer token is required";
      return c;
    }
    auto keys = jwks_->Current();
    const gateway::JwtResult v =
        gateway::VerifyJwt(header.substr(7), *keys, policy_, std::chrono::system_clock::now());
    if (!v.ok) {
      c.reason = "token refused: " + v.message;
      return c;
    }
    c.ok = true;
    c.who = v.claims.subject.empty() ? "(no subject)" : v.claims.subject;
    auto claim = v.claims.strings.find(admin_claim_);
    c.admin = claim != v.claims.strings.end() && claim->second == admin_value_;
    return c;
  }

  http::Response Act(const http::Request& r) {
    // Not a form post from another site: a cross-site page cannot send this header or type
    // without the browser asking the console first (CORS preflight, which it does not grant).
    // An Origin ("scheme://host[:port]", or "null" from a sandboxed page) must name this host.
    const std::string_view origin = r.Header("origin");
    const size_t scheme = origin.find("://");
    if (!origin.empty() &&
        (scheme == std::string_view::npos || origin.substr(scheme + 3) != r.Header("host"))) {
      return Count("unknown", "refused", Error(403, "cross-origin action refused"));
    }
    rapidjson::Document d;
    if (!json::ParseJson(r.body, &d).ok() || !d.IsObject() || !d.HasMember("action") ||
        !d["action"].IsString() || !d.HasMember("target") || !d["target"].IsString()) {
      return Count("unknown", "refused",
                   Error(400, R"(the body must be {"action": "...", "target": "..."})"));
    }
    const std::string action = d["action"].GetString(), target = d["target"].GetString();
    static const std::set<std::string> kActions = {"rollback", "pause",    "resume", "promote",
                                                   "cordon",   "uncordon", "drain"};
    if (kActions.count(action) == 0) {
      return Count("unknown", "refused",
                   Error(400, "unknown action '" + action +
                                  "' (rollback, pause, resume, promote, cordon, uncordon, drain)"));
    }
    const Caller c = Authenticate(r);
    if (!c.ok) return Count(action, "refused", Error(401, c.reason));
    if (!c.admin) {
      return Count(action, "refused",
                   Error(403, c.who + " may look but not act: the token's " + admin_claim_ +
                                  " claim is not " + admin_value_));
    }
    if (target.empty() || target.size() > 253) {
      return Count(action, "refused", Error(400, "the target must be a route or node name"));
    }
    StatusOr<std::string> done = Do(action, target, c.who);
    if (!done.ok()) {
      const StatusCode code = done.status().code();
      const int status = code == StatusCode::kNotFound             ? 404
                         : code == StatusCode::kFailedPrecondition ? 409
                         : code == StatusCode::kInvalidArgument    ? 400
                                                                   : 503;
      return Count(action, "failed", Error(status, std::string(done.status().message())));
    }
    Record(action, target, c.who, *done);
    LOG_INFO("console: {} by {}: {}", action, c.who, *done);
    return Count(action, "done", JsonAnswer(200, "{\"message\":" + JsonQuoted(*done) + "}"));
  }

  StatusOr<std::string> Do(const std::string& action, const std::string& target,
                           const std::string& who) {
    if (action == "cordon" || action == "uncordon" || action == "drain") {
      ASSIGN_OR_RETURN(etcd::RangeResult node, etcd_->Get(cluster::NodeKey(target)));
      if (node.kvs.empty()) return Status(StatusCode::kNotFound, "no node '" + target + "'");
      const std::string key = std::string(cluster::kCordonedPrefix) + target;
      if (action == "uncordon") {
        RETURN_IF_ERROR(etcd_->Delete(key).status());
        return "node " + target + " uncordoned";
      }
      RETURN_IF_ERROR(etcd_->Put(key, action).status());
      return "node " + target +
             (action == "drain" ? " draining (its instances move elsewhere)" : " cordoned");
    }
    return DecideRollout(*etcd_, target, action, who + " (console)");
  }

  // The action as a cluster event (`dais ctl get events`, the console's list), naming who.
  void Record(const std::string& action, const std::string& target, const std::string& who,
              const std::string& what) {
    cluster::ClusterEvent e;
    e.time_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
    e.kind = "action";
    e.node = action == "cordon" || action == "uncordon" || action == "drain" ? target : "";
    e.message = what + " (by " + who + " through the console)";
    e.scheduler = "console";
    auto lease = etcd_->GrantLease(3600);  // events live an hour, as the scheduler's
    if (!lease.ok() || !etcd_->Put(e.Key(++sequence_), e.ToJson(), *lease).ok()) {
      LOG_WARNING("console: the event of {} on {} was not written", action, target);
    }
  }

  http::Response Count(const std::string& action, const char* outcome, http::Response r) {
    actions_->Get({action, outcome}).Increment();
    return r;
  }

  const ConsoleCliOptions& o_;
  etcd::Client* etcd_;
  std::string admin_claim_, admin_value_;
  gateway::JwtPolicy policy_;
  std::unique_ptr<gateway::JwksFile> jwks_;
  Broadcaster streams_;
  std::atomic<int64_t> sequence_{0};
  metrics::Family<metrics::Counter>* actions_;
  metrics::Family<metrics::Gauge>* clients_;
};

}  // namespace

CLI::App* AddConsoleCommand(CLI::App* app, ConsoleCliOptions* o) {
  CLI::App* cmd = app->add_subcommand(
      "console",
      "The operator's web page for the cluster: nodes and GPUs, deployments, routes, rollouts "
      "with live plots, events, alerts; rollback / pause / cordon with an admin token");
  cmd->add_option("--etcd", o->etcd, "etcd endpoints host:port (comma-separated or repeated).")
      ->delimiter(',')
      ->required()
      ->envname("DAIS_ETCD");
  cmd->add_option("--http-address", o->http_address,
                  "Address the page binds (loopback by default: reading needs no token).")
      ->capture_default_str();
  cmd->add_option("--http-port", o->http_port, "Port of the page (0: a free one, logged).")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--jwks", o->jwks,
                  "JWKS file of the keys that sign operators' tokens (the gateway's format); "
                  "without it the console is read-only.");
  cmd->add_option("--jwt-issuer", o->jwt_issuer, "Required 'iss' of tokens (default: any).");
  cmd->add_option("--jwt-audience", o->jwt_audiences, "Accepted 'aud' values (repeatable).");
  cmd->add_option("--admin-claim", o->admin_claim,
                  "claim=value a token needs to act; other valid tokens may only look.")
      ->capture_default_str();
  cmd->add_option("--scrape-interval-ms", o->scrape_ms,
                  "How often the gateways' and nodes' /metrics are read for the plots.")
      ->check(CLI::Range(200, 60000))
      ->capture_default_str();
  cmd->add_option("--scrape", o->scrape,
                  "More /metrics targets host:port (a dais txn serve's metrics port; repeatable).");
  cmd->add_option("--prometheus", o->prometheus,
                  "host:port of a Prometheus that scrapes the cluster: the plots and figures "
                  "from its queries, the alerts that fire from its rules (default: the console "
                  "reads the gateways' and nodes' /metrics itself).");
  cmd->add_option("--p1-p99-ms", o->p1_p99_ms, "P1 alert: a route's p99 above this.")
      ->capture_default_str();
  cmd->add_option("--p2-miss-ratio", o->p2_miss_ratio, "P2 alert: feature misses above this.")
      ->capture_default_str();
  return cmd;
}

int RunConsole(const ConsoleCliOptions& o) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  auto client = etcd::Client::Create({o.etcd});
  if (!client.ok()) {
    LOG_ERROR("dais console: {}", client.status().message());
    return 2;
  }
  Console console(o, client->get());
  if (Status s = console.LoadKeys(); !s.ok()) {
    LOG_ERROR("dais console: --jwks: {}", s.message());
    return 2;
  }
  ConsoleState::Options so;
  so.scrape_every = std::chrono::milliseconds(o.scrape_ms);
  so.extra_targets = o.scrape;
  so.p1_p99_ms = o.p1_p99_ms;
  so.p2_miss_ratio = o.p2_miss_ratio;
  so.prometheus = o.prometheus;
  ConsoleState state(client->get(), so, [&console](const std::string& e, const std::string& j) {
    console.Publish(e, j);
  });
  auto server =
      MetricsServer(o.http_address, o.http_port, [&](const http::Request& r, http::Responder& w) {
        console.Handle(r, w, state);
        return true;
      });
  if (Status s = server->Start(); !s.ok()) {
    LOG_ERROR("dais console: {}", s.message());
    return 2;
  }
  LOG_INFO("dais console at http://{}:{}/ (etcd {}; actions {})", o.http_address, server->port(),
           o.etcd.front(), o.jwks.empty() ? "off: no --jwks" : "with an admin token");
  LOG_INFO("ports: http={}", server->port());
  int sig = 0;
  sigwait(&stop, &sig);
  LOG_INFO("dais console: {}, stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
  console.CloseStreams();
  server->Stop();
  return 0;
}

}  // namespace dais::cmd
