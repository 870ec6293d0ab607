// One shard replica of a collection: its points (id, payload, expiry, write sequence) and their
// HNSW index. Writes carry the shard's write sequence (the durable tier's order): a write older
// than what a point (or its deletion) already reflects is ignored, so replicas that see the same
// writes in any order end in the same state. Thread-safe: searches run concurrently, writes
// exclusively.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "memory/collection_spec.h"
#include "memory/memory_store.h"
#include "memory/point.h"
#include "memory/vector_index.h"

namespace dais::memory {

struct SearchHit {
  std::string id;
  float score = 0;
  Payload payload;            // when asked for
  std::vector<float> vector;  // when asked for
};

// Best first under `metric`.
bool Better(Metric metric, float a, float b);

class Shard {
 public:
  // `insert_threads`: threads that insert a large batch into the graph (0: one per core).
  Shard(CollectionSpecPtr spec, int index, size_t initial_capacity = 1024, int insert_threads = 0);

  // `expires_ms` 0 = never (Unix ms).
  void Upsert(const std::vector<Point>& points, int64_t expires_ms, uint64_t seq);
  // Points as the durable store holds them (each with its own expiry and sequence), inserted in
  // parallel: a replica's start.
  void Restore(const std::vector<StoredPoint>& points);
  void Delete(const std::vector<std::string>& ids, uint64_t seq, int64_t now_ms);
  // Forgets every point and tombstone (before loading the shard again).
  void Clear();
  // The k best live, unexpired points matching the request's filter and threshold.
  std::vector<SearchHit> Search(const SearchRequest& request, int64_t now_ms) const;
  // The point (vector included when asked), if live and unexpired.
  std::optional<SearchHit> Get(const std::string& id, bool with_vector, int64_t now_ms) const;
  // Removes the points expired at `now_ms` and forgets deletions older than the tombstone
  // window; returns the expired ids (for the durable tier).
  std::vector<std::string> Expire(int64_t now_ms);
  // Every live point (for snapshots), in label order.
  std::vector<StoredPoint> Snapshot() const;

  size_t size() const;
  size_t memory_bytes() const;
  int index() const { return index_; }
  const CollectionSpec& spec() const { return *spec_; }
  // Filtered searches that fell back to exact scoring (the filter was too selective).
  uint64_t exact_searches() const;

  // Tombstones are kept this long (ms): a replayed older write arriving later is refused.
  static constexpr int64_t kTombstoneWindowMs = 10 * 60 * 1000;

 private:
  struct Slot {
    std::string id;
    Payload payload;
    int64_t expires_ms = 0;
    uint64_t seq = 0;
    bool live = false;
  };
  struct Tombstone {
    uint64_t seq;
    int64_t at_ms;
  };
  bool Newer(const std::string& id, uint64_t seq) const;  // under mu_
  // get(i) -> (const Point*, expires_ms, seq); under mu_ (exclusive).
  template <typename PointAt>
  void UpsertLocked(size_t n, const PointAt& get);
  void RemoveLocked(uint64_t label, uint64_t seq, int64_t now_ms);
  bool Keep(uint64_t label, const Filter& filter, int64_t now_ms) const;
  std::vector<VectorIndex::Hit> ExactSearch(const SearchRequest& r, int64_t now_ms) const;

  const CollectionSpecPtr spec_;
  const int index_;
  const int threads_;
  mutable std::shared_mutex mu_;
  VectorIndex index_graph_;
  std::vector<Slot> slots_;  // by label
  std::vector<uint64_t> free_labels_;
  std::unordered_map<std::string, uint64_t> labels_;  // live ids
  std::unordered_map<std::string, Tombstone> tombstones_;
  size_t payload_bytes_ = 0;
  // No live point expires before this (Unix ms; 0: none expires). Lowered by writes, set by each
  // scan: the sweep every second scans the slots only when something may be due.
  int64_t next_expiry_ms_ = 0;
  int64_t written_expiry_ms_ = 0;  // the earliest expiry written since the last sweep (0: none)
  mutable std::atomic<uint64_t> exact_searches_{0};
};

}  // namespace dais::memory
