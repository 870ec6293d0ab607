// Feature definitions: what a `features.yaml` declares (docs/features.md has the full format).
//
//   domain: ads                       # tenant domain: prefixes every Redis key
//   entities:
//     - {name: user_id, key_type: int64}
//   feature_groups:
//     - name: user_profile
//       entity: user_id
//       version: 1                    # schema version: part of the Redis key
//       max_age: 1h                   # older values are STALE, not served as fresh
//       ttl: 7d                       # storage TTL in Redis (jittered)
//       features:
//         - {name: age, dtype: FP32, shape: [], default: 0}
//         - {name: clicks, dtype: FP32, shape: [4], default: [0, 0, 0, 0]}
//   inputs:                           # only beside a model: how features fill its inputs
//     - {name: INPUT__0, features: [user_profile:age, user_profile:clicks]}
//   entity_input: USER_ID             # optional: the request input that carries entity ids
//
// A parsed spec is immutable and shared (std::shared_ptr<const FeatureSpec>).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/duration.h"
#include "dais/datatype.h"
#include "dais/status.h"

namespace dais::features {

enum class KeyType { kInt64, kString };

struct EntitySpec {
  std::string name;
  KeyType key_type = KeyType::kInt64;
};

struct FeatureDef {
  std::string name;
  DataType dtype = DataType::kFp32;
  std::vector<int64_t> shape;  // [] = scalar
  int64_t elements = 1;        // product of shape
  size_t byte_size = 0;        // elements * DataTypeSize(dtype)
  std::string default_bytes;   // little-endian, byte_size bytes
};

struct GroupSpec {
  std::string name;
  std::string entity;
  int64_t version = 1;
  int64_t max_age_us = 0;   // 0: never stale
  int64_t ttl_ms = 0;       // 0: no storage TTL
  double ttl_jitter = 0.1;  // TTL is stretched by a uniform factor in [1, 1 + jitter)
  std::vector<FeatureDef> features;
  size_t record_bytes = 0;      // sum of the features' byte_size
  std::vector<size_t> offsets;  // byte offset of each feature in a record payload

  // Index of the feature, or -1.
  int FeatureIndex(std::string_view name) const;
};

// A "group:feature" reference resolved to indices into the spec.
struct FeatureRef {
  size_t group = 0;
  size_t feature = 0;
};

// A similarity lookup in vector memory (docs/memory.md, "As features"): the k points of
// `collection` nearest to the entity's `query` feature (a vector of the collection's dimension).
//   knn:
//     - {name: similar_items, collection: items, query: user_profile:embedding, k: 10,
//        min_score: 0.2}
struct KnnSpec {
  std::string name;
  std::string collection;
  std::string query_name;  // "group:feature", as written
  FeatureRef query;
  int k = 10;
  bool has_min_score = false;
  double min_score = 0;
};

// How one model input is filled: the referenced features of an entity, flattened and
// concatenated in order, converted to the input's datatype; or one output of a knn lookup
//   - {name: SIMILAR_IDS, knn: similar_items, output: ids}      # the ids (integers), -1 pads
//   - {name: SIMILAR_SCORES, knn: similar_items, output: scores}  # their scores, 0 pads
struct InputMapping {
  std::string input;
  std::vector<std::string> names;  // "group:feature", as written
  std::vector<FeatureRef> refs;
  int64_t elements = 0;  // per entity
  int knn = -1;          // >= 0: filled by knn[knn] (refs is empty)
  bool knn_scores = false;
};

struct FeatureSpec {
  std::string source;  // file the spec came from (for messages)
  std::string domain = "default";
  std::vector<EntitySpec> entities;
  std::vector<GroupSpec> groups;
  std::vector<KnnSpec> knn;
  std::vector<InputMapping> inputs;
  std::string entity_input;  // empty: entity ids come in parameters.entity_ids
  std::string entity;        // the entity of every group the inputs use (empty without inputs)

  const EntitySpec* FindEntity(std::string_view name) const;
  // Index of the group, or -1.
  int GroupIndex(std::string_view name) const;
  // "group:feature" (Feast's feature reference form). InvalidArgument naming the reference.
  StatusOr<FeatureRef> Resolve(std::string_view reference) const;
  std::string RefName(const FeatureRef& ref) const;
};
using FeatureSpecPtr = std::shared_ptr<const FeatureSpec>;

// Parses and validates YAML text. Errors are InvalidArgument and name the source, the group and
// the field (and the line where YAML reports one).
StatusOr<FeatureSpecPtr> ParseFeatureSpec(std::string_view text, const std::string& source);
StatusOr<FeatureSpecPtr> LoadFeatureSpecFile(const std::string& path);

// True when both are null, or both fill the same inputs from the same features (names,
// groups, schema versions, dtypes and shapes) under the same domain: requests enriched under one
// can run on a version loaded with the other.
bool SameLayout(const FeatureSpec* a, const FeatureSpec* b);

// Durations ("250ms", "30s", "10m"): common/duration.h.
using ::dais::ParseDurationUs;

// The canonical string form of an entity id of `type` (what goes into the Redis key).
// InvalidArgument when an int64 key is not a decimal integer, or a string key is empty, longer
// than 1024 bytes, or holds a byte that is not printable.
StatusOr<std::string> CanonicalEntityId(KeyType type, std::string_view id);

}  // namespace dais::features
