// The gateway's insides, shared by its HTTP side (gateway.cc) and its gRPC side (grpc_proxy.cc):
// the view of the cluster the watches keep, and one request's way through authentication,
// admission, version choice, node choice and tries. Not a public header: include gateway.h.
#pragma once

#include <algorithm>
#include <atomic>
#include <boost/container/small_vector.hpp>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "cluster/collection_placement.h"
#include "common/mutex.h"
#include "common/trace_context.h"
#include "etcd/client.h"
#include "etcd/watch.h"
#include "frontends/grpc/h2_connection.h"
#include "frontends/http/http_server.h"
#include "gateway/balancer.h"
#include "gateway/gateway.h"
#include "gateway/grpc_upstream.h"
#include "gateway/jwt.h"
#include "gateway/jwt_cache.h"
#include "gateway/otlp_exporter.h"
#include "gateway/rate_limit.h"
#include "gateway/route.h"
#include "gateway/tenant.h"
#include "gateway/upstream.h"

namespace dais::gateway {

using Clock = std::chrono::steady_clock;

// What the watches saw, as requests use it (rebuilt on every change; requests hold it by
// shared_ptr for their lifetime).
struct View {
  std::map<std::string, RouteSpec> routes;
  std::map<std::string, TenantSpec> tenants;
  std::map<std::string, std::string> node_http;  // node -> host:port
  std::map<std::string, std::string> node_grpc;  // node -> host:port (nodes with a gRPC port)
  // (model, version) -> nodes with a READY instance of it.
  std::map<std::pair<std::string, int64_t>, std::vector<std::string>> ready;

  const std::vector<std::string>* Nodes(const std::string& model, int64_t version) const {
    auto it = ready.find({model, version});
    return it == ready.end() || it->second.empty() ? nullptr : &it->second;
  }
  int64_t HighestReady(const std::string& model) const;

  // Vector memory (memory_proxy.cc): the collections, and "memory:<c>:<shard>" -> the nodes
  // holding a READY replica of the shard.
  std::map<std::string, cluster::CollectionPlacement> collections;
  std::map<std::string, std::vector<std::string>> memory_ready;

  // Agents with an HTTP trigger (agent_proxy.cc): their runtimes that listen for it.
  struct AgentEndpoints {
    std::string tenant;
    int64_t run_timeout_ms = 5000;
    struct Runtime {
      std::string http;  // host:port
      std::string key;   // sent as x-dais-agent-key
    };
    std::vector<Runtime> runtimes;
  };
  std::map<std::string, AgentEndpoints> agents;
};

// The etcd prefixes the gateway watches; ready once each has delivered its snapshot.
inline constexpr int kWatchedPrefixes = 6;

// {"error": message} with `status`.
frontends::http::Response Error(int status, const std::string& message);
// The request's headers a node should see: without hop-by-hop ones (and those Connection
// names), with the hop count one up.
std::vector<std::pair<std::string, std::string>> ForwardedHeaders(
    const frontends::http::Request& r);

// The HTTP status a gRPC code is counted as in the request metrics (so that a rollout's error
// rate sees gRPC failures as 5xx).
int HttpOfCode(int code);

// Every gateway adds one to this header (HTTP) or metadata entry (gRPC) of what it forwards; a
// request that arrives having passed kMaxHops gateways is refused with 508 (issue 32: a node
// entry pointing at the gateway recursed up to the connection cap).
inline constexpr const char* kHopsHeader = "x-dais-hops";
inline constexpr int kMaxHops = 4;
int Hops(std::string_view header);  // 0 when absent or malformed
std::optional<frontends::http::Response> RefuseLoop(std::string_view header);

// Parses what the watches hold (etcd key -> value) into a view; entries that do not parse are
// skipped (a bad route is logged).
// Parsed routes and tenants by etcd key, parsed again only when a key's text changed: a view is
// rebuilt on every etcd event, and parsing every route each time made N writes cost O(N^2)
// (issue 32: 150.8 s late after 3,000 route writes). Thread-safe.
class SpecCache {
 public:
  // The spec of `text` at `key`, or nullptr (invalid: not cached, parsed again next time).
  std::shared_ptr<const RouteSpec> Route(const std::string& key, const std::string& text);
  std::shared_ptr<const TenantSpec> Tenant(const std::string& key, const std::string& text);
  // Forgets keys no longer in the watches.
  void Retain(const std::map<std::string, std::string>& routes_kv,
              const std::map<std::string, std::string>& tenants_kv);

