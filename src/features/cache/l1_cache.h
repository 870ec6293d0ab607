// L1Cache: the in-process tier of the online feature store (see docs/feature-cache.md).
//
// Holds (entity, feature group) records read from the Redis tier, bounded in bytes, with a
// per-entry freshness deadline chosen by the caller. Eviction and admission follow W-TinyLFU
// (Einziger, Friedman, Manes, "TinyLFU: A Highly Efficient Cache Admission Policy", and
// Caffeine's implementation): a small LRU admission window, then a segmented-LRU main region
// whose door is guarded by a count-min frequency sketch with 4-bit counters that ages by halving.
//
// Thread-safety: every method is thread-safe. The cache is split into `shards` independent
// shards by key hash, each with its own mutex, queues and frequency sketch, so operations on keys
// of different shards never touch the same lock or cache line. Records are immutable and shared
// (RecordPtr): a Get result stays valid after the entry is replaced, erased or evicted.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace dais::features {

// One (entity, feature group) record as read from Redis.
// A steady-clock time the feature store may move forward on a shared, otherwise immutable
// record (a relaxed atomic, copyable so that CachedRecord stays a plain value type).
class RefreshTime {
 public:
  RefreshTime() = default;
  RefreshTime(const RefreshTime& other) : ns_(other.load()) {}
  RefreshTime& operator=(const RefreshTime& other) {
    store(other.load());
    return *this;
  }
  uint64_t load() const { return ns_.load(std::memory_order_relaxed); }
  void store(uint64_t ns) const { ns_.store(ns, std::memory_order_relaxed); }

 private:
  mutable std::atomic<uint64_t> ns_{0};
};

struct CachedRecord {
  bool found = false;         // false = negative entry (Redis said not found)
  int64_t event_time_us = 0;  // event time of the values (unix µs)
  std::string payload;        // packed feature values (opaque to the cache)
  // Steady-clock ns after which the feature store re-reads the tier; until the cache deadline
  // the record remains a fallback when the tier is down (opaque to the cache). When a re-read
  // finds the same record, the store moves this forward instead of replacing the entry.
  RefreshTime refresh_after{};
};
using RecordPtr = std::shared_ptr<const CachedRecord>;

struct L1Options {
  // Bound on the sum of entry charges (key + payload + kEntryOverheadBytes), over all shards.
  // Each shard gets capacity_bytes / shards; the frequency sketches (8 bytes per 128 bytes of
  // capacity, rounded up to a power of two per shard: capacity_bytes / 16 to / 8) are extra and
  // not counted.
  size_t capacity_bytes = 64 << 20;
  // Number of shards, a power of two (otherwise rounded up to one); at least 1.
  int shards = 64;
};

class L1Cache {
 public:
  // Fixed per-entry overhead counted in the charge: the node, map slot and record header.
  static constexpr size_t kEntryOverheadBytes = 64;

  explicit L1Cache(L1Options options);
  ~L1Cache();
  L1Cache(const L1Cache&) = delete;
  L1Cache& operator=(const L1Cache&) = delete;

  // Returns the record if present and now_ns < its deadline, else nullptr. An expired entry is
  // dropped. Every call (hit or miss) counts one access of `key` in the frequency sketch.
  RecordPtr Get(std::string_view key, uint64_t now_ns);
  // Same, with the key's hash already computed: `hash` must be HashOf(key) (hashed_key.h).
  RecordPtr Get(std::string_view key, uint64_t hash, uint64_t now_ns);

  // Inserts or replaces `key`. After deadline_ns, Get no longer returns the entry. A new key
  // enters the admission window; entries pushed out of the window are admitted to the main
  // region only if their estimated frequency beats the main region's eviction victim (else they
  // are dropped and counted in rejections()). Replacing an existing key is always admitted.
  // Returns whether the record is stored when Put returns. Not stored: a null record, a
  // deadline already passed (deadline_ns <= now_ns), a charge larger than a shard's capacity
  // (then an older value of the key is erased, so Get never returns stale data), or a new key
  // that lost admission at once because the window is smaller than its charge.
  bool Put(std::string_view key, RecordPtr record, uint64_t deadline_ns, uint64_t now_ns);
  bool Put(std::string_view key, uint64_t hash, RecordPtr record, uint64_t deadline_ns,
           uint64_t now_ns);

  // Removes `key` if present. Its frequency history is kept.
  void Erase(std::string_view key);
  void Erase(std::string_view key, uint64_t hash);
  // Removes all entries and resets the frequency sketches. Counters are kept.
  void Clear();

  // Sum of entry charges; always <= capacity_bytes.
  size_t bytes() const;
  size_t entries() const;
  // Entries removed to make room (not Erase, replacement, or expiry found by Get).
  uint64_t evictions() const;
  // Admission rejections: candidates from the window that lost against the main victim, and
  // Puts whose charge exceeds a shard's capacity.
  uint64_t rejections() const;
  // Entries dropped because their deadline passed (found by Get or chosen as victim).
  uint64_t expirations() const;

  size_t capacity_bytes() const { return capacity_bytes_; }
  static size_t Charge(std::string_view key, const CachedRecord& record) {
    return key.size() + record.payload.size() + kEntryOverheadBytes;
  }

 private:
  class Shard;
  Shard& ShardFor(uint64_t hash);

  size_t capacity_bytes_;
  int shard_shift_;  // shard index = hash >> shard_shift_ (0 shards bits: index 0)
  size_t num_shards_;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace dais::features
