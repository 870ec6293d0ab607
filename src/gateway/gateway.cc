#include "gateway/gateway.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "cluster/agent_placement.h"
#include "cluster/keys.h"
#include "common/ascii.h"
#include "common/json.h"
#include "common/logging.h"
#include "gateway/gateway_impl.h"
#include "gateway/gateway_metrics.h"
#include "gateway/rollout.h"

namespace dais::gateway {
namespace {

using frontends::http::Request;
using frontends::http::Responder;
using frontends::http::Response;

}  // namespace

Response Error(int status, const std::string& message) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("error");
  w.String(message.data(), static_cast<rapidjson::SizeType>(message.size()));
  w.EndObject();
  return Response{status, "application/json", sb.GetString(), {}};
}

namespace {

// /v2/models/<alias>[/versions/<v>]<suffix>, suffix "" | /ready | /config | /infer | /stats.
struct ModelPath {
  std::string alias;
  int64_t version = -1;
  std::string suffix;
};

std::optional<ModelPath> ParseModelPath(const std::string& path) {
  static const std::string kPrefix = "/v2/models/";
  if (path.rfind(kPrefix, 0) != 0) return std::nullopt;
  std::string rest = path.substr(kPrefix.size());
  ModelPath p;
  const size_t slash = rest.find('/');
  p.alias = rest.substr(0, slash);
  rest = slash == std::string::npos ? "" : rest.substr(slash);
  if (p.alias.empty()) return std::nullopt;
  if (rest.rfind("/versions/", 0) == 0) {
    rest = rest.substr(10);
    const size_t end = rest.find('/');
    const std::string v = rest.substr(0, end);
    if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos) {
      return std::nullopt;
    }
    p.version = std::stoll(v);
    rest = end == std::string::npos ? "" : rest.substr(end);
  }
  if (rest != "" && rest != "/ready" && rest != "/config" && rest != "/infer" && rest != "/stats") {
    return std::nullopt;
  }
  p.suffix = rest;
  return p;
}

bool HopByHop(std::string_view name) {
  return name == "connection" || name == "keep-alive" || name == "transfer-encoding" ||
         name == "te" || name == "upgrade" || name == "host" || name == "content-length" ||
         name == "authorization" || name == "content-encoding" || name == "accept-encoding" ||
         name == "proxy-authorization" || name == "proxy-connection" || name == "trailer" ||
         name == "expect";  // the gateway has the whole body: no 100-continue to the node
}

// Whether the Connection header's value names `name` (a lower-case header name) as a token.
bool NamedByConnection(std::string_view connection, std::string_view name) {
  for (size_t i = 0; i <= connection.size();) {
    size_t end = connection.find(',', i);
    if (end == std::string_view::npos) end = connection.size();
    std::string_view token = connection.substr(i, end - i);
    while (!token.empty() && (token.front() == ' ' || token.front() == '\t'))
      token.remove_prefix(1);
    while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
    if (!token.empty() && EqualsIgnoreCase(token, name)) return true;
    i = end + 1;
  }
  return false;
}

}  // namespace

// The client's headers that go on to the node: not the hop-by-hop ones, nor those the client's
// Connection header names (RFC 9110 7.6.1), nor the hop count (the caller adds its own).
template <class F>
void ForEachForwardedHeader(const Request& r, F&& f) {
  const std::string_view connection = r.Header("connection");
  for (const auto& [k, v] : r.headers) {
    if (!HopByHop(k) && k != kHopsHeader &&
        (connection.empty() || !NamedByConnection(connection, k))) {
      f(k, v);
    }
  }
}

std::vector<std::pair<std::string, std::string>> ForwardedHeaders(const Request& r) {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(r.headers.size() + 3);  // and the hop count, traceparent, x-request-id
  ForEachForwardedHeader(
      r, [&out](const std::string& k, const std::string& v) { out.emplace_back(k, v); });
  out.emplace_back(kHopsHeader, std::to_string(Hops(r.Header(kHopsHeader)) + 1));
  return out;
}

int Hops(std::string_view header) {
  int n = 0;
  auto r = std::from_chars(header.data(), header.data() + header.size(), n);
  return r.ec == std::errc() && n >= 0 ? std::min(n, 1000) : 0;
}

