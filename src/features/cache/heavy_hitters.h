// HeavyHitters: approximate per-key access counts with bounded memory, by Space-Saving
// (Metwally, Agrawal, El Abbadi, "Efficient Computation of Frequent and Top-k Elements in Data
// Streams", ICDT 2005). Used to choose the entities to pre-warm each night.
//
// At most `capacity` keys are monitored. An unmonitored key that arrives takes the place of the
// key with the smallest count m and inherits count m + its count, with error m. Hence for every
// monitored key: count - error <= true count <= count; every key whose true count exceeds the
// smallest monitored count is monitored; and the smallest count is at most N / capacity for a
// stream of total count N (per shard, see below).
//
// Sharding: keys are split by hash over `shards` independent summaries of capacity / shards
// keys each, so Offer on different shards never shares a lock. The bounds hold per shard
// (N_shard / (capacity / shards)). Each summary is a hash map plus an indexed min-heap: Offer on
// a monitored key is a hash lookup and a sift (none when the key is already a heavy one).
//
// Keys are arbitrary bytes except '\n' and '\t' (the text format's separators); Offer ignores
// such keys and counts them in rejected_keys().
//
// Thread-safety: every method is thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dais/status.h"

namespace dais::features {

class HeavyHitters {
 public:
  struct Item {
    std::string key;
    uint64_t count = 0;
    uint64_t error = 0;  // count overestimates the true count by at most this
    bool operator==(const Item&) const = default;
  };

  static constexpr std::string_view kHeader = "# dais heavy hitters v1";

  // Tracks at most `capacity` keys (at least 1 per shard). `shards` 0 picks a count from the
  // capacity (one shard per 256 keys, at most 16); otherwise rounded up to a power of two and
  // capped so each shard monitors at least one key.
  explicit HeavyHitters(size_t capacity, int shards = 0);
  ~HeavyHitters();
  HeavyHitters(const HeavyHitters&) = delete;
  HeavyHitters& operator=(const HeavyHitters&) = delete;

  // Counts `count` accesses of `key` (count 0 is ignored).
  void Offer(std::string_view key, uint64_t count = 1);

  // The n keys with the highest counts, highest first (ties by key).
  std::vector<Item> Top(size_t n) const;

  // Adds another summary (another node's or day's list, e.g. from Parse) to this one. Items
  // whose keys are monitored add count and error; others enter as in Offer, with error
  // increased by the displaced minimum. The Space-Saving bounds hold for the combined stream.
  // Items with invalid keys are ignored and counted.
  void Merge(const std::vector<Item>& items);

  // Forgets every key.
  void Reset();

  // Text format: the header line kHeader, then one item per line "<count>\t<error>\t<key>\n",
  // the Top(top_n) order.
  std::string Serialize(size_t top_n) const;
  // Parses Serialize's format. Errors are InvalidArgument naming the line number (1-based): a
  // missing or different header, a line without two tabs, a count or error that is not a
  // decimal uint64, error > count, or a duplicate key. The last line may lack its '\n'.
  static StatusOr<std::vector<Item>> Parse(std::string_view text);

  // Keys monitored now (<= capacity()).
  size_t size() const;
  size_t capacity() const { return capacity_; }
  int shards() const { return static_cast<int>(num_shards_); }
  // Keys ignored by Offer/Merge because they contain '\n' or '\t'.
  uint64_t rejected_keys() const { return rejected_keys_.load(std::memory_order_relaxed); }

  static bool ValidKey(std::string_view key);

 private:
  class Shard;
  Shard& ShardFor(uint64_t hash);

  size_t capacity_;
  size_t num_shards_;
  std::unique_ptr<Shard[]> shards_;
  std::atomic<uint64_t> rejected_keys_{0};
};

}  // namespace dais::features
