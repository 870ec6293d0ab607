// Vocabulary of the lock service (docs/locks.md): the levels of the hierarchy, the locked
// resource, and what the operator functions report.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dais/status.h"

namespace dais::locks {

// MODEL excludes every VERSION and NODE lock of the same model (and vice versa, through the
// intention marks those take on the model); VERSION and NODE locks of one model are independent
// of each other; different models are independent.
enum class LockLevel { kModel, kVersion, kNode };

// "model", "version", "node" (also the value of the metrics' `level` label).
std::string_view LockLevelName(LockLevel level);

// What is locked. Build with the factories.
//   Model(m):            one rollout of model family m at a time.
//   Version(m, v):       version v of m, one holder fleet-wide.
//   Version(m, v, n):    version v of m on node n: loaded once per node, never twice concurrently.
//   Node(m, n):          model m on node n: no two conflicting loads of m on one node.
// Names: model non-empty, no '{', '}' or whitespace; version and node non-empty, no '@' or
// whitespace (InvalidArgument otherwise, from every function that takes a resource).
struct LockResource {
  std::string model;
  LockLevel level = LockLevel::kModel;
  std::string version;  // kVersion only
  std::string node;     // kNode; optional scope of kVersion

  static LockResource Model(std::string model);
  static LockResource Version(std::string model, std::string version, std::string node = "");
  static LockResource Node(std::string model, std::string node);

  // "model", "version:3", "version:3@node-a", "node:node-a": the lock's name inside its model.
  std::string Name() const;
  // "m/version:3@node-a" for logs and messages.
  std::string ToString() const;
};

Status ValidateResource(const LockResource& resource);

// One lock as the operator functions see it.
struct LockInfo {
  std::string model;
  LockLevel level = LockLevel::kModel;
  std::string name;   // LockResource::Name()
  std::string key;    // the Redis key
  std::string owner;  // node id + "/" + random token ("" for an intention without its lock)
  int64_t token = 0;  // fencing token of the grant
  std::chrono::milliseconds ttl{0};  // remaining lease on the Redis server
};

// The hierarchy of one model, read in one atomic script (a consistent snapshot).
struct ModelLockState {
  std::string model;
  int64_t fence = 0;                   // the last fencing token issued for this model (0: none)
  std::optional<LockInfo> model_lock;  // the MODEL lock, if held
  std::vector<LockInfo> sub_locks;     // VERSION and NODE locks, each with its intention mark
  // Intention marks whose lock key is gone (e.g. removed by hand); they block MODEL grants until
  // their expiry. Names as LockInfo::name.
  std::vector<std::string> stale_intentions;
  int64_t waiters = 0;  // blocked Acquire calls registered for wake-up
};

}  // namespace dais::locks