std::optional<Response> RefuseLoop(std::string_view header) {
  const int hops = Hops(header);
  if (hops < kMaxHops) return std::nullopt;
  return Error(508, "forwarding loop: the request has passed " + std::to_string(hops) +
                        " dais gateways (x-dais-hops); a node address in etcd points at a "
                        "gateway?");
}

Gateway::Impl::Impl(GatewayOptions o, boost::asio::io_context* io)
    : options(std::move(o)),
      balancer(options.balancer),
      budget(options.retry_budget),
      pool(io != nullptr
               ? UpstreamPool(io, UpstreamOptions{0, 256, 256ull << 20, options.upstream_tls,
                                                  options.upstream_tls_name})
               : UpstreamPool(UpstreamOptions{options.upstream_threads, 256, 256ull << 20,
                                              options.upstream_tls, options.upstream_tls_name})),
      // With threads of its own for the nodes (--upstream-threads), gRPC uses them too.
      grpc(&pool.io_context(), 64u << 20, options.upstream_tls, options.upstream_tls_name,
           std::max(1, options.grpc_connections_per_node), /*on_callers_thread=*/io != nullptr) {}

// Routes and tenants written straight into etcd are checked as they arrive: an invalid one is
// refused (logged, counted) and the last good version under that key stays in force (issue 32:
// it replaced the good one, and the alias answered 404). Other prefixes are taken as they are.
bool Gateway::Impl::Accept(const std::string& prefix, const std::string& key,
                           const std::string& value) {
  Status s = OkStatus();
  const char* kind = "";
  const bool spec = prefix == kRoutesPrefix || prefix == kTenantsPrefix;
  if (spec && value.size() > kMaxSpecDocumentBytes) {
    kind = prefix == kRoutesPrefix ? "route" : "tenant";
    s = InvalidArgument("a document of " + std::to_string(value.size()) +
                        " bytes, over the limit of " + std::to_string(kMaxSpecDocumentBytes));
  } else if (prefix == kRoutesPrefix) {
    kind = "route";
    s = specs.Route(key, value) ? OkStatus() : ParseRoute(value).status();
  } else if (prefix == kTenantsPrefix) {
    kind = "tenant";
    s = specs.Tenant(key, value) ? OkStatus() : ParseTenant(value).status();
  }
  if (s.ok()) return true;
  GatewayMetrics::Get().config_refused.Get({kind}).Increment();
  LOG_WARNING("gateway: refusing the {} at {} (the last good one stays in force): {}", kind, key,
              s.message());
  return false;
}

void Gateway::Impl::Watch(const std::string& prefix, std::map<std::string, std::string>* kv) {
  etcd::Watcher::Callbacks cb;
  // Documents are checked (parsed) before the lock, which requests take too.
  cb.on_snapshot = [this, prefix, kv](const etcd::RangeResult& r) DAIS_NO_THREAD_SAFETY_ANALYSIS {
    std::vector<bool> ok;
    for (const auto& e : r.kvs) ok.push_back(Accept(prefix, e.key, e.value));
    Rebuild([&r, &ok, kv, this] {
      std::map<std::string, std::string> next;
      for (size_t i = 0; i < r.kvs.size(); ++i) {
        const auto& e = r.kvs[i];
        if (ok[i]) {
          next[e.key] = e.value;
        } else if (auto old = kv->find(e.key); old != kv->end()) {
          next[e.key] = old->second;  // after a resync: the last good one
        }
      }
      *kv = std::move(next);
      ++snapshots_applied;
    });
  };
  cb.on_events = [this, prefix,
                  kv](const std::vector<etcd::Event>& events) DAIS_NO_THREAD_SAFETY_ANALYSIS {
    std::vector<bool> ok;
    for (const auto& e : events) {
      ok.push_back(e.type != etcd::Event::Type::kPut || Accept(prefix, e.kv.key, e.kv.value));
    }
    Rebuild([&events, &ok, kv] {
      for (size_t i = 0; i < events.size(); ++i) {
        const auto& e = events[i];
        if (e.type != etcd::Event::Type::kPut) {
          kv->erase(e.kv.key);
        } else if (ok[i]) {
          (*kv)[e.kv.key] = e.kv.value;
        }
      }
    });
  };
  watchers.push_back(std::make_unique<etcd::Watcher>(client.get(), prefix, std::move(cb)));
}

