// The vector memory API over HTTP (docs/memory.md): JSON in, JSON out, over memory::MemoryService.
//   GET    /v2/memory/collections                  every collection with its stats
//   POST   /v2/memory/collections                  create (body: the spec)
//   GET    /v2/memory/collections/{c}              one collection
//   DELETE /v2/memory/collections/{c}              drop it and its points
//   POST   /v2/memory/collections/{c}/upsert       {"points": [{"id", "vector", "payload"}]}
//   POST   /v2/memory/collections/{c}/delete       {"ids": [...]}
//   POST   /v2/memory/collections/{c}/get          {"ids": [...], "with_vector": false}
//   POST   /v2/memory/collections/{c}/search       {"vector", "k", "filter", "min_score", ...}
// Bad input is a 400 naming the field, before anything changes; an unknown collection 404.
// get and search take `?shards=0,2` (the gateway's fan-out): only those shards, each of which
// must be held here (503 otherwise, as for any shard not held when none is named).
#pragma once

#include <string>

#include "frontends/http/http_server.h"
#include "memory/memory_service.h"

namespace dais::frontends::http {

class MemoryHttp {
 public:
  explicit MemoryHttp(memory::MemoryService* service) : service_(service) {}  // borrowed

  // A cluster node: its collections are placed by the scheduler (`dais ctl apply`, kind:
  // collection), so create and drop are refused.
  void set_managed(bool managed) { managed_ = managed; }

  void List(Responder& respond);
  void Create(const Request& request, Responder& respond);
  void Describe(const std::string& collection, Responder& respond);
  void Drop(const std::string& collection, Responder& respond);
  // `op`: upsert, delete, get or search.
  void Points(const Request& request, const std::string& collection, const std::string& op,
              Responder& respond);

  // A collection's spec and stats as JSON (what Describe answers).
  static std::string StatsJson(const memory::CollectionStats& stats);
  // Search / get hits as {"results": [{"id", "score", "payload", "vector"}]}.
  static std::string HitsJson(const std::vector<memory::SearchHit>& hits, bool with_score);

 private:
  memory::MemoryService* service_;
  bool managed_ = false;
};

}  // namespace dais::frontends::http
