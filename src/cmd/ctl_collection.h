// `dais ctl apply -f` for 'kind: collection' and `dais ctl get collections` (docs/memory.md,
// "In a cluster"): the collection spec validated by memory's own parser, with the placement's
// `resources` and `constraints`; the table shows each shard's READY replicas and where.
#pragma once

#include <string>
#include <vector>

#include "cluster/collection_placement.h"
#include "dais/status.h"
#include "etcd/client.h"

namespace dais::cmd {

//   kind: collection
//   name: items
//   tenant: shop            # the tenant whose tokens may use it through the gateway
//   dimension: 64
//   metric: cosine
//   shards: 2
//   replicas: 2             # on different nodes
//   ttl: 0
//   payload: {category: string, price: number}
//   index: {m: 16, ef_construction: 200, ef_search: 64}
//   resources: {cpu_milli: 500, memory_mib: 1024}   # per shard replica
//   constraints: {node_labels: {pool: memory}}
// InvalidArgument naming the field.
StatusOr<cluster::CollectionPlacement> ParseCollectionApply(const std::string& yaml);

// The table's rows, header first; -o json: [{"collection": <stored>, "shards": [{"shard",
// "ready": [nodes], "loading": [nodes]}]}].
StatusOr<std::vector<std::vector<std::string>>> CollectionRows(etcd::Client& c);
StatusOr<std::string> CollectionJson(etcd::Client& c);

}  // namespace dais::cmd