void Gateway::Impl::Rebuild(const std::function<void()>& change) {
  MutexLock l(&mu);
  change();
  dirty = true;
  rebuild_cv.Signal();
}

// One thread builds the views: a burst of etcd events (N route writes) costs one build per
// wake-up, not one per event (issue 32: 1,000 writes made a change 5.8 s late, 2,000 24.9 s).
// The raw maps are copied under the lock; parsing (cached by SpecCache) happens outside it.
void Gateway::Impl::BuildLoop() {
  while (true) {
    std::map<std::string, std::string> routes_kv, tenants_kv, nodes_kv, instances_kv,
        collections_kv, agents_kv;
    int seen = 0;
    {
      MutexLock l(&mu);
      while (!dirty && !stop.load()) {
        rebuild_cv.WaitUntil(std::chrono::steady_clock::now() + std::chrono::milliseconds(200));
      }
      if (stop.load()) return;
      dirty = false;
      routes_kv = this->routes_kv;
      tenants_kv = this->tenants_kv;
      nodes_kv = this->nodes_kv;
      instances_kv = this->instances_kv;
      collections_kv = this->collections_kv;
      agents_kv = this->agents_kv;
      seen = snapshots_applied;
    }
    std::shared_ptr<View> v =
        BuildView(&specs, routes_kv, tenants_kv, nodes_kv, instances_kv, collections_kv, agents_kv);
    std::set<std::string> live;
    for (const auto& [node, address] : v->node_http) live.insert(node);
    balancer.Retain(live);
    {
      MutexLock l(&mu);
      view = std::move(v);
      view_generation.fetch_add(1);
    }
    snapshots.store(seen);  // ready once a view holding every first snapshot is in place
  }
}

std::optional<Response> Gateway::Impl::Authenticate(const Request& request, std::string* tenant) {
  const size_t authorizations = static_cast<size_t>(
      std::count_if(request.headers.begin(), request.headers.end(),
                    [](const auto& kv) { return kv.first == "authorization"; }));
  return Authenticate(authorizations, request.Header("authorization"), tenant);
}

std::optional<Response> Gateway::Impl::Authenticate(size_t authorization_count,
                                                    std::string_view header, std::string* tenant) {
  if (authorization_count > 1) {
    // Two credentials: a proxy and a backend could each read a different one. Refused whether or
    // not authentication is on (RFC 9110 §5.3: Authorization is not a list).
    GatewayMetrics::Get().auth_failures.Get({"ambiguous"}).Increment();
    return Error(400, "the Authorization header came " + std::to_string(authorization_count) +
                          " times: send one");
  }
  if (!jwks) {
    *tenant = "anonymous";
    return std::nullopt;
  }
  GatewayMetrics& m = GatewayMetrics::Get();
  auto refuse = [&m](const std::string& reason, const std::string& message) {
    m.auth_failures.Get({reason}).Increment();
    Response resp = Error(401, message);
    resp.headers.emplace_back(
        "www-authenticate", "Bearer error=\"invalid_token\", error_description=\"" + reason + "\"");
    return resp;
  };
  if (header.size() < 7 || !EqualsIgnoreCase(header.substr(0, 7), "bearer ")) {
    return refuse("missing", "a bearer token is required (Authorization: Bearer <JWT>)");
  }
  std::shared_ptr<const Jwks> keys = jwks->Current();
  const CachedJwt v =
      jwt_cache->Verify(header.substr(7), keys, options.jwt, std::chrono::system_clock::now());
  m.jwt_cache.Get({v.hit ? "hit" : "miss"}).Increment();
  if (!v.claims) return refuse(v.reason, "invalid token: " + v.message);
  auto it = v.claims->strings.find(options.tenant_claim);
  if (it == v.claims->strings.end() || it->second.empty()) {
    return refuse("no_tenant", "the token has no '" + options.tenant_claim + "' claim");
  }
  *tenant = it->second;
  return std::nullopt;
}

