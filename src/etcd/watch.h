// Watching a key prefix in etcd without missing a change: a snapshot of the prefix, then a
// watch from the snapshot's revision + 1; after a disconnect (etcd restarted, a member killed,
// the network gone) the watch resumes from the last revision seen + 1 on any endpoint; when that
// revision has been compacted away, a new snapshot replaces the old view (on_snapshot again).
// So the owner's view is always the store's at some revision, never a view with a hole.
//
// Threading: one thread per Watcher; the callbacks run on it, in revision order.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "etcd/client.h"

namespace dais::etcd {

struct Event {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  KeyValue kv;  // a delete carries the key and its mod_revision only
};

class Watcher {
 public:
  struct Callbacks {
    // Every key under the prefix, at start and after a compaction made resuming impossible.
    std::function<void(const RangeResult& snapshot)> on_snapshot;
    // Changes since the last snapshot or events, in revision order.
    std::function<void(const std::vector<Event>& events)> on_events;
  };
  // Starts watching `prefix` through `client` (borrowed, must outlive this object): a snapshot
  // first, or, with `start_revision` > 0, changes from that revision on (a caller that knows the
  // store up to start_revision - 1); if it was compacted away, a snapshot after all.
  Watcher(Client* client, std::string prefix, Callbacks callbacks, int64_t start_revision = 0);
  // Stops the watch and joins its thread.
  ~Watcher();
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  // Snapshots taken (1 + resyncs after compaction) and reconnections, for tests and metrics.
  int64_t snapshots() const { return snapshots_.load(); }
  int64_t reconnects() const { return reconnects_.load(); }

 private:
  void Run();
  // One watch stream from `*next` until it ends; false when a snapshot is needed.
  bool Stream(int64_t* next);

  Client* client_;
  const std::string prefix_;
  const Callbacks callbacks_;
  const int64_t start_revision_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> snapshots_{0};
  std::atomic<int64_t> reconnects_{0};
  Mutex mu_;
  void* context_ DAIS_GUARDED_BY(mu_) = nullptr;  // the open stream's grpc::ClientContext
  std::thread thread_;
};

}  // namespace dais::etcd
