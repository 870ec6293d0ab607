// The online tier behind the L1 cache: where feature records live between pushes and reads.
// Two implementations: RedisTier (Redis or Redis Cluster, `--redis`) and MemoryTier (in process,
// standalone mode without Redis). Both keep the same rule: a write with an older event time than
// the stored one is not applied.
//
// A record is one (domain, entity id, feature group, schema version): its event time and the
// group's features packed in spec order (GroupSpec::offsets), docs/features.md "Storage format".
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "dais/status.h"
#include "features/cache/l1_cache.h"
#include "features/spec/feature_spec.h"

namespace dais::features {

using Deadline = std::chrono::steady_clock::time_point;

struct TierRead {
  std::string key;  // RecordKey(...)
  const GroupSpec* group = nullptr;
};

struct TierWrite {
  std::string key;
  const GroupSpec* group = nullptr;
  int64_t event_time_us = 0;
  std::string payload;  // group->record_bytes bytes
};

// A record fresh from a tier, owned by the caller until it publishes it (the store sets
// refresh_after and puts the same object into L1: no copy).
using TierRecordPtr = std::shared_ptr<CachedRecord>;
// Gets the reads back (ownership returns to the caller, no copy) and per read the record
// (found=false when there is none), or a Status when the tier could not answer (Unavailable,
// DeadlineExceeded, Internal for a malformed stored record).
using ReadCallback =
    std::function<void(std::vector<TierRead> reads, std::vector<StatusOr<TierRecordPtr>>)>;
// Per write: true when applied, false when the stored value is newer (not overwritten).
using WriteCallback = std::function<void(std::vector<StatusOr<bool>>)>;

class OnlineTier {
 public:
  virtual ~OnlineTier() = default;
  // Asynchronous; `cb` is called exactly once, on any thread (possibly the caller's), with one
  // result per input in input order, by the deadline at the latest. Must not block the caller.
  virtual void Read(std::vector<TierRead> reads, Deadline deadline, ReadCallback cb) = 0;
  virtual void Write(std::vector<TierWrite> writes, Deadline deadline, WriteCallback cb) = 0;
  // Reachable now (Redis connected); the memory tier always is.
  virtual bool Healthy() const = 0;
  virtual const char* name() const = 0;  // "redis" or "memory"
};

// "dais:<domain>:{<entity>=<id>}:<group>:v<version>" — the hash tag keeps all of one entity's
// groups in one Redis Cluster slot; the domain prefix keeps tenants apart; the version keeps a
// schema change from reading data written under another layout.
std::string RecordKey(const FeatureSpec& spec, const GroupSpec& group, std::string_view entity_id);

}  // namespace dais::features