 private:
  Mutex mu_;
  std::map<std::string, std::pair<std::string, std::shared_ptr<const RouteSpec>>> routes_
      DAIS_GUARDED_BY(mu_);
  std::map<std::string, std::pair<std::string, std::shared_ptr<const TenantSpec>>> tenants_
      DAIS_GUARDED_BY(mu_);
};

std::shared_ptr<View> BuildView(SpecCache* cache,
                                const std::map<std::string, std::string>& routes_kv,
                                const std::map<std::string, std::string>& tenants_kv,
                                const std::map<std::string, std::string>& nodes_kv,
                                const std::map<std::string, std::string>& instances_kv,
                                const std::map<std::string, std::string>& collections_kv = {},
                                const std::map<std::string, std::string>& agents_kv = {});

struct MemoryFanOut;  // memory_fanout.h

struct Gateway::Impl {
  Impl(GatewayOptions o, boost::asio::io_context* io);

  // One request on its way through the tries. HTTP: `request` and `respond`. gRPC: `grpc` is
  // the client's call, `request.path` the method, `request.body` the request message.
  struct Call {
    frontends::http::Request request;
    frontends::http::Responder respond;
    std::shared_ptr<frontends::grpc::ServerCall> grpc;
    std::shared_ptr<const View> view;
    std::string alias, model, tenant, suffix;
    const RouteSpec* route = nullptr;  // in `view`; null: no route, the model by its own name
    int64_t version = -1;
    const char* how = "";
    bool fallback = false;
    // Nodes tried, in order (two inline: most calls are tried once, some twice).
    boost::container::small_vector<std::string, 2> tried;
    Clock::time_point started, deadline;
    // W3C trace context (BeginTrace): the trace (continued or new), the gateway's span (the
    // node's parent) and the request id sent on and answered (x-request-id).
    TraceContext trace;
    std::string span_id, request_id;
    int64_t start_unix_ns = 0;
    // What the node is sent (Try; pointed at, not copied): the traceparent naming the gateway's
    // span (0 until the first try) and the hop count.
    char traceparent[64];
    size_t traceparent_size = 0;
    std::string hops;

    std::string_view Header(std::string_view name) const {
      if (grpc) return grpc->Metadata(name).value_or(std::string_view());
      return request.Header(name);
    }
    bool is_infer() const { return suffix == "/infer"; }
    // How many times a request header (or gRPC metadata entry) came; lower-case name.
    size_t HeaderCount(std::string_view name) const {
      const auto& all = grpc ? grpc->metadata() : request.headers;
      return static_cast<size_t>(std::count_if(
          all.begin(), all.end(), [name](const auto& kv) { return kv.first == name; }));
    }
  };
  using CallPtr = std::shared_ptr<Call>;

  // The call's trace from the client's traceparent and x-request-id (either may be absent or
  // malformed: then a new trace, sampled with options.trace_sample_rate when exporting).
  void BeginTrace(Call* call, std::string_view traceparent, std::string_view request_id);
  // Replaces traceparent / x-request-id in what goes to the node with the call's.
  static void SetTraceHeaders(const Call& call,
                              std::vector<std::pair<std::string, std::string>>* headers);
  // The call's span to the collector, when it is sampled and one is configured.
  void ExportSpan(const Call& call, int status, const std::string& node);
  std::unique_ptr<OtlpExporter> exporter;  // with --otlp-endpoint

  void Watch(const std::string& prefix, std::map<std::string, std::string>* kv);
  // False (logged, counted) for a route or tenant document that does not parse.
  bool Accept(const std::string& prefix, const std::string& key, const std::string& value);
  // Applies `change` (to the raw maps, under mu) and wakes the builder.
  void Rebuild(const std::function<void()>& change) DAIS_EXCLUDES(mu);
  void BuildLoop();
  // The view in force: this thread's copy while no newer one was published (no lock per
  // request; the builder publishes under mu and bumps view_generation).
  std::shared_ptr<const View> Current() {
    struct Cached {
      uint64_t gateway = 0, generation = 0;
      std::shared_ptr<const View> view;
    };
    thread_local Cached cached;
    if (cached.gateway == id && cached.generation == view_generation.load()) return cached.view;
    MutexLock l(&mu);
    cached = {id, view_generation.load(), view};
    return view;
  }
  // Never reused, so that a thread's cached view cannot be taken for another gateway's.
  const uint64_t id = [] {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1);
  }();
  std::atomic<uint64_t> view_generation{0};  // changed under mu with `view`
  // The tenant of a request with this Authorization value, or an answer refusing it (401; 400
  // when the header came more than once: which one to verify would be a guess).
  std::optional<frontends::http::Response> Authenticate(size_t authorization_count,
                                                        std::string_view authorization,
                                                        std::string* tenant);
  // The same for an HTTP request (its Authorization headers counted).
  std::optional<frontends::http::Response> Authenticate(const frontends::http::Request& request,
                                                        std::string* tenant);
  // The tenant's models (unless `alias` is empty: a memory request) and token bucket: 403 /
  // 429, or nullopt.
  std::optional<frontends::http::Response> Admit(const View& v, const std::string& tenant,
                                                 const std::string& alias);
  // Fills the call's route, model, version and deadline from its alias and the version the
  // client named (-1: none); an answer when there is nothing to route to (404).
  std::optional<frontends::http::Response> Resolve(Call* call, int64_t asked_version);
  // Picks the node of the next try (falling back to the route's stable version when the
  // chosen one has none left) and marks it started; nullopt: an answer was given (503).
  std::optional<std::string> PickNode(const CallPtr& call);
  // Books a try's outcome on the node (metrics, ejection); true when the call should be tried
  // again (retryable, tries, deadline and budget left), the retry counted.
  bool Settle(const Call& call, const std::string& node, bool ok, const char* outcome,
              bool retryable, const std::string& detail);
  void Try(CallPtr call);
  // The deadline of the next try: the request's, or sooner with the route's try_timeout_ms.
  Clock::time_point TryDeadline(const Call& call) const;
  // A copy of the request to the route's shadow version; the answer is only counted.
  void Mirror(const Call& call);
  void OnAnswer(CallPtr call, const std::string& node, UpstreamResult result);
  void Answer(const CallPtr& call, frontends::http::Response response, const std::string& node);
  // Metrics and the access log of an answered call (`status` as HTTP's).
  void Record(const Call& call, int status, size_t response_bytes, const std::string& node);
  void LogAccess(const Call& call, int status, size_t response_bytes, const std::string& node);