std::optional<Response> Gateway::Impl::Admit(const View& v, const std::string& tenant,
                                             const std::string& alias) {
  auto spec = v.tenants.find(tenant);
  if (spec == v.tenants.end()) {
    if (!jwks) return std::nullopt;  // no authentication: limits only for a declared anonymous
    return Error(403, "tenant '" + tenant + "' is not known to the gateway");
  }
  if (!alias.empty() && !spec->second.Allows(alias)) {
    return Error(403, "tenant '" + tenant + "' may not call '" + alias + "'");
  }
  if (spec->second.requests_per_second <= 0) return std::nullopt;  // no limit: no bucket to lock
  TokenBucket* bucket = nullptr;
  {
    MutexLock l(&buckets_mu);
    auto& entry = buckets[tenant];
    if (!entry.second) {
      entry = {spec->second, std::make_unique<TokenBucket>(spec->second.requests_per_second,
                                                           spec->second.burst, Clock::now())};
    } else if (entry.first.requests_per_second != spec->second.requests_per_second ||
               entry.first.burst != spec->second.burst) {
      entry.first = spec->second;
      entry.second->Reset(spec->second.requests_per_second, spec->second.burst);
    }
    bucket = entry.second.get();
  }
  std::chrono::milliseconds wait{0};
  if (bucket->Take(Clock::now(), &wait)) return std::nullopt;
  GatewayMetrics::Get().rate_limited.Get({tenant}).Increment();
  Response r = Error(429, "tenant '" + tenant + "' is over its limit of " +
                              std::to_string(spec->second.requests_per_second) + " requests/s");
  r.headers.emplace_back("retry-after", std::to_string((wait.count() + 999) / 1000));
  return r;
}

std::optional<std::string> Gateway::Impl::PickNode(const CallPtr& call) {
  const View& v = *call->view;
  const std::vector<std::string>* nodes = v.Nodes(call->model, call->version);
  // Every instance of the version tried (a retry): the stable version's turn.
  const bool exhausted =
      nodes != nullptr && std::all_of(nodes->begin(), nodes->end(), [&call](const std::string& n) {
        return std::find(call->tried.begin(), call->tried.end(), n) != call->tried.end();
      });
  if ((nodes == nullptr || exhausted) && call->route != nullptr && !call->fallback &&
      call->version != call->route->stable && v.Nodes(call->model, call->route->stable)) {
    GatewayMetrics::Get().fallbacks.Get({call->alias}).Increment();
    call->fallback = true;
    call->version = call->route->stable;
    nodes = v.Nodes(call->model, call->version);
  }
  if (nodes == nullptr) {
    Response r = Error(503, "no READY instance of model '" + call->model + "' version " +
                                std::to_string(call->version) +
                                (call->route ? " (route '" + call->alias + "')" : ""));
    if (call->grpc) {
      RefuseGrpc(call, r);
    } else {
      Answer(call, std::move(r), "");
    }
    return std::nullopt;
  }
  std::string node =
      balancer.Pick(*nodes, {call->tried.data(), call->tried.size()}, Random(), Clock::now());
  balancer.Start(node);
  call->tried.push_back(node);
  return node;
}

Clock::time_point Gateway::Impl::TryDeadline(const Call& call) const {
  if (call.route == nullptr || call.route->try_timeout_ms <= 0) return call.deadline;
  return std::min(call.deadline,
                  Clock::now() + std::chrono::milliseconds(call.route->try_timeout_ms));
}

