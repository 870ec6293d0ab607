// Vector memory through the gateway (gateway_impl.h, HandleMemory / MemoryGrpcMethods;
// docs/memory.md, "In a cluster"): authentication, tenancy and the collection's lookup, then
// memory_fanout.h sends the request to the replicas of its shards and merges their answers.
// Tenancy: with --jwks, a collection that names a tenant is for that tenant's tokens only.
#include <rapidjson/document.h>

#include <algorithm>

#include "common/json.h"
#include "gateway/memory_fanout.h"
#include "gateway/proto_fields.h"

namespace dais::gateway {
namespace {

using frontends::grpc::ServerCall;
using frontends::http::Request;
using frontends::http::Responder;
using frontends::http::Response;

constexpr const char* kMemoryGrpcService = "/dais.memory.v1.Memory/";

// GET /v2/memory/collections[/{c}]: a collection with each shard's READY replicas.
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

bool Allowed(bool auth, const std::string& tenant, const cluster::CollectionPlacement& c) {
  return !auth || c.tenant.empty() || c.tenant == tenant;
}

// GET /v2/memory/collections: those the tenant may use.
Response List(const View& v, const std::string& method, bool auth, const std::string& tenant) {
  if (method != "GET") {
    return Error(400,
                 "in a cluster, collections are declared with `dais ctl apply` "
                 "(kind: collection) and placed on nodes by the scheduler");
  }
  std::string out = "{\"collections\":[";
  bool first = true;
  for (const auto& [name, c] : v.collections) {
    if (!Allowed(auth, tenant, c)) continue;
    out += (first ? "" : ",") + Describe(v, c).body;
    first = false;
  }
  return Response{200, "application/json", out + "]}", {}};
}

// The search's k (10 when absent or unreadable: the node refuses what is invalid).
int JsonK(const std::string& body) {
  rapidjson::Document d;
  const rapidjson::Value& root = d;
  if (json::ParseJson(body, &d).ok() && root.IsObject() && root.HasMember("k") &&
      root["k"].IsInt()) {
    return std::max(1, root["k"].GetInt());
  }
  return 10;
}

int ProtoK(const std::string& message) {
  int k = 0;
  (void)ForEachField(message, [&k](const WireField& w) {
    if (w.field == 3 && w.type == 0) k = static_cast<int>(std::min<uint64_t>(w.varint, 100000));
  });
  return k == 0 ? 10 : k;
}

}  // namespace

std::optional<Response> Gateway::Impl::FindCollection(const std::string& tenant,
                                                      const std::string& name,
                                                      const std::string& op, MemoryFanOut* f) {
  if (snapshots.load() < kWatchedPrefixes) {
    return Error(503, "the gateway has not read the collections from etcd yet");
  }
  f->view = Current();
  // The tenant's token bucket (its models list is about routes): one request, however many
  // shards it reaches.
  if (auto refused = Admit(*f->view, tenant, "")) return refused;
  auto c = f->view->collections.find(name);
  if (c == f->view->collections.end()) {
    return Error(404, "collection " + name + " does not exist (dais ctl get collections)");
  }
  // Another tenant's collection: 403 (and it is not listed for this tenant).
  if (!Allowed(jwks != nullptr, tenant, c->second)) {
    return Error(403, "tenant '" + tenant + "' may not use collection " + name);
  }
  f->g = this;
  f->collection = &c->second;
  f->op = op;
  f->write = op == "upsert" || op == "delete";
  f->deadline = Clock::now() + std::chrono::seconds(10);
  in_flight.fetch_add(1);  // until the fan-out answers
  return std::nullopt;
}

void Gateway::Impl::HandleMemory(Request request, Responder respond) {
  static const std::string kBase = "/v2/memory/collections";
  if (auto loop = RefuseLoop(request.Header(kHopsHeader))) return respond(std::move(*loop));
  std::string tenant;
  if (auto refused = Authenticate(request, &tenant)) {
    return respond(std::move(*refused));
  }
  if (request.path.rfind(kBase, 0) != 0 ||
      (request.path.size() > kBase.size() && request.path[kBase.size()] != '/')) {
    return respond(Error(404, request.path + ": the vector memory API is under " + kBase));
  }
  std::string rest = request.path.substr(kBase.size());
  if (rest.empty() || rest == "/") {
    if (snapshots.load() < kWatchedPrefixes) {
      return respond(Error(503, "the gateway has not read the collections from etcd yet"));
    }
    return respond(List(*Current(), request.method, jwks != nullptr, tenant));
  }
  rest = rest.substr(1);
  const size_t slash = rest.find('/');
  const std::string name = rest.substr(0, slash);
  const std::string op = slash == std::string::npos ? "" : rest.substr(slash + 1);
  if (!op.empty() && op != "upsert" && op != "delete" && op != "get" && op != "search") {
    return respond(
        Error(404, "collection " + name + ": '" + op + "' is not upsert, delete, get or search"));
  }
  auto f = std::make_shared<MemoryFanOut>();
  if (auto refused = FindCollection(tenant, name, op.empty() ? "describe" : op, f.get())) {
    return respond(std::move(*refused));
  }
  f->respond = std::move(respond);
  if (op.empty()) {
    if (request.method == "GET") {
      Response d = Describe(*f->view, *f->collection);
      in_flight.fetch_sub(1);
      return f->respond(std::move(d));
    }
    return RefuseMemory(f, 400,
                        "in a cluster, collections are declared and deleted with `dais ctl` "
                        "(kind: collection), not through the gateway");
  }
  if (request.method != "POST") return RefuseMemory(f, 405, op + " is a POST");
  f->path = request.path;
  f->headers = ForwardedHeaders(request);
  f->body = std::move(request.body);
  if (op == "search") f->k = JsonK(f->body);
  StartFanOut(std::move(f));
}

void Gateway::Impl::HandleMemoryGrpc(const std::string& op, std::shared_ptr<ServerCall> sc,
                                     std::string bytes) {
  auto refuse = [&sc](const Response& r) {
    rapidjson::Document d;
    const rapidjson::Value& root = d;
    const bool json = json::ParseJson(r.body, &d).ok() && root.IsObject() &&
                      root.HasMember("error") && root["error"].IsString();
    sc->Finish(::grpc::Status(frontends::grpc::CodeOfHttpStatus(r.status),
                              json ? root["error"].GetString() : r.body));
  };
  if (auto loop = RefuseLoop(sc->Metadata(kHopsHeader).value_or(std::string_view()))) {
    return refuse(*loop);
  }
  std::string tenant;
  const size_t authorizations = static_cast<size_t>(
      std::count_if(sc->metadata().begin(), sc->metadata().end(),
                    [](const auto& kv) { return kv.first == "authorization"; }));
  if (auto refused = Authenticate(
          authorizations, sc->Metadata("authorization").value_or(std::string_view()), &tenant)) {
    return refuse(*refused);
  }
  StatusOr<ModelRef> ref = ReadModelRef(bytes);  // field 1: the collection
  if (!ref.ok() || ref->name.empty()) {
    return sc->Finish(
        ::grpc::Status(::grpc::StatusCode::INVALID_ARGUMENT,
                       ref.ok() ? "collection: required" : std::string(ref.status().message())));
  }
  auto f = std::make_shared<MemoryFanOut>();
  if (auto refused = FindCollection(tenant, ref->name, op, f.get())) return refuse(*refused);
  f->grpc = sc;
  f->method =
      kMemoryGrpcService + std::string(1, static_cast<char>(std::toupper(op[0]))) + op.substr(1);
  for (const auto& [k, v] : sc->metadata()) {
    if (k != "authorization" && k != "host" && k != "connection" && k != kHopsHeader) {
      f->metadata.emplace_back(k, v);
    }
  }
  f->metadata.emplace_back(
      kHopsHeader,
      std::to_string(Hops(sc->Metadata(kHopsHeader).value_or(std::string_view())) + 1));
  if (const uint64_t us = sc->timeout_us(); us > 0) {
    f->deadline = std::min(f->deadline, Clock::now() + std::chrono::microseconds(us));
  }
  if (op == "search") f->k = ProtoK(bytes);
  f->body = std::move(bytes);
  StartFanOut(std::move(f));
}

void Gateway::Impl::AddMemoryGrpcMethods(frontends::grpc::MethodTable* t) {
  for (const char* op : {"upsert", "delete", "get", "search"}) {
    std::string method = kMemoryGrpcService;
    method += static_cast<char>(std::toupper(op[0]));
    method += op + 1;
    (*t)[method].unary = [this, op = std::string(op)](std::shared_ptr<ServerCall> sc,
                                                      std::string bytes) {
      HandleMemoryGrpc(op, std::move(sc), std::move(bytes));
    };
  }
}

}  // namespace dais::gateway