  // Vector memory through the gateway (memory_proxy.cc; docs/memory.md, "In a cluster"):
  // /v2/memory/collections[/{c}[/{op}]], searches and gets fanned out over one READY replica of
  // each shard and merged, writes to a replica (the shards' logs carry them to the others).
  void HandleMemory(frontends::http::Request request, frontends::http::Responder respond);
  // The same over gRPC, dais.memory.v1.Memory/{Upsert,Delete,Get,Search} (`op` lower-case).
  void HandleMemoryGrpc(const std::string& op, std::shared_ptr<frontends::grpc::ServerCall> call,
                        std::string bytes);
  void AddMemoryGrpcMethods(frontends::grpc::MethodTable* table);
  // POST /v1/agents/<name>/runs (agent_proxy.cc; docs/agents.md, "Triggers"): the agent's
  // tenant only, forwarded to one of its runtimes (another when one cannot be reached).
  void HandleAgent(frontends::http::Request request, frontends::http::Responder respond);
  // Fills `f` with the view, the collection (by name, as the tenant may use it) and the op, and
  // counts it in flight; an answer when refused (503 before etcd was read, 403, 404).
  std::optional<frontends::http::Response> FindCollection(const std::string& tenant,
                                                          const std::string& name,
                                                          const std::string& op, MemoryFanOut* f);

  // gRPC (grpc_proxy.cc).
  void TryGrpc(const CallPtr& call, const std::string& node);
  void MirrorGrpc(const Call& call);
  // Ends a gRPC call with an HTTP-shaped refusal (401 -> UNAUTHENTICATED, ...).
  void RefuseGrpc(const CallPtr& call, const frontends::http::Response& refusal);

  uint64_t Random() {
    thread_local std::mt19937_64 rng(std::random_device{}());
    return rng();
  }

  GatewayOptions options;
  Balancer balancer;
  RetryBudget budget;
  std::unique_ptr<JwksFile> jwks;
  std::unique_ptr<JwtCache> jwt_cache;  // with jwks
  std::unique_ptr<etcd::Client> client;
  std::vector<std::unique_ptr<etcd::Watcher>> watchers;
  std::atomic<int> snapshots{0};
  std::atomic<bool> draining{false};
  std::atomic<int64_t> in_flight{0};  // calls created and not answered
  std::thread reloader;
  std::thread registration;
  std::atomic<bool> stop{false};

  Mutex mu;
  SpecCache specs;  // parsed routes and tenants, by key
  std::map<std::string, std::string> routes_kv DAIS_GUARDED_BY(mu), tenants_kv DAIS_GUARDED_BY(mu),
      nodes_kv DAIS_GUARDED_BY(mu), instances_kv DAIS_GUARDED_BY(mu),
      collections_kv DAIS_GUARDED_BY(mu), agents_kv DAIS_GUARDED_BY(mu);
  std::shared_ptr<const View> view DAIS_GUARDED_BY(mu) = std::make_shared<View>();
  bool dirty DAIS_GUARDED_BY(mu) = false;         // the maps changed since the last build
  int snapshots_applied DAIS_GUARDED_BY(mu) = 0;  // watch snapshots in the maps
  CondVar rebuild_cv{&mu};
  std::thread builder;  // BuildLoop

  Mutex buckets_mu;
  std::map<std::string, std::pair<TenantSpec, std::unique_ptr<TokenBucket>>> buckets
      DAIS_GUARDED_BY(buckets_mu);

  std::FILE* access_log = nullptr;  // owned unless stdout
  Mutex access_log_mu;

  // Last: destroyed first, so that no answer arrives after the rest is gone.
  UpstreamPool pool;
  GrpcUpstream grpc;
};

}  // namespace dais::gateway
