// The durable tiers under the in-memory shards. The hot tier (redis_store.h) takes every write
// before a shard applies it and hands out the shard's write sequence; a replica that starts
// loads its shards from it. The cold tier (snapshot_files.h) is day-partitioned files in the
// offline store's layout. Without a store (a standalone `dais serve` with no --redis) the
// collections live in memory only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "dais/status.h"
#include "memory/collection_spec.h"
#include "memory/point.h"

namespace dais::memory {

using Deadline = std::chrono::steady_clock::time_point;

struct StoredPoint {
  Point point;
  int64_t expires_ms = 0;  // 0 = never
  uint64_t seq = 0;
};

// A stored point's value (without id and seq): "<expires_ms>:" + dimension little-endian float32
// + the payload as JSON. Decode checks it against the spec.
std::string EncodeStored(const Point& point, int64_t expires_ms);
StatusOr<StoredPoint> DecodeStored(std::string_view id, std::string_view value, uint64_t seq,
                                   const CollectionSpec& spec);

class MemoryStore {
 public:
  virtual ~MemoryStore() = default;
  // The write's sequence in its shard (increasing), or why it was not stored. Called once, on
  // any thread.
  using SeqCallback = std::function<void(StatusOr<uint64_t>)>;

  virtual void Upsert(const CollectionSpec& spec, int shard, const std::vector<Point>& points,
                      int64_t expires_ms, Deadline deadline, SeqCallback done) = 0;
  virtual void Delete(const CollectionSpec& spec, int shard, const std::vector<std::string>& ids,
                      Deadline deadline, SeqCallback done) = 0;
  // Blocking (start-up): calls `each` for every stored point of the shard.
  virtual Status Load(const CollectionSpec& spec, int shard,
                      const std::function<void(StoredPoint)>& each) = 0;
  // Best effort: removes points that expired (every replica expires them by the clock).
  virtual void Forget(const CollectionSpec& spec, int shard,
                      const std::vector<std::string>& ids) = 0;

  // The replication log of a shard: every write in sequence order, so that every process that
  // holds the shard applies the writes another one took (docs/memory.md, "Replicas").
  struct LogEntry {
    std::string position;  // read on from here
    bool upsert = true;
    uint64_t seq = 0;
    // id -> stored value (EncodeStored's form) for an upsert; id -> "" for a delete.
    std::vector<std::pair<std::string, std::string>> points;
  };
  // Where the log ends now (position "" when the store keeps none) and the sequence of that
  // last write (0: none). A replica that takes this before it loads the shard and then reads the
  // log from it misses no write. Sequences in the log go up by one per write; a larger step
  // means entries were trimmed before the replica read them (it then loads the shard again).
  virtual StatusOr<LogEntry> LogEnd(const CollectionSpec& spec, int shard) { return LogEntry{}; }
  // At most `max` entries after `position`, without waiting.
  virtual StatusOr<std::vector<LogEntry>> ReadLog(const CollectionSpec& spec, int shard,
                                                  const std::string& position, int max) {
    return std::vector<LogEntry>{};
  }

  // The collections this store holds (a standalone server's registry).
  virtual Status SaveSpec(const CollectionSpec& spec) = 0;
  virtual Status Drop(const CollectionSpec& spec) = 0;
  virtual StatusOr<std::vector<CollectionSpecPtr>> Specs() = 0;
};

}  // namespace dais::memory
