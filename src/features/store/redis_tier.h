// The Redis online tier: one Redis hash per record (online_tier.h's RecordKey), fields `_ts`
// (event time, 8-byte little-endian int64 µs) and one field per feature (its values, packed
// little-endian). Reads are HMGETs pipelined per node in one batch; writes run a Lua script that
// refuses an older event time and sets the jittered storage TTL atomically.
// Thread-safe; callbacks run on the Redis client's I/O thread.
#pragma once

#include <memory>

#include "features/store/online_tier.h"
#include "redis/client.h"
#include "redis/script.h"

namespace dais::features {

class RedisTier : public OnlineTier {
 public:
  // Borrows `client`, which must outlive the tier.
  explicit RedisTier(redis::Client* client);
  void Read(std::vector<TierRead> reads, Deadline deadline, ReadCallback cb) override;
  void Write(std::vector<TierWrite> writes, Deadline deadline, WriteCallback cb) override;
  bool Healthy() const override;
  const char* name() const override { return "redis"; }

  // The write script (docs/features.md shows it).
  static const redis::Script& WriteScript();
  // Builds the HMGET for a record / the EVALSHA arguments for a write (used by the importer).
  static redis::KeyedCommand ReadCommand(const TierRead& read);
  static std::vector<std::string> WriteArgs(const TierWrite& write, uint64_t random);
  // Decodes an HMGET reply into a record (found=false when the hash does not exist).
  static StatusOr<TierRecordPtr> DecodeRecord(const TierRead& read, const redis::Reply& reply);

 private:
  redis::Client* client_;
};

}  // namespace dais::features