void Gateway::Impl::Try(CallPtr call) {
  std::optional<std::string> node = PickNode(call);
  if (!node) return;
  if (call->grpc) return TryGrpc(call, *node);
  UpstreamRequest up;
  up.method = call->request.method;
  const std::string version = std::to_string(call->version);
  const std::string& query = call->request.query;
  up.target.reserve(21 + call->model.size() + version.size() + call->suffix.size() + 1 +
                    query.size());
  up.target.append("/v2/models/").append(call->model).append("/versions/").append(version);
  up.target.append(call->suffix);
  if (!query.empty()) up.target.append("?").append(query);
  // The headers and the body are not copied: the call (held by `done`) keeps them.
  if (call->traceparent_size == 0) {
    call->hops = std::to_string(Hops(call->request.Header(kHopsHeader)) + 1);
    call->traceparent_size =
        call->trace.HeaderTo(call->span_id, call->traceparent, sizeof(call->traceparent));
  }
  ForEachForwardedHeader(call->request, [&up](std::string_view k, std::string_view v) {
    if (k != "traceparent" && k != "x-request-id") up.header_views.emplace_back(k, v);
  });
  up.header_views.emplace_back(kHopsHeader, call->hops);
  if (call->traceparent_size > 0) {
    up.header_views.emplace_back("traceparent",
                                 std::string_view(call->traceparent, call->traceparent_size));
  } else {  // ids of other sizes (none come from BeginTrace): the header as a string of its own
    up.headers.emplace_back("traceparent", call->trace.Header(call->span_id));
  }
  up.header_views.emplace_back("x-request-id", call->request_id);
  up.shared_body = &call->request.body;
  up.deadline = TryDeadline(*call);
  pool.Send(call->view->node_http.at(*node), std::move(up),
            [this, call, node = *node](UpstreamResult result) {
              OnAnswer(call, node, std::move(result));
            });
}

void Gateway::Impl::Mirror(const Call& call) {
  if (call.grpc) return MirrorGrpc(call);
  const RouteSpec& route = *call.route;
  const std::string version = std::to_string(route.shadow_version);
  GatewayMetrics& m = GatewayMetrics::Get();
  const std::vector<std::string>* nodes = call.view->Nodes(call.model, route.shadow_version);
  if (nodes == nullptr) {
    m.shadow.Get({call.alias, version, "no_instance"}).Increment();
    return;
  }
  const std::string node = balancer.Pick(*nodes, {}, Random(), Clock::now());
  UpstreamRequest up;
  up.method = call.request.method;
  up.target = "/v2/models/" + call.model + "/versions/" + version + call.suffix;
  up.headers = ForwardedHeaders(call.request);
  SetTraceHeaders(call, &up.headers);
  up.body = call.request.body;
  up.deadline = call.deadline;
  pool.Send(call.view->node_http.at(node), std::move(up),
            [alias = call.alias, version](UpstreamResult r) {
              const int status = r.status.ok() ? r.response.status : 0;
              const char* outcome = r.connect_failed ? "connect_failed"
                                    : !r.status.ok() ? "error"
                                    : status >= 500  ? "http_5xx"
                                    : status >= 400  ? "http_4xx"
                                                     : "ok";
              if (r.status.code() == StatusCode::kDeadlineExceeded) outcome = "timeout";
              GatewayMetrics::Get().shadow.Get({alias, version, outcome}).Increment();
            });
}

bool Gateway::Impl::Settle(const Call& call, const std::string& node, bool ok, const char* outcome,
                           bool retryable, const std::string& detail) {
  GatewayMetrics& m = GatewayMetrics::Get();
  const auto now = Clock::now();
  m.upstream.Get({node, outcome}).Increment();
  if (balancer.Finish(node, ok, now)) {
    m.ejections.Get({node}).Increment();
    LOG_WARNING("gateway: node {} ejected after consecutive failures (last: {})", node, detail);
  }
  if (retryable && static_cast<int>(call.tried.size()) < options.max_tries && now < call.deadline &&
      budget.TryRetry(now)) {
    m.retries.Get({call.alias}).Increment();
    return true;
  }
  return false;
}

