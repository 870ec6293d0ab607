// Vector memory through the gateway (gateway_impl.h, HandleMemory; docs/memory.md, "In a
// cluster"). A collection's shards are held by the nodes the scheduler chose (each shard by
// `replicas` nodes); the gateway knows them from the instance states (View::memory_ready).
//   search / get: one READY replica per shard, grouped by node (one request per node, naming
//     its shards with ?shards=), the answers merged (search: best `k` by the metric); a replica
//     that cannot be reached, fails mid-answer or answers 503 is replaced by another of the same
//     shards.
//   upsert / delete: to one node holding any shard of the collection: it writes every point to
//     the shard's Redis hash and log, and each replica applies the log (about 100 ms later).
// Tenancy: with --jwks, a collection that names a tenant is for that tenant's tokens only.
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <random>
#include <set>

#include "common/json.h"
#include "gateway/gateway_impl.h"
#include "metrics/registry.h"

namespace dais::gateway {
namespace {

using frontends::http::Request;
using frontends::http::Responder;
using frontends::http::Response;

metrics::Family<metrics::Counter>& Requests() {
  static auto& f = metrics::Registry::Global().AddCounter(
      "dais_gateway_memory_requests_total",
      "Vector memory requests through the gateway by collection (- when unknown), operation "
      "and HTTP status",
      {"collection", "op", "code"});
  return f;
}

metrics::Family<metrics::Counter>& Replaced() {
  static auto& f = metrics::Registry::Global().AddCounter(
      "dais_gateway_memory_replica_retries_total",
      "Parts of a vector memory request sent again to another replica of the same shards "
      "(the first could not be reached or answered 503)",
      {"collection"});
  return f;
}

// One request on its way: its parts (one per node) and what they answered.
struct FanOut {
  Gateway::Impl* g = nullptr;
  std::shared_ptr<const View> view;
  const cluster::CollectionPlacement* collection = nullptr;  // in `view`
  std::string op, path, body;
  std::vector<std::pair<std::string, std::string>> headers;
  Responder respond;
  Clock::time_point deadline;
  int k = 10;
  bool write = false;  // upsert / delete: one node, every shard

