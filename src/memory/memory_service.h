// The vector collections one process serves (`dais serve`, `dais node`): create / drop, upsert,
// delete, get and search, each routed to the shard that owns the id (ShardOf) or fanned out to
// every local shard and merged. Writes go to the durable store first (when there is one) and are
// applied in the store's order; Search runs on the caller's thread, SearchAsync on a search
// thread when there are any (MemoryOptions::search_threads), else on the caller's. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "dais/status.h"
#include "memory/collection_spec.h"
#include "memory/memory_store.h"
#include "memory/point.h"
#include "memory/search_pool.h"
#include "memory/shard.h"

namespace dais::memory {

// The shard of an id: FNV-1a 64 of its bytes modulo the shard count (the same in every process).
int ShardOf(std::string_view id, int shards);

struct MemoryOptions {
  std::chrono::milliseconds write_timeout{2000};  // the durable store's answer
  std::function<int64_t()> now_ms;                // Unix ms; default: the system clock
  // The cold tier (snapshot_files.h) Host rebuilds a shard from when the store never saw a
  // write to it (the store lost it); empty: none.
  std::string cold_tier;
  // Threads that run SearchAsync's searches, from one queue (search_pool.h); 0: SearchAsync
  // searches on the caller's thread. At most `max_queued_searches` wait; more are refused.
  int search_threads = 0;
  size_t max_queued_searches = 4096;
};

struct CollectionStats {
  CollectionSpecPtr spec;
  std::vector<int> held;  // the shards this process holds
  size_t points = 0;
  size_t memory_bytes = 0;
  uint64_t exact_searches = 0;
};

class MemoryService {
 public:
  // `store` may be null (memory only); borrowed.
  explicit MemoryService(MemoryStore* store, MemoryOptions options = {});
  ~MemoryService();

  // Recreates the collections the store holds and loads their points; `progress` is told
  // (collection, shard, points loaded so far) now and then. Before serving.
  using Progress = std::function<void(const std::string&, int, size_t)>;
  Status Restore(const Progress& progress = {});

  // The cold tier (snapshot_files.h): writes every collection's spec and shards under `root`.
  Status Snapshot(const std::string& root);
  // Rebuilds from their newest snapshots the collections under `root` that this service does
  // not hold after Restore (the hot tier lost them): created, written back to the store, indexed.
  Status RestoreFromSnapshots(const std::string& root, const Progress& progress = {});

  // OK when created or when an identical spec exists; AlreadyExists for a different one.
  Status Create(CollectionSpecPtr spec);
  Status Drop(const std::string& name);
  // A cluster node holds the shards the scheduler assigns it (docs/memory.md, "In a cluster"):
  // Host loads one shard from the store (progress as Restore's) and follows its log from then
  // on; the collection exists here while it holds at least one. Writes to the shards it does not
  // hold still go to the store (the holders apply them from the log); reads of them are
  // Unavailable. Host needs a store (FailedPrecondition without). A shard the store never saw a
  // write to is rebuilt from MemoryOptions::cold_tier when a snapshot of it is there.
  Status Host(CollectionSpecPtr spec, int shard, const Progress& progress = {});
  void Unhost(const std::string& name, int shard);
  StatusOr<CollectionSpecPtr> Spec(const std::string& name) const;
  std::vector<CollectionStats> Stats() const;

  using Done = std::function<void(Status)>;
  // `done` once, on any thread: OK when every point is stored and applied.
  void Upsert(const std::string& name, std::vector<Point> points, Done done);
  void Delete(const std::string& name, std::vector<std::string> ids, Done done);
  // Only the ids of `shards` when given (the others are skipped); Unavailable when an id's shard
  // is not held here.
  StatusOr<std::vector<SearchHit>> Get(const std::string& name, const std::vector<std::string>& ids,
                                       bool with_vector, const std::vector<int>& shards = {}) const;
  // The request's shards (all when it names none); Unavailable when one is not held here.
  // DeadlineExceeded when the request's timeout_ms passes before every shard was searched (a
  // shard's search itself is not interrupted).
  StatusOr<std::vector<SearchHit>> Search(const std::string& name,
                                          const SearchRequest& request) const;
  // Search on a search thread (MemoryOptions::search_threads; without any, on this one);
  // `done` once, on that thread. The request's timeout_ms counts from its `received` time, so
  // the time queued counts. Unavailable when max_queued_searches wait already.
  using SearchDone = std::function<void(StatusOr<std::vector<SearchHit>>)>;
  void SearchAsync(std::string name, SearchRequest request, SearchDone done) const;
  // Replaces the search threads (MemoryOptions::search_threads; 0: none). Not while searches
  // may be asked for (before serving, or between two servers as the benchmark does).
  void SetSearchThreads(int threads);
  // Takes up the collections other processes created in the store (loading them) and forgets
  // those they dropped. Call every few seconds, from CatchUp's thread.
  Status SyncCollections();
  // Applies the writes other processes made to the collections this one holds, read from the
  // store's replication log (docs/memory.md, "Replicas"); returns how many points changed hands.
  // Call often (every 100 ms), from one thread.
  size_t CatchUp();
  // Removes expired points (and tells the store). Call every second or so.
  void Sweep();

 private:
  struct Replica;
  struct Collection;
  std::shared_ptr<Collection> Find(const std::string& name) const;
  StatusOr<std::shared_ptr<Collection>> Found(const std::string& name) const;
  int64_t Now() const;
  Status LoadShard(const CollectionSpec& spec, Replica* r, int64_t now, const Progress& progress);
  size_t CatchUpShard(const CollectionSpec& spec, Replica* r, int64_t now);
  size_t ApplyLogEntry(const CollectionSpec& spec, Shard* shard, const MemoryStore::LogEntry& e,
                       int64_t now);
  Status WriteBack(const CollectionSpec& spec, Shard* shard, std::vector<StoredPoint> points);

  MemoryStore* store_;
  MemoryOptions options_;
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<Collection>> collections_ DAIS_GUARDED_BY(mu_);
  // Last: destroyed first, running its queued searches while the collections still exist.
  std::unique_ptr<SearchPool> search_pool_;
};

}  // namespace dais::memory
