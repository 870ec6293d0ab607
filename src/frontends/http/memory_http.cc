#include "frontends/http/memory_http.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <chrono>

#include "frontends/http/http_status.h"

namespace dais::frontends::http {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void WriteHit(Writer& w, const memory::SearchHit& h, bool with_score) {
  w.StartObject();
  w.Key("id");
  w.String(h.id.c_str(), static_cast<rapidjson::SizeType>(h.id.size()));
  if (with_score) {
    w.Key("score");
    w.Double(h.score);
  }
  if (!h.payload.empty()) {
    w.Key("payload");
    const std::string payload = memory::PayloadJson(h.payload);
    w.RawValue(payload.c_str(), payload.size(), rapidjson::kObjectType);
  }
  if (!h.vector.empty()) {
    w.Key("vector");
    w.StartArray();
    for (float x : h.vector) w.Double(x);
    w.EndArray();
  }
  w.EndObject();
}

}  // namespace

std::string MemoryHttp::HitsJson(const std::vector<memory::SearchHit>& hits, bool with_score) {
  rapidjson::StringBuffer out;
  Writer w(out);
  w.StartObject();
  w.Key("results");
  w.StartArray();
  for (const auto& h : hits) WriteHit(w, h, with_score);
  w.EndArray();
  w.EndObject();
  return out.GetString();
}

std::string MemoryHttp::StatsJson(const memory::CollectionStats& s) {
  const std::string spec = memory::CollectionSpecJson(*s.spec);
  std::string held = ",\"held_shards\":[";
  for (size_t i = 0; i < s.held.size(); ++i) held += (i ? "," : "") + std::to_string(s.held[i]);
  return spec.substr(0, spec.size() - 1) + ",\"points\":" + std::to_string(s.points) +
         ",\"memory_bytes\":" + std::to_string(s.memory_bytes) +
         ",\"exact_searches\":" + std::to_string(s.exact_searches) + held + "]}";
}

void MemoryHttp::List(Responder& respond) {
  std::string body = "{\"collections\":[";
  bool first = true;
  for (const auto& s : service_->Stats()) {
    if (!first) body += ",";
    first = false;
    body += StatsJson(s);
  }
  respond(JsonResponse(200, body + "]}"));
}

namespace {

Status Managed(const std::string& what) {
  return FailedPrecondition(what +
                            ": in a cluster, collections are declared with `dais ctl apply` "
                            "(kind: collection) and placed on nodes by the scheduler");
}

}  // namespace

void MemoryHttp::Create(const Request& request, Responder& respond) {
  if (managed_) return respond(ErrorResponse(Managed("creating a collection on a node")));
  auto spec = memory::ParseCollectionSpec(request.body);
  if (!spec.ok()) return respond(ErrorResponse(spec.status()));
  if (Status s = service_->Create(*spec); !s.ok()) return respond(ErrorResponse(s));
  respond(JsonResponse(200, memory::CollectionSpecJson(**spec)));
}

void MemoryHttp::Describe(const std::string& collection, Responder& respond) {
  for (const auto& s : service_->Stats()) {
    if (s.spec->name == collection) return respond(JsonResponse(200, StatsJson(s)));
  }
  respond(ErrorResponse(NotFound("collection " + collection + " does not exist")));
}

void MemoryHttp::Drop(const std::string& collection, Responder& respond) {
  if (managed_) return respond(ErrorResponse(Managed("dropping a collection on a node")));
  if (Status s = service_->Drop(collection); !s.ok()) return respond(ErrorResponse(s));
  respond(JsonResponse(200, "{\"dropped\":\"" + collection + "\"}"));
}

void MemoryHttp::Points(const Request& request, const std::string& collection,
                        const std::string& op, Responder& respond) {
  auto spec = service_->Spec(collection);
  if (!spec.ok()) return respond(ErrorResponse(spec.status()));
  if (op == "upsert") {
    auto points = memory::ParseUpsert(request.body, **spec);
    if (!points.ok()) return respond(ErrorResponse(points.status()));
    const size_t n = points->size();
    return service_->Upsert(collection, std::move(*points), [respond, n](Status s) {
      if (!s.ok()) return respond(ErrorResponse(s));
      respond(JsonResponse(200, "{\"upserted\":" + std::to_string(n) + "}"));
    });
  }
  auto shards = memory::ParseShardsParam(request.query, (*spec)->shards);
  if (!shards.ok()) return respond(ErrorResponse(shards.status()));
  bool with_vector = false;
  if (op == "delete" || op == "get") {
    auto ids = memory::ParseIds(request.body, op == "get" ? &with_vector : nullptr);
    if (!ids.ok()) return respond(ErrorResponse(ids.status()));
    if (op == "get") {
      auto hits = service_->Get(collection, *ids, with_vector, *shards);
      if (!hits.ok()) return respond(ErrorResponse(hits.status()));
      return respond(JsonResponse(200, HitsJson(*hits, false)));
    }
    const size_t n = ids->size();
    return service_->Delete(collection, std::move(*ids), [respond, n](Status s) {
      if (!s.ok()) return respond(ErrorResponse(s));
      respond(JsonResponse(200, "{\"deleted\":" + std::to_string(n) + "}"));
    });
  }
  auto search = memory::ParseSearch(request.body, **spec);
  if (!search.ok()) return respond(ErrorResponse(search.status()));
  search->shards = std::move(*shards);
  service_->SearchAsync(collection, std::move(*search),
                        [respond](StatusOr<std::vector<memory::SearchHit>> hits) {
                          if (!hits.ok()) return respond(ErrorResponse(hits.status()));
                          respond(JsonResponse(200, HitsJson(*hits, true)));
                        });
}

}  // namespace dais::frontends::http
