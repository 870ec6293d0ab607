// A vector collection: what `kind: collection` and POST /v2/memory/collections declare
// (docs/memory.md has the format).
//
//   {"name": "items", "tenant": "shop", "dimension": 128, "metric": "cosine",
//    "shards": 2, "replicas": 1, "ttl": "30d",
//    "payload": {"category": "string", "price": "number", "in_stock": "bool"},
//    "index": {"m": 16, "ef_construction": 200, "ef_search": 80, "quantization": "sq8"}}
//
// A parsed spec is immutable and shared.
#pragma once

#include <rapidjson/document.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "dais/status.h"

namespace dais::memory {

// cosine: score = cosine similarity (vectors are normalised when stored); inner_product: score =
// dot product; l2: score = Euclidean distance (smaller is closer).
enum class Metric { kCosine, kL2, kInnerProduct };
const char* MetricName(Metric m);
// Higher scores are better for cosine and inner product, lower for l2.
inline bool HigherIsBetter(Metric m) { return m != Metric::kL2; }

enum class FieldType { kString, kNumber, kBool };
const char* FieldTypeName(FieldType t);

// How the graph holds the vectors: sq8 (8-bit codes in the graph, the candidates re-ranked by the
// float vectors; distance.h) or none (the float vectors in the graph).
enum class Quantization { kNone, kSq8 };
const char* QuantizationName(Quantization q);

// HNSW's parameters (hnswlib): links per node, candidate list while building and while searching.
struct IndexParams {
  int m = 16;
  int ef_construction = 200;
  int ef_search = 80;  // recall@10 0.97 on the bench's million (docs/benchmarks.md)
  Quantization quantization = Quantization::kSq8;
};

struct CollectionSpec {
  std::string name;
  std::string tenant;  // "" = no tenant: any caller the gateway admits
  int dimension = 0;
  Metric metric = Metric::kCosine;
  int shards = 1;
  int replicas = 1;
  std::chrono::seconds ttl{0};  // 0 = points never expire
  std::map<std::string, FieldType> payload;
  IndexParams index;
};
using CollectionSpecPtr = std::shared_ptr<const CollectionSpec>;

inline constexpr int kMaxDimension = 4096;
inline constexpr int kMaxShards = 256;

// Parses and validates a spec (JSON text); InvalidArgument naming the field on any error.
StatusOr<CollectionSpecPtr> ParseCollectionSpec(std::string_view json);
StatusOr<CollectionSpecPtr> CollectionSpecFromJson(const rapidjson::Value& v);
// The spec as JSON (what ParseCollectionSpec reads back).
std::string CollectionSpecJson(const CollectionSpec& spec);

// Names: 1-64 of [a-z0-9_.-], starting with a letter or digit (they become Redis keys and paths).
bool ValidName(std::string_view name);

}  // namespace dais::memory
