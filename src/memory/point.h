// Points (id, vector, payload), payload filters, and the JSON requests of the memory API
// (docs/memory.md): parsed and validated against a collection's spec, so that a bad request is
// refused whole (InvalidArgument naming the field) before anything changes.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "dais/status.h"
#include "memory/collection_spec.h"

namespace dais::memory {

using FieldValue = std::variant<std::string, double, bool>;
// Sorted by field name, each field at most once.
using Payload = std::vector<std::pair<std::string, FieldValue>>;

struct Point {
  std::string id;
  std::vector<float> vector;  // cosine: normalised by the parser
  Payload payload;
};

enum class CompareOp { kEq, kNe, kGt, kGte, kLt, kLte };
struct Condition {
  std::string field;
  CompareOp op = CompareOp::kEq;
  FieldValue value;
};
// All conditions must hold (AND). A point without the field fails every condition on it.
using Filter = std::vector<Condition>;
bool Matches(const Filter& filter, const Payload& payload);

struct SearchRequest {
  std::vector<float> vector;
  int k = 10;
  Filter filter;
  // cosine / inner_product: keep scores >= it; l2: keep distances <= it ("max_distance").
  std::optional<double> threshold;
  int ef = 0;  // HNSW candidates to consider (>= k); 0 = the collection's index.ef_search
  bool with_payload = true;
  bool with_vector = false;
  int64_t timeout_ms = 0;   // 0 = the server's default
  std::vector<int> shards;  // only these shards (the gateway's fan-out); empty: all
  // When the request arrived: timeout_ms counts from it (time queued for a search thread
  // included); unset: from when the search starts.
  std::chrono::steady_clock::time_point received{};
};

inline constexpr int kMaxK = 1000;
inline constexpr size_t kMaxIdBytes = 256;
inline constexpr size_t kMaxBatch = 10000;

// {"points": [{"id": "a", "vector": [...], "payload": {...}}, ...]}
StatusOr<std::vector<Point>> ParseUpsert(std::string_view body, const CollectionSpec& spec);
// The `shards` parameter of a query string ("k=v&shards=0,2", the gateway's fan-out): empty
// when absent; InvalidArgument naming an item that is not a shard number below `count`.
StatusOr<std::vector<int>> ParseShardsParam(std::string_view query, int count);
// {"ids": ["a", ...]} (get and delete); `with_vector` is read when given.
StatusOr<std::vector<std::string>> ParseIds(std::string_view body, bool* with_vector = nullptr);
// {"vector": [...], "k": 10, "filter": {...}, "min_score": 0.5 | "max_distance": 1.2,
//  "with_payload": true, "with_vector": false, "ef": 128, "timeout_ms": 50}
StatusOr<SearchRequest> ParseSearch(std::string_view body, const CollectionSpec& spec);
// {"category": "shoes", "price": {"gte": 10, "lt": 50}, "brand": {"ne": "x"}}
StatusOr<Filter> ParseFilterJson(std::string_view json, const CollectionSpec& spec);

// A vector checked against the spec (dimension, finite values, cosine: non-zero) and, for
// cosine, normalised in place. `where` names it in the error.
Status CheckVector(const CollectionSpec& spec, std::vector<float>* v, const std::string& where);

// The same rules for requests another codec built (the gRPC API): the id, the vector (normalised
// for cosine), the payload against the schema (sorted by field); the filter's fields, value
// kinds and operators. InvalidArgument naming `where`.
Status CheckPoint(const CollectionSpec& spec, Point* point, const std::string& where);
Status CheckFilter(const CollectionSpec& spec, const Filter& filter);

// The payload as a JSON object ("{}" when empty).
std::string PayloadJson(const Payload& payload);
// A payload from the JSON object text PayloadJson writes (the stored form), checked against the
// spec's schema.
StatusOr<Payload> ParsePayloadJson(std::string_view json, const CollectionSpec& spec);

}  // namespace dais::memory