void Gateway::Impl::OnAnswer(CallPtr call, const std::string& node, UpstreamResult result) {
  const int status = result.status.ok() ? result.response.status : 0;
  const bool ok = result.status.ok() && status < 500;
  const char* outcome = ok                                                      ? "ok"
                        : result.connect_failed                                 ? "connect_failed"
                        : result.status.code() == StatusCode::kDeadlineExceeded ? "timeout"
                        : result.status.ok()                                    ? "http_5xx"
                                                                                : "error";
  // A timeout before the request's deadline is the try's own (try_timeout_ms): another node.
  const bool retryable = result.connect_failed || status == 503 ||
                         result.status.code() == StatusCode::kDeadlineExceeded;
  // The detail names a failure in the ejection's log line: not built for a success.
  if (Settle(*call, node, ok, outcome, retryable,
             ok                   ? std::string()
             : result.status.ok() ? "HTTP " + std::to_string(status)
                                  : result.status.message())) {
    return Try(std::move(call));
  }
  if (!result.status.ok()) {
    const int code = result.status.code() == StatusCode::kDeadlineExceeded ? 504 : 502;
    return Answer(call, Error(code, result.status.message()), node);
  }
  // The node's Content-Type moved in at construction: "application/json", the default, is one
  // byte too long for a string's inline buffer (an allocation per answer otherwise).
  std::string content_type;
  auto& headers = result.response.headers;
  for (auto& [k, val] : headers) {
    if (k == "content-type") content_type = std::move(val);
  }
  // The node's headers that go back, in the vector they came in (reserved by the answer's
  // parser for Answer's five more).
  std::erase_if(headers, [](const auto& kv) {
    return kv.first != "inference-header-content-length" && kv.first != "retry-after";
  });
  Response r{.status = status,
             .content_type = content_type.empty() ? "application/json" : std::move(content_type),
             .body = std::move(result.response.body),
             .headers = std::move(headers),
             // As a node (and Triton): inference answers only.
             .compressible = call->suffix == "/infer"};
  Answer(call, std::move(r), node);
}

void Gateway::Impl::Record(const Call& call, int status, size_t response_bytes,
                           const std::string& node) {
  // Labels only from what the gateway knows (a route, a node that answered), never from the raw
  // path: a client inventing model names or versions must not grow the metrics without bound.
  // Only infer requests are counted: probes and metadata would skew a rollout's analysis.
  if (call.is_infer()) {
    bool known_version = !node.empty();
    if (call.route != nullptr) {
      for (const auto& v : call.route->versions) {
        known_version = known_version || v.version == call.version;
      }
    }
    // A request refused before its route was resolved (401, 403, 429) still counts under its
    // route when the alias is one.
    const bool known_route = call.route != nullptr || !node.empty() ||
                             (call.view ? call.view : Current())->routes.count(call.alias) > 0;
    const std::string route_label = known_route ? call.alias : "-";
    const std::string version_label = known_version ? std::to_string(call.version) : "-";
    GatewayMetrics& m = GatewayMetrics::Get();
    m.requests.Get({route_label, version_label, call.tenant, std::to_string(status)}).Increment();
    m.duration.Get({route_label, version_label})
        .Observe(std::chrono::duration<double>(Clock::now() - call.started).count());
  }
  LogAccess(call, status, response_bytes, node);
  ExportSpan(call, status, node);
}

void Gateway::Impl::Answer(const CallPtr& call, Response response, const std::string& node) {
  Record(*call, response.status, response.body.size(), node);
  response.headers.reserve(response.headers.size() + 5);
  response.headers.emplace_back("x-dais-route", call->alias);
  // Recorded (logged, exported) above: the call's request id is not read after this.
  if (!call->request_id.empty()) {
    response.headers.emplace_back("x-request-id", std::move(call->request_id));
  }
  if (call->version >= 0)
    response.headers.emplace_back("x-dais-version", std::to_string(call->version));
  if (!node.empty()) response.headers.emplace_back("x-dais-node", node);
  if (call->fallback) response.headers.emplace_back("x-dais-fallback", "stable");
  call->respond(std::move(response));
  in_flight.fetch_sub(1);
}

Gateway::Gateway(GatewayOptions options, boost::asio::io_context* io)
    : impl_(std::make_unique<Impl>(std::move(options), io)) {}

Gateway::~Gateway() {
  Stop();
  FILE* log = impl_->access_log;
  impl_.reset();  // the pool first: no answer can log after this
  if (log != nullptr && log != stdout) std::fclose(log);
}

