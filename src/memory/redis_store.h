// The hot tier of vector memory on Redis / Redis Cluster (docs/memory.md, "Storage"):
//   dais:<tenant>:mem:{<collection>/<shard>}:points  hash id -> "<seq>:<expires_ms>:" + float32
//                                                    vector + payload JSON
//   dais:<tenant>:mem:{<collection>/<shard>}:seq     the shard's write sequence (INCR)
//   dais:<tenant>:mem:{<collection>/<shard>}:log     stream: every write (fields _op u|d, _seq,
//                                                    then id -> value / ""), capped near
//                                                    kLogMaxLen entries (XADD MAXLEN ~)
//   dais:mem:collections                             hash name -> spec JSON (a standalone
//                                                    server's collections)
// (<tenant> is "_" for a collection without one.) The hash tag keeps a shard's keys in one slot,
// so a write is one atomic script and the shards of a collection spread over the Cluster.
// Thread-safe; callbacks run on the Redis client's I/O thread.
#pragma once

#include <string>

#include "memory/memory_store.h"
#include "redis/client.h"

namespace dais::memory {

class RedisStore : public MemoryStore {
 public:
  explicit RedisStore(redis::Client* client) : client_(client) {}  // borrowed

  void Upsert(const CollectionSpec& spec, int shard, const std::vector<Point>& points,
              int64_t expires_ms, Deadline deadline, SeqCallback done) override;
  void Delete(const CollectionSpec& spec, int shard, const std::vector<std::string>& ids,
              Deadline deadline, SeqCallback done) override;
  Status Load(const CollectionSpec& spec, int shard,
              const std::function<void(StoredPoint)>& each) override;
  void Forget(const CollectionSpec& spec, int shard, const std::vector<std::string>& ids) override;
  StatusOr<LogEntry> LogEnd(const CollectionSpec& spec, int shard) override;
  StatusOr<std::vector<LogEntry>> ReadLog(const CollectionSpec& spec, int shard,
                                          const std::string& position, int max) override;
  Status SaveSpec(const CollectionSpec& spec) override;
  Status Drop(const CollectionSpec& spec) override;
  StatusOr<std::vector<CollectionSpecPtr>> Specs() override;

  static constexpr int kLogMaxLen = 100000;
  // The key of a shard's points hash ("...:points"), sequence ("...:seq") or log ("...:log").
  static std::string ShardKey(const CollectionSpec& spec, int shard, const char* what);

 private:
  redis::Client* client_;
};

}  // namespace dais::memory
