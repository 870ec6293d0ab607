// The shipped event consumer: keeps a "recently purchased items" feature per user in the
// feature store from the purchase events of `dais txn` (docs/transactions.md, "Events").
//
// The feature is a fixed-length integer vector of a features.yaml group (e.g.
// `recent_items: {dtype: INT64, shape: [8], default: [-1, ...]}`), newest first. Each event moves
// its item to the front (dropping the oldest), in one Lua script that also records the event id
// under the user's hash tag (SET NX with a TTL): an event delivered twice (a relay or consumer
// restart) is applied once. The written record keys are published on the L1 invalidation channel,
// so `dais serve` nodes drop their cached copy at once.
//
// Consumer group semantics: entries are acknowledged once applied (or found duplicate); a
// consumer that restarts first re-reads its own pending entries; entries left pending by a
// crashed consumer are taken over (XAUTOCLAIM) after claim_idle_ms.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "features/spec/feature_spec.h"
#include "streams/event_stream.h"

namespace dais::redis {
class Client;
}

namespace dais::txn {

struct RecentItemsOptions {
  std::string stream = "dais:purchases";
  std::string group = "recent-items";
  std::string consumer = "consumer-1";
  std::string feature = "user_purchases:recent_items";  // group:feature in the spec
  std::string entity_field = "user_id";                 // payload fields of the event
  std::string item_field = "item_id";
  int claim_idle_ms = 30000;
  int64_t marker_ttl_ms = 7 * 24 * 3600 * 1000LL;  // how long an applied event id is remembered
};

class RecentItemsUpdater {
 public:
  // `client` is borrowed and used for blocking reads: give the updater a client of its own.
  RecentItemsUpdater(redis::Client* client, features::FeatureSpecPtr spec,
                     RecentItemsOptions options);
  ~RecentItemsUpdater();
  // Checks the feature (an INT32/INT64 vector of an entity group) and creates the group.
  Status Start();
  void Stop();
  // Applies entries; returns the ids to acknowledge (applied, duplicate or malformed).
  // Unavailable when Redis failed (the rest stay pending).
  StatusOr<std::vector<std::string>> Apply(const std::vector<streams::Entry>& entries);

 private:
  void Loop();
  // Tells the dais serve nodes to drop these record keys from their L1 (invalidation channel).
  void Publish(const std::vector<std::string>& keys);

  redis::Client* client_;
  features::FeatureSpecPtr spec_;
  RecentItemsOptions options_;
  std::unique_ptr<streams::EventStream> stream_;
  features::FeatureRef ref_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace dais::txn