Status Gateway::Start() {
  Impl& g = *impl_;
  if (!g.options.jwks_path.empty()) {
    g.jwks = std::make_unique<JwksFile>(g.options.jwks_path);
    g.jwt_cache = std::make_unique<JwtCache>(g.options.jwt_cache_size);
    RETURN_IF_ERROR(g.jwks->Load());
    LOG_INFO("gateway: {} verification key(s) from {}", g.jwks->Current()->size(),
             g.options.jwks_path);
    g.reloader = std::thread([&g] {
      while (!g.stop.load()) {
        for (int i = 0; i < 10 && !g.stop.load(); ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        if (!g.stop.load() && g.jwks->ReloadIfChanged()) {
          LOG_INFO("gateway: reloaded {} key(s) from {}", g.jwks->Current()->size(),
                   g.options.jwks_path);
        }
      }
    });
  } else {
    LOG_WARNING("gateway: no --jwks: authentication is off (every request is tenant 'anonymous')");
  }
  if (!g.options.otlp_endpoint.empty()) {
    if (!(g.options.trace_sample_rate >= 0 && g.options.trace_sample_rate <= 1)) {
      return InvalidArgument("--trace-sample-rate must be within [0, 1]");
    }
    ASSIGN_OR_RETURN(g.exporter, NewOtlpExporter(g.options.otlp_endpoint, "dais-gateway"));
    LOG_INFO("tracing: spans of sampled requests to {} (new traces sampled at {:g})",
             g.options.otlp_endpoint, g.options.trace_sample_rate);
  }
  if (g.options.access_log == "-") {
    g.access_log = stdout;
  } else if (!g.options.access_log.empty()) {
    g.access_log = std::fopen(g.options.access_log.c_str(), "a");
    if (g.access_log == nullptr) {
      return InvalidArgument("--access-log " + g.options.access_log + ": " + std::strerror(errno));
    }
  }
  if (!(g.options.access_log_sample >= 0 && g.options.access_log_sample <= 1)) {
    return InvalidArgument("--access-log-sample: 0 to 1");
  }
  ASSIGN_OR_RETURN(g.client, etcd::Client::Create({g.options.etcd_endpoints}));
  {
    MutexLock l(&g.mu);  // the watches' threads start inside Watch
  }
  g.builder = std::thread([&g] { g.BuildLoop(); });
  g.Watch(kRoutesPrefix, &g.routes_kv);
  g.Watch(kTenantsPrefix, &g.tenants_kv);
  g.Watch(cluster::kNodesPrefix, &g.nodes_kv);
  g.Watch(cluster::kInstancesPrefix, &g.instances_kv);
  g.Watch(cluster::kCollectionsPrefix, &g.collections_kv);
  g.Watch(cluster::kAgentEndpointsPrefix, &g.agents_kv);
  return OkStatus();
}

void Gateway::Register(const std::string& id, const std::string& http_endpoint) {
  Impl& g = *impl_;
  g.registration = std::thread([&g, key = std::string(kGatewaysPrefix) + id,
                                value = "{\"http\":\"" + http_endpoint + "\"}"] {
    int64_t lease = 0;
    while (!g.stop.load()) {
      if (lease != 0 && g.client->KeepAliveOnce(lease).status().code() == StatusCode::kNotFound) {
        lease = 0;  // expired while etcd was away: register again
      }
      if (lease == 0) {
        auto granted = g.client->GrantLease(10);
        if (granted.ok() && g.client->Put(key, value, *granted).ok()) lease = *granted;
      }
      for (int i = 0; i < 30 && !g.stop.load(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    if (lease != 0) (void)g.client->RevokeLease(lease);
  });
}

void Gateway::CloseGrpcConnections() { impl_->grpc.CloseAll(); }

void Gateway::Stop() {
  Impl& g = *impl_;
  if (g.stop.exchange(true)) return;
  {
    MutexLock l(&g.mu);
    g.rebuild_cv.SignalAll();
  }
  if (g.builder.joinable()) g.builder.join();
  if (g.reloader.joinable()) g.reloader.join();
  if (g.registration.joinable()) g.registration.join();
  g.watchers.clear();
}

bool Gateway::Ready() const {
  return impl_->snapshots.load() >= kWatchedPrefixes && !impl_->draining.load();
}

void Gateway::StartDraining() { impl_->draining.store(true); }

int64_t Gateway::InFlight() const { return impl_->in_flight.load(); }

bool Gateway::WaitIdle(std::chrono::steady_clock::time_point deadline) {
  while (impl_->in_flight.load() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void Gateway::Handle(Request request, Responder respond) {
  Impl& g = *impl_;
  if (request.method == "GET" && request.path == "/v2/health/live") {
    return respond(Response{200, "text/plain", "", {}});
  }
  if (request.method == "GET" && request.path == "/v2/health/ready") {
    return respond(Ready() ? Response{200, "text/plain", "", {}}
                   : g.draining.load()
                       ? Error(503, "the gateway is shutting down")
                       : Error(503, "the gateway has not seen the cluster in etcd yet"));
  }
  if (request.method == "GET" && request.path == "/metrics") {
    Response r{
        200, "text/plain; version=0.0.4; charset=utf-8", metrics::Registry::Global().Expose(), {}};
    r.compressible = true;
    return respond(std::move(r));
  }
  if (request.path.rfind("/v2/memory/", 0) == 0) {
    return g.HandleMemory(std::move(request), std::move(respond));
  }
  if (request.path.rfind("/v1/agents/", 0) == 0) {
    return g.HandleAgent(std::move(request), std::move(respond));
  }
  std::optional<ModelPath> path = ParseModelPath(request.path);
  if (!path) {
    return respond(Error(
        404,
        "the gateway serves /v2/models/<model>[/versions/<v>]"
        "[/infer|/ready|/config|/stats], /v2/memory/collections/..., /v1/agents/<agent>/runs, "
        "/v2/health/* and /metrics"));
  }
  auto call = std::make_shared<Impl::Call>();
  g.in_flight.fetch_add(1);  // until Answer
  call->started = Clock::now();
  g.BeginTrace(call.get(), request.Header("traceparent"), request.Header("x-request-id"));
  call->alias = path->alias;
  call->suffix = path->suffix;
  call->respond = std::move(respond);
  if (auto loop = RefuseLoop(request.Header(kHopsHeader))) {
    call->tenant = "-";
    return g.Answer(call, std::move(*loop), "");
  }
  if (auto refused = g.Authenticate(request, &call->tenant)) {
    call->tenant = call->tenant.empty() ? "-" : call->tenant;
    return g.Answer(call, std::move(*refused), "");
  }
  call->view = g.Current();
  if (auto refused = g.Admit(*call->view, call->tenant, call->alias)) {
    return g.Answer(call, std::move(*refused), "");
  }
  call->request = std::move(request);
  if (auto refused = g.Resolve(call.get(), path->version)) {
    return g.Answer(call, std::move(*refused), "");
  }
  if (call->route != nullptr && call->route->shadow_version >= 0 &&
      call->route->shadow_version != call->version && call->is_infer() &&
      static_cast<double>(g.Random() % 10000) < call->route->shadow_percent * 100) {
    g.Mirror(*call);
  }
  g.budget.OnRequest(call->started);
  g.Try(std::move(call));
}

std::optional<Response> Gateway::Impl::Resolve(Call* call, int64_t asked_version) {
  auto route = call->view->routes.find(call->alias);
  int timeout_ms = 10000;
  if (route != call->view->routes.end()) {
    call->route = &route->second;
    call->model = route->second.model;
    timeout_ms = route->second.timeout_ms;
    const VersionChoice c = ChooseVersion(
        route->second, asked_version, [call](std::string_view name) { return call->Header(name); },
        Random());
    call->version = c.version;
    call->how = c.how;
  } else {
    call->model = call->alias;
    call->version = asked_version >= 0 ? asked_version : call->view->HighestReady(call->model);
    if (call->version < 0 && snapshots.load() < kWatchedPrefixes) {
      // Never reached etcd: nothing is known, so nothing can be said to be absent.
      std::string endpoints;
      for (const std::string& e : options.etcd_endpoints) {
        endpoints += (endpoints.empty() ? "" : ",") + e;
      }
      return Error(503, "the gateway has not read the routes and instances from etcd (" +
                            endpoints + ") yet: is etcd reachable?");
    }
    if (call->version < 0) {
      return Error(404,
                   "no route '" + call->alias + "' and no READY instance of a model of that name");
    }
  }
  call->deadline = call->started + std::chrono::milliseconds(timeout_ms);
  return std::nullopt;
}

}  // namespace dais::gateway
