// The cold tier of vector memory: snapshots of every shard in the offline store's layout
// (Hive-style day partitions, gzip JSON lines), from which a collection is rebuilt when the hot
// tier (Redis) lost it:
//   <root>/<collection>/spec.json                          the collection's spec
//   <root>/<collection>/dt=YYYY-MM-DD/shard-<s>.jsonl.gz   one line per point:
//       {"id": "a", "seq": 17, "expires_ms": 0, "vector": [...], "payload": {...}}
// A file is written to a temporary name and renamed, so a reader sees a whole snapshot or the
// previous one. The newest partition holding a shard's file is the one read.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "dais/status.h"
#include "memory/collection_spec.h"
#include "memory/memory_store.h"

namespace dais::memory {

Status WriteSnapshotSpec(const std::string& root, const CollectionSpec& spec);
// Writes the shard's points into today's partition (UTC date of `now_ms`).
Status WriteShardSnapshot(const std::string& root, const CollectionSpec& spec, int shard,
                          const std::vector<StoredPoint>& points, int64_t now_ms);
// The collections with a spec.json under `root` (a missing root has none).
StatusOr<std::vector<CollectionSpecPtr>> SnapshotSpecs(const std::string& root);
// Calls `each` for every point of the shard's newest snapshot; returns its partition date, or
// NotFound when the shard has none. A malformed line is DataLoss naming the file and line.
StatusOr<std::string> ReadShardSnapshot(const std::string& root, const CollectionSpec& spec,
                                        int shard, const std::function<void(StoredPoint)>& each);

// One snapshot line and back (exposed for tests and the fuzz target).
std::string SnapshotLine(const StoredPoint& p);
StatusOr<StoredPoint> ParseSnapshotLine(std::string_view line, const CollectionSpec& spec);

}  // namespace dais::memory
