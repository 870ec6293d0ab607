// SingleFlight<V>: collapses concurrent asynchronous loads of the same key into one (after Go's
// golang.org/x/sync/singleflight, callback style). The first caller of Join for a key becomes
// the leader and must start the load and later call Complete(key, value); callers that Join while
// the load is in flight only register their callback. Complete invokes every registered callback
// (the leader's included) exactly once with the value, then forgets the key, so the next Join
// starts a new flight.
//
// Thread-safety: all methods are thread-safe. Callbacks run on the thread that calls Complete,
// after the lock is released, in Join order; a callback may call Join (it starts a new flight).
// A leader that never calls Complete strands its joiners: the caller must complete on every path
// (errors included: make V carry a Status).
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "common/mutex.h"
#include "features/cache/hashed_key.h"

namespace dais::features {

template <typename V>
class SingleFlight {
 public:
  using Callback = std::function<void(const V&)>;

  SingleFlight() = default;
  SingleFlight(const SingleFlight&) = delete;
  SingleFlight& operator=(const SingleFlight&) = delete;

  // Like Join, but `make_follower_cb` is called (under the lock) only when the caller follows a
  // flight in progress: a leader, which handles the value itself, pays for no callback.
  // `key.hash` must be HashOf(key.key).
  template <typename MakeCallback>
  bool Lead(HashedKey key, MakeCallback&& make_follower_cb) {
    Shard& s = ShardFor(key.hash);
    MutexLock lock(&s.mu);
    if (auto it = s.flights.find(key); it != s.flights.end()) {
      it->second.push_back(make_follower_cb());
      return false;
    }
    s.flights.emplace(StoredKey{std::string(key.key), key.hash}, std::vector<Callback>());
    return true;
  }

  // Returns true if the caller is the leader (it must later call Complete(key, value)); false if
  // it joined a flight in progress. Either way `cb` (may be empty) is invoked by Complete.
  bool Join(const std::string& key, Callback cb) {
    const HashedKey k{key, HashOf(key)};
    Shard& s = ShardFor(k.hash);
    MutexLock lock(&s.mu);
    auto it = s.flights.find(k);
    const bool leader = it == s.flights.end();
    if (leader) it = s.flights.emplace(StoredKey{key, k.hash}, std::vector<Callback>()).first;
    if (cb) it->second.push_back(std::move(cb));
    return leader;
  }

  // Ends the flight of `key`: invokes its callbacks with `value`. Completing a key with no
  // flight in progress is a caller bug (logged and counted, otherwise ignored).
  void Complete(HashedKey key, const V& value) {
    std::vector<Callback> callbacks;
    {
      Shard& s = ShardFor(key.hash);
      MutexLock lock(&s.mu);
      auto it = s.flights.find(key);
      if (it == s.flights.end()) {
        DAIS_BUG("SingleFlight::Complete for key with no flight in progress ({} bytes)",
                 key.key.size());
        return;
      }
      callbacks = std::move(it->second);
      s.flights.erase(it);
    }
    for (Callback& cb : callbacks) cb(value);
  }
  void Complete(const std::string& key, const V& value) {
    Complete(HashedKey{key, HashOf(key)}, value);
  }

  // Keys with a flight in progress.
  size_t in_flight() const {
    size_t n = 0;
    for (const Shard& s : shards_) {
      MutexLock lock(&s.mu);
      n += s.flights.size();
    }
    return n;
  }

 private:
  // Sharded by key hash, so that lookups of different keys (on different cores, and the Redis
  // I/O thread completing them) do not bounce one lock.
  // A key in flight keeps the hash it came with: neither insertion nor lookup hashes it again.
  struct StoredKey {
    std::string key;
    size_t hash;
  };
  struct StoredHash {
    using is_transparent = void;
    size_t operator()(const StoredKey& k) const { return k.hash; }
    size_t operator()(const HashedKey& k) const { return k.hash; }
  };
  struct StoredEq {
    using is_transparent = void;
    bool operator()(const StoredKey& a, const StoredKey& b) const { return a.key == b.key; }
    bool operator()(const HashedKey& a, const StoredKey& b) const { return a.key == b.key; }
    bool operator()(const StoredKey& a, const HashedKey& b) const { return a.key == b.key; }
  };
  struct Shard {
    mutable Mutex mu;
    std::unordered_map<StoredKey, std::vector<Callback>, StoredHash, StoredEq> flights
        DAIS_GUARDED_BY(mu);
  };
  // The top bits: the maps' buckets use the hash modulo a prime.
  Shard& ShardFor(size_t hash) { return shards_[(hash >> 56) % shards_.size()]; }
  std::array<Shard, 32> shards_;
};

}  // namespace dais::features
