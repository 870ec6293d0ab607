// Wiring of the feature store into `dais serve` (and the flags shared with `dais features`):
// Redis client (or the in-process memory tier), L1, the Feast API, the enricher, access-count
// persistence and the standalone load of offline files.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dais/status.h"
#include "features/enrich/enricher.h"
#include "features/store/feature_store.h"
#include "features/store/invalidation.h"
#include "frontends/http/feast_http.h"
#include "redis/client.h"
#include "runtime/model_manager.h"
#include "tls/config.h"

namespace CLI {
class App;
}

namespace dais::cmd {

struct FeatureFlags {
  std::string redis;  // "host:port[,host:port...]"; empty: the in-process tier
  int redis_pool = 2;
  int redis_connect_timeout_ms = 500;
  std::string redis_user, redis_password;
  tls::ClientConfig redis_tls;  // --redis-tls* (rediss:// seeds turn it on too)
  std::vector<std::string> specs;
  uint64_t l1_bytes = 64ull << 20;
  int l1_ttl_ms = 2000;
  int negative_ttl_ms = 500;
  int lookup_timeout_ms = 50;
  int push_timeout_ms = 1000;
  int max_future_skew_secs = 300;
  uint64_t memory_bytes = 1ull << 30;
  std::string offline_root;
  std::string node_id;
  int access_flush_secs = 60;
  bool invalidation = true;  // publish written keys; drop other processes' writes from L1
};

// Flags for the Redis connection only (`dais features` uses these too).
void AddRedisFlags(CLI::App* app, FeatureFlags* flags);
void AddFeatureFlags(CLI::App* app, FeatureFlags* flags);
StatusOr<std::unique_ptr<redis::Client>> ConnectRedis(const FeatureFlags& flags);
// The --feature-spec files, parsed.
StatusOr<std::vector<features::FeatureSpecPtr>> LoadSpecs(const std::vector<std::string>& paths);

class FeatureRuntime {
 public:
  // `manager` (borrowed) supplies the models' specs.
  static StatusOr<std::unique_ptr<FeatureRuntime>> Create(const FeatureFlags& flags,
                                                          runtime::ModelManager* manager);
  ~FeatureRuntime();

  frontends::http::FeastHttp* api() { return api_.get(); }
  features::Enricher* enricher() { return enricher_.get(); }
  features::FeatureStore* store() { return store_.get(); }
  std::string tier_name() const { return store_->tier()->name(); }
  // Standalone mode: loads the latest partition of every known group from --feature-offline-root
  // into the memory tier, logging progress. Call after the models are loaded.
  void LoadOffline();
  // Writes today's access counts now (also done every --feature-access-flush-secs).
  void FlushAccessCounts();

 private:
  FeatureRuntime() = default;
  std::vector<features::FeatureSpecPtr> AllSpecs() const;
  void FlushLoop();

  FeatureFlags flags_;
  runtime::ModelManager* manager_ = nullptr;
  std::vector<features::FeatureSpecPtr> specs_;
  std::unique_ptr<redis::Client> redis_;
  std::unique_ptr<features::FeatureStore> store_;
  std::unique_ptr<features::InvalidationListener> invalidation_;
  std::unique_ptr<frontends::http::FeastHttp> api_;
  std::unique_ptr<features::Enricher> enricher_;
  std::string access_day_;
  std::thread flusher_;
  std::atomic<bool> stop_{false};
};

// hostname-pid.
std::string DefaultNodeId();

// Where access counts of `date` from `node` are kept: <root>/_access/dt=<date>/<node>.tsv
std::string AccessFile(const std::string& root, const std::string& date, const std::string& node);

}  // namespace dais::cmd
