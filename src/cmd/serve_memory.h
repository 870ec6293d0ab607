// Vector memory in `dais serve` / `dais node` (docs/memory.md): the --memory flags, the
// MemoryService over Redis (when --redis is given) or memory only, the collections of
// --memory-collection files created at start, and the TTL sweep.
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cmd/serve_features.h"
#include "features/enrich/enricher.h"
#include "frontends/http/memory_http.h"
#include "memory/memory_service.h"

namespace dais::cmd {

struct MemoryFlags {
  bool enabled = false;
  std::vector<std::string> collections;  // spec files (JSON or YAML)
  std::string snapshot_dir;              // the cold tier; empty: none
  int snapshot_secs = 3600;
  // Threads searching, from one queue (0: one per core; -1, the default: none, each search runs
  // on the I/O thread that read it; docs/memory.md, "Threads").
  int search_threads = -1;
  // `dais node`: holds only the shards the scheduler assigns (memory::MemoryService::Host), no
  // collection of its own; needs --redis.
  bool managed = false;
};

void AddMemoryFlags(CLI::App* app, MemoryFlags* flags);

// A collection spec from a file: JSON, or YAML with the same fields (`kind: collection` allowed).
StatusOr<memory::CollectionSpecPtr> LoadCollectionSpecFile(const std::string& path);
// YAML text (a superset of JSON) as a collection spec.
StatusOr<memory::CollectionSpecPtr> ParseCollectionYaml(const std::string& text,
                                                        const std::string& where);

class MemoryRuntime {
 public:
  // Null when vector memory is off. Restores what Redis holds (progress logged), then creates
  // the --memory-collection collections.
  static StatusOr<std::unique_ptr<MemoryRuntime>> Create(const MemoryFlags& flags,
                                                         const FeatureFlags& redis_flags);
  ~MemoryRuntime();
  frontends::http::MemoryHttp* api() { return &api_; }
  memory::MemoryService* service() { return service_.get(); }
  // knn features (features.yaml `knn:`) searched in this server's collections.
  features::KnnSearch KnnSearch();
  // Writes the snapshots now (with --memory-snapshot-dir; nothing without).
  void SnapshotNow() {
    if (!snapshot_dir_.empty()) WriteSnapshot();
  }

 private:
  MemoryRuntime();
  void SweepLoop();
  void WriteSnapshot();

  std::unique_ptr<redis::Client> redis_;
  std::unique_ptr<memory::MemoryStore> store_;
  std::unique_ptr<memory::MemoryService> service_;
  frontends::http::MemoryHttp api_;
  std::string snapshot_dir_;
  int snapshot_secs_ = 0;
  bool managed_ = false;
  std::atomic<bool> stop_{false};
  std::thread sweeper_;
};

}  // namespace dais::cmd
