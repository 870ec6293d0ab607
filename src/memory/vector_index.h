// The approximate nearest-neighbour index of one shard replica: hnswlib's HNSW graph
// (libhnswlib-dev; docs/memory.md "Why hnswlib" has the measurements behind the choice).
// Points are addressed by a dense label the shard assigns; a removed label can be reused.
// Thread-safety: Search may run concurrently with itself; Upsert / Remove take the index
// exclusively (hnswlib's resize is not safe under readers).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "memory/collection_spec.h"

namespace dais::memory {

class VectorIndex {
 public:
  VectorIndex(int dimension, Metric metric, IndexParams params, size_t initial_capacity = 1024);
  ~VectorIndex();
  VectorIndex(const VectorIndex&) = delete;
  VectorIndex& operator=(const VectorIndex&) = delete;

  // Inserts or replaces the vector of `label` (dimension floats; cosine: already normalised).
  void Upsert(uint64_t label, const float* vector);
  // The same for many points, inserted by up to `threads` threads (hnswlib inserts in parallel);
  // a label given twice keeps its last vector.
  void UpsertMany(const std::vector<std::pair<uint64_t, const float*>>& points, int threads);
  void Remove(uint64_t label);

  struct Hit {
    uint64_t label;
    float score;  // as the metric defines it (collection_spec.h)
  };
  // At most `k` labels for which `keep` holds, best first. Without a filter HNSW answers with the
  // k best of max(ef, ef_search, k) candidates (`ef` 0: ef_search); with one, it fetches more
  // candidates until k pass or `max_candidates` were looked at (the caller then searches
  // exactly, see Shard).
  std::vector<Hit> Search(const float* query, size_t k, const std::function<bool(uint64_t)>& keep,
                          size_t max_candidates, bool* exhausted = nullptr, size_t ef = 0) const;
  // The vector stored for `label` (cosine: normalised); empty when absent.
  std::vector<float> Vector(uint64_t label) const;
  // Exact distances for the given labels (for filters too selective for the graph).
  std::vector<Hit> Score(const float* query, const std::vector<uint64_t>& labels) const;

  size_t size() const;          // live points
  size_t memory_bytes() const;  // the graph and the vectors as allocated
  int dimension() const { return dimension_; }

 private:
  class Impl;
  const int dimension_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dais::memory