  Mutex mu;
  int pending DAIS_GUARDED_BY(mu) = 0;
  std::set<std::string> failed DAIS_GUARDED_BY(mu);  // nodes that could not answer
  std::vector<std::pair<double, std::string>> hits DAIS_GUARDED_BY(mu);  // score, hit JSON
  std::optional<Response> error DAIS_GUARDED_BY(mu);
  std::optional<Response> single DAIS_GUARDED_BY(mu);  // a write's answer, as it came
};
using FanOutPtr = std::shared_ptr<FanOut>;

uint64_t Random() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return rng();
}

// node -> the shards it is asked for; an error naming the shard with no READY replica left.
StatusOr<std::map<std::string, std::vector<int>>> PlanParts(const FanOut& f,
                                                            const std::vector<int>& shards,
                                                            const std::set<std::string>& failed) {
  std::map<std::string, std::vector<int>> plan;
  for (int s : shards) {
    std::vector<std::string> candidates;
    auto it = f.view->memory_ready.find(f.collection->ShardTask(s));
    if (it != f.view->memory_ready.end()) {
      for (const auto& n : it->second) {
        if (!failed.count(n)) candidates.push_back(n);
      }
    }
    if (candidates.empty()) {
      return Unavailable("shard " + std::to_string(s) + " of collection " + f.collection->name +
                         " has no READY replica" + (failed.empty() ? "" : " left") +
                         " (dais ctl get collections)");
    }
    // A node already asked for another shard takes this one too: fewer requests.
    auto chosen = std::find_if(candidates.begin(), candidates.end(),
                               [&plan](const std::string& n) { return plan.count(n) > 0; });
    const std::string& node =
        chosen != candidates.end() ? *chosen : candidates[Random() % candidates.size()];
    plan[node].push_back(s);
  }
  if (f.write && !plan.empty()) {
    // Any holder writes every shard's points to the store.
    auto one = *plan.begin();
    one.second = shards;
    return std::map<std::string, std::vector<int>>{std::move(one)};
  }
  return plan;
}

void Finish(const FanOutPtr& f) DAIS_NO_THREAD_SAFETY_ANALYSIS {
  Response out;
  if (f->error) {
    out = std::move(*f->error);
  } else if (f->single) {
    out = std::move(*f->single);
  } else {
    auto& hits = f->hits;
    if (f->op == "search") {
      const bool higher = f->collection->HigherIsBetter();
      std::stable_sort(hits.begin(), hits.end(), [higher](const auto& a, const auto& b) {
        return higher ? a.first > b.first : a.first < b.first;
      });
      if (hits.size() > static_cast<size_t>(f->k)) hits.resize(static_cast<size_t>(f->k));
    }
    std::string body = "{\"results\":[";
    for (size_t i = 0; i < hits.size(); ++i) body += (i ? "," : "") + hits[i].second;
    out = Response{200, "application/json", body + "]}", {}};
  }
  Requests().Get({f->collection->name, f->op, std::to_string(out.status)}).Increment();
  f->g->in_flight.fetch_sub(1);
  f->respond(std::move(out));
}

void SendPart(const FanOutPtr& f, const std::string& node, std::vector<int> shards);

// A part's answer: merged, or sent again to other replicas of its shards.
void OnPart(const FanOutPtr& f, const std::string& node, const std::vector<int>& shards,
            UpstreamResult r) {
  // Every operation is idempotent (a write again is the same points under a newer sequence), so
  // a part whose node failed or went away mid-answer is sent to another replica; a deadline is
  // not (the time is spent).
  const bool retry = (r.status.ok() && r.response.status == 503) ||
                     (!r.status.ok() && r.status.code() != StatusCode::kDeadlineExceeded);
  std::map<std::string, std::vector<int>> again;
  bool done = false;
  {
    MutexLock l(&f->mu);
    if (retry && Clock::now() < f->deadline) {
      f->failed.insert(node);
      auto plan = PlanParts(*f, shards, f->failed);
      if (plan.ok()) {
        again = std::move(*plan);
        f->pending += static_cast<int>(again.size());
        Replaced().Get({f->collection->name}).Increment();
      } else if (!f->error) {
        f->error = Error(503, std::string(plan.status().message()));
      }
    } else if (!r.status.ok()) {
      if (!f->error) {
        f->error = Error(r.status.code() == StatusCode::kDeadlineExceeded ? 504 : 502,
                         "node " + node + ": " + std::string(r.status.message()));
      }
    } else if (r.response.status != 200 || f->write) {
      Response answer{r.response.status, "application/json", std::move(r.response.body), {}};
      if (r.response.status != 200) {
        if (!f->error) f->error = std::move(answer);
      } else {
        f->single = std::move(answer);
      }
    } else {
      rapidjson::Document d;
      const rapidjson::Value& root = d;
      if (!json::ParseJson(r.response.body, &d).ok() || !root.IsObject() ||
          !root.HasMember("results") || !root["results"].IsArray()) {
        if (!f->error) f->error = Error(502, "node " + node + ": an answer without results");
      } else {
        for (const auto& hit : root["results"].GetArray()) {
          rapidjson::StringBuffer sb;
          rapidjson::Writer<rapidjson::StringBuffer> w(sb);
          hit.Accept(w);
          const double score =
              hit.HasMember("score") && hit["score"].IsNumber() ? hit["score"].GetDouble() : 0;
          f->hits.emplace_back(score, sb.GetString());
        }
      }
    }
    done = --f->pending == 0;
  }
  for (auto& [n, s] : again) SendPart(f, n, std::move(s));
  if (done) Finish(f);
}

void SendPart(const FanOutPtr& f, const std::string& node, std::vector<int> shards) {
  UpstreamRequest up;
  up.method = "POST";
  up.target = f->path;
  if (!f->write) {
    up.target += "?shards=";
    for (size_t i = 0; i < shards.size(); ++i)
      up.target += (i ? "," : "") + std::to_string(shards[i]);
  }
  up.headers = f->headers;
  up.body = f->body;
  up.deadline = f->deadline;
  f->g->pool.Send(f->view->node_http.at(node), std::move(up),
                  [f, node, shards = std::move(shards)](UpstreamResult r) {
                    OnPart(f, node, shards, std::move(r));
                  });
}

// GET /v2/memory/collections[/{c}]: the collections a tenant may use, with each shard's READY
// replicas.
Response Describe(const View& v, const cluster::CollectionPlacement& c) {
  std::string out = "{\"collection\":" + c.spec_json + ",\"shards\":[";
  for (int s = 0; s < c.shards; ++s) {
    auto it = v.memory_ready.find(c.ShardTask(s));
    out += (s ? "," : "") + std::string("{\"shard\":") + std::to_string(s) + ",\"ready\":[";
    if (it != v.memory_ready.end()) {
      for (size_t i = 0; i < it->second.size(); ++i) {
        out += (i ? ",\"" : "\"") + it->second[i] + "\"";
      }
    }
    out += "]}";
  }
  return Response{200, "application/json", out + "]}", {}};
}

// GET /v2/memory/collections: those `allowed`.
Response List(const View& v, const std::string& method,
              const std::function<bool(const cluster::CollectionPlacement&)>& allowed) {
  if (method != "GET") {
    return Error(400,
                 "in a cluster, collections are declared with `dais ctl apply` "
                 "(kind: collection) and placed on nodes by the scheduler");
  }
  std::string out = "{\"collections\":[";
  bool first = true;
  for (const auto& [name, c] : v.collections) {
    if (!allowed(c)) continue;
    out += (first ? "" : ",") + Describe(v, c).body;
    first = false;
  }
  return Response{200, "application/json", out + "]}", {}};
}

}  // namespace

void Gateway::Impl::HandleMemory(Request request, Responder respond) {
  static const std::string kBase = "/v2/memory/collections";
  if (auto loop = RefuseLoop(request.Header(kHopsHeader))) return respond(std::move(*loop));
  std::string tenant;
  const size_t authorizations = static_cast<size_t>(
      std::count_if(request.headers.begin(), request.headers.end(),
                    [](const auto& kv) { return kv.first == "authorization"; }));
  if (auto refused = Authenticate(authorizations, request.Header("authorization"), &tenant)) {
    return respond(std::move(*refused));
  }
  if (request.path.rfind(kBase, 0) != 0 ||
      (request.path.size() > kBase.size() && request.path[kBase.size()] != '/')) {
    return respond(Error(404, request.path + ": the vector memory API is under " + kBase));
  }
  std::shared_ptr<const View> v = Current();
  if (snapshots.load() < kWatchedPrefixes) {
    return respond(Error(503, "the gateway has not read the collections from etcd yet"));
  }
  if (jwks && !v->tenants.count(tenant)) {
    return respond(Error(403, "tenant '" + tenant + "' is not known to the gateway"));
  }
  auto allowed = [&](const cluster::CollectionPlacement& c) {
    return !jwks || c.tenant.empty() || c.tenant == tenant;
  };
  std::string rest = request.path.substr(kBase.size());
  if (rest.empty() || rest == "/") return respond(List(*v, request.method, allowed));
  rest = rest.substr(1);
  const size_t slash = rest.find('/');
  const std::string name = rest.substr(0, slash);
  const std::string op = slash == std::string::npos ? "" : rest.substr(slash + 1);
  auto c = v->collections.find(name);
  if (c == v->collections.end() || !allowed(c->second)) {
    // Another tenant's collection: 403 (and it is not listed for this tenant).
    const bool other = c != v->collections.end();
    Requests().Get({"-", op.empty() ? "describe" : op, other ? "403" : "404"}).Increment();
    return respond(
        other ? Error(403, "tenant '" + tenant + "' may not use collection " + name)
              : Error(404, "collection " + name + " does not exist (dais ctl get collections)"));
  }
  if (op.empty()) {
    if (request.method == "GET") return respond(Describe(*v, c->second));
    return respond(Error(400,
                         "in a cluster, collections are declared and deleted with `dais "
                         "ctl` (kind: collection), not through the gateway"));
  }
  if (op != "upsert" && op != "delete" && op != "get" && op != "search") {
    return respond(
        Error(404, "collection " + name + ": '" + op + "' is not upsert, delete, get or search"));
  }
  if (request.method != "POST") return respond(Error(405, op + " is a POST"));
  auto f = std::make_shared<FanOut>();
  f->g = this;
  f->view = v;
  f->collection = &c->second;
  f->op = op;
  f->path = request.path;
  f->headers = ForwardedHeaders(request);
  f->body = std::move(request.body);
  f->respond = std::move(respond);
  f->deadline = Clock::now() + std::chrono::seconds(10);
  f->write = op == "upsert" || op == "delete";
  if (op == "search") {
    rapidjson::Document d;
    const rapidjson::Value& root = d;
    if (json::ParseJson(f->body, &d).ok() && root.IsObject() && root.HasMember("k") &&
        root["k"].IsInt()) {
      f->k = std::max(1, root["k"].GetInt());
    }
  }
  in_flight.fetch_add(1);  // until Finish
  std::vector<int> all;
  for (int s = 0; s < c->second.shards; ++s) all.push_back(s);
  auto plan = PlanParts(*f, all, {});
  if (!plan.ok()) {
    {
      MutexLock l(&f->mu);
      f->error = Error(503, std::string(plan.status().message()));
    }
    return Finish(f);
  }
  {
    MutexLock l(&f->mu);
    f->pending = static_cast<int>(plan->size());
  }
  for (auto& [node, shards] : *plan) SendPart(f, node, std::move(shards));
}

}  // namespace dais::gateway
