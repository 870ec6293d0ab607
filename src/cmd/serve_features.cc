#include "cmd/serve_features.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>

#include "cmd/tls_flags.h"
#include "common/logging.h"
#include "features/offline/offline_files.h"
#include "features/store/memory_tier.h"
#include "features/store/offline_import.h"
#include "features/store/redis_tier.h"
#include "fmt/format.h"

namespace dais::cmd {

namespace fs = std::filesystem;

void AddRedisFlags(CLI::App* app, FeatureFlags* f) {
  app->add_option("--redis", f->redis,
                  "Online feature store: host:port of Redis, or a comma-separated list of seed "
                  "nodes of a Redis Cluster (the mode is detected). Without it, features live "
                  "in process (pushes, and --feature-offline-root files).");
  app->add_option("--redis-pool-size", f->redis_pool, "Connections per Redis node (pipelined).")
      ->capture_default_str();
  app->add_option("--redis-connect-timeout-ms", f->redis_connect_timeout_ms,
                  "Timeout of one connection attempt to a Redis node.")
      ->capture_default_str();
  app->add_option("--redis-user", f->redis_user, "Redis ACL user name (AUTH).");
  app->add_option("--redis-password", f->redis_password,
                  "Redis password (AUTH). Prefer the DAIS_REDIS_PASSWORD environment variable.")
      ->envname("DAIS_REDIS_PASSWORD");
  AddClientTlsFlags(app, "redis", "Redis (features, locks, invalidations, streams)", &f->redis_tls);
}

void AddFeatureFlags(CLI::App* app, FeatureFlags* f) {
  AddRedisFlags(app, f);
  app->add_option("--feature-spec", f->specs,
                  "A features.yaml to serve through the Feast API on its own (models' "
                  "features.yaml beside config.pbtxt are found by themselves). Repeatable.");
  app->add_option("--feature-l1-bytes", f->l1_bytes,
                  "Bytes of the in-process feature cache (L1, LFU admission).")
      ->capture_default_str();
  app->add_option("--feature-l1-ttl-ms", f->l1_ttl_ms,
                  "How long L1 serves a record before reading Redis again (the bound on how "
                  "long another node's push can go unseen here when invalidation is off or a "
                  "message is lost).")
      ->capture_default_str();
  app->add_option("--feature-invalidation", f->invalidation,
                  "With --redis: publish the keys of every write on the Redis channel "
                  "dais:feature-invalidation and drop the keys other nodes publish there from "
                  "this node's L1, so a push through any node is seen everywhere at once "
                  "(false: within --feature-l1-ttl-ms).")
      ->capture_default_str();
  app->add_option("--feature-negative-ttl-ms", f->negative_ttl_ms,
                  "How long L1 remembers that Redis has no record for an entity.")
      ->capture_default_str();
  app->add_option("--feature-lookup-timeout-ms", f->lookup_timeout_ms,
                  "Deadline of a feature lookup's Redis read; past it, L1 (if still within max "
                  "age) or the declared defaults are served and counted.")
      ->capture_default_str();
  app->add_option("--feature-push-timeout-ms", f->push_timeout_ms,
                  "Deadline of a /push's Redis write; past it (or at once when Redis is not "
                  "connected) the push answers 503.")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app->add_option("--feature-max-future-skew", f->max_future_skew_secs,
                  "Seconds an event_timestamp of /push may lie ahead of this node's clock; "
                  "later ones are refused (400), as they would shadow every correct push of "
                  "the entity until the record expires.")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app->add_option("--feature-memory-bytes", f->memory_bytes,
                  "Bound of the in-process online tier (standalone mode, no --redis).")
      ->capture_default_str();
  app->add_option("--feature-offline-root", f->offline_root,
                  "Root of the offline feature files (<root>/<group>/dt=YYYY-MM-DD/*.csv|jsonl). "
                  "Access counts for pre-warm are kept under <root>/_access/; without --redis "
                  "the latest partitions are loaded at start.");
  app->add_option("--node-id", f->node_id,
                  "Name of this node: its lock owner and NODE lock name when loads are "
                  "coordinated (--coordination), and its access-count file name. Default: "
                  "hostname-pid.");
  app->add_option("--feature-access-flush-secs", f->access_flush_secs,
                  "Seconds between writes of the access counts.")
      ->capture_default_str();
}

StatusOr<std::unique_ptr<redis::Client>> ConnectRedis(const FeatureFlags& f) {
  ASSIGN_OR_RETURN(redis::ClientOptions o, redis::ParseSeeds(f.redis));
  o.connections_per_node = f.redis_pool;
  o.connect_timeout = std::chrono::milliseconds(f.redis_connect_timeout_ms);
  o.username = f.redis_user;
  o.password = f.redis_password;
  const bool rediss = o.tls.enabled;
  o.tls = f.redis_tls;
  o.tls.enabled = o.tls.enabled || rediss;
  return redis::Client::Create(std::move(o));
}

StatusOr<std::vector<features::FeatureSpecPtr>> LoadSpecs(const std::vector<std::string>& paths) {
  std::vector<features::FeatureSpecPtr> out;
  for (const auto& p : paths) {
    ASSIGN_OR_RETURN(auto s, features::LoadFeatureSpecFile(p));
    out.push_back(std::move(s));
  }
  return out;
}

std::string DefaultNodeId() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return fmt::format("{}-{}", host, getpid());
}

std::string AccessFile(const std::string& root, const std::string& date, const std::string& node) {
  return fmt::format("{}/_access/dt={}/{}.tsv", root, date, node);
}

StatusOr<std::unique_ptr<FeatureRuntime>> FeatureRuntime::Create(const FeatureFlags& flags,
                                                                 runtime::ModelManager* manager) {
  std::unique_ptr<FeatureRuntime> rt(new FeatureRuntime());
  rt->flags_ = flags;
  rt->manager_ = manager;
  if (rt->flags_.node_id.empty()) rt->flags_.node_id = DefaultNodeId();
  ASSIGN_OR_RETURN(rt->specs_, LoadSpecs(flags.specs));
  features::StoreOptions so;
  so.l1.capacity_bytes = flags.l1_bytes;
  so.l1_ttl = std::chrono::milliseconds(flags.l1_ttl_ms);
  so.negative_ttl = std::chrono::milliseconds(flags.negative_ttl_ms);
  so.lookup_timeout = std::chrono::milliseconds(flags.lookup_timeout_ms);
  so.push_timeout = std::chrono::milliseconds(flags.push_timeout_ms);
  std::unique_ptr<features::OnlineTier> tier;
  if (!flags.redis.empty()) {
    ASSIGN_OR_RETURN(rt->redis_, ConnectRedis(flags));
    if (!rt->redis_->WaitUntilReachable(std::chrono::seconds(2))) {
      LOG_WARNING(
          "redis {} is not reachable yet; features fall back to defaults until it is "
          "(see /healthz)",
          flags.redis);
    } else {
      LOG_INFO("feature store: redis {} ({})", flags.redis,
               rt->redis_->cluster_mode() ? "cluster" : "standalone");
    }
    tier = std::make_unique<features::RedisTier>(rt->redis_.get());
    if (flags.invalidation) {
      tier = std::make_unique<features::PublishingTier>(std::move(tier),
                                                        features::RedisPublisher(rt->redis_.get()));
    }
  } else {
    tier = std::make_unique<features::MemoryTier>(flags.memory_bytes);
    LOG_INFO(
        "feature store: in-process tier ({} MiB); give --redis to share features between "
        "nodes",
        flags.memory_bytes >> 20);
  }
  rt->store_ = std::make_unique<features::FeatureStore>(so, std::move(tier));
  if (rt->redis_ && flags.invalidation) {
    ASSIGN_OR_RETURN(rt->invalidation_, features::InvalidationListener::Start(rt->redis_->options(),
                                                                              rt->store_.get()));
    LOG_INFO("feature store: L1 invalidation on (channel {})", features::kInvalidationChannel);
  }
  FeatureRuntime* self = rt.get();
  rt->api_ = std::make_unique<frontends::http::FeastHttp>(
      rt->store_.get(), [self] { return self->AllSpecs(); },
      [self](const std::string& model) -> features::FeatureSpecPtr {
        auto mv = self->manager_->Find(model, -1);
        return mv.ok() ? (*mv)->features() : nullptr;
      },
      frontends::http::PushOptions{std::chrono::seconds(flags.max_future_skew_secs), {}});
  rt->enricher_ = std::make_unique<features::Enricher>(rt->store_.get());
  rt->access_day_ = features::UtcDate(features::UnixNowUs() / 1000000);
  if (!flags.offline_root.empty()) rt->flusher_ = std::thread([self] { self->FlushLoop(); });
  return rt;
}

FeatureRuntime::~FeatureRuntime() {
  stop_ = true;
  if (flusher_.joinable()) flusher_.join();
  if (!flags_.offline_root.empty()) FlushAccessCounts();
  // The listener first (its messages go to the store), then the client: its shutdown answers
  // pending reads and writes through the store's callbacks, so the store must still exist;
  // afterwards nothing calls the tier any more.
  invalidation_.reset();
  redis_.reset();
  store_.reset();
}

std::vector<features::FeatureSpecPtr> FeatureRuntime::AllSpecs() const {
  std::vector<features::FeatureSpecPtr> all = specs_;
  for (const auto& mv : manager_->LatestReady()) {
    if (mv->features()) all.push_back(mv->features());
  }
  return all;
}

void FeatureRuntime::FlushLoop() {
  int64_t waited_ms = 0;
  while (!stop_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    waited_ms += 200;
    if (waited_ms >= int64_t{flags_.access_flush_secs} * 1000) {
      waited_ms = 0;
      FlushAccessCounts();
    }
  }
}

void FeatureRuntime::FlushAccessCounts() {
  features::HeavyHitters* hh = store_->access();
  if (hh == nullptr || flags_.offline_root.empty()) return;
  std::string today = features::UtcDate(features::UnixNowUs() / 1000000);
  std::string path = AccessFile(flags_.offline_root, access_day_, flags_.node_id);
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << hh->Serialize(100000);
    if (!out) {
      LOG_WARNING("cannot write access counts to {}", tmp);
      return;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) LOG_WARNING("cannot write access counts to {}: {}", path, ec.message());
  if (today != access_day_) {  // a new day: yesterday's file is final
    hh->Reset();
    access_day_ = today;
  }
}

void FeatureRuntime::LoadOffline() {
  if (flags_.offline_root.empty() || !flags_.redis.empty()) return;
  for (const auto& spec : AllSpecs()) {
    for (size_t g = 0; g < spec->groups.size(); ++g) {
      features::ImportOptions io;
      io.progress = [](const features::ImportProgress& p) {
        LOG_INFO("features: loading {} dt={}: {} rows ({} bad) in {:.1f}s", p.group, p.date, p.rows,
                 p.bad_rows, p.seconds);
      };
      auto r = features::ImportPartition(store_->tier(), *spec, g, flags_.offline_root, "", io);
      if (!r.ok()) {
        LOG_WARNING("features: {} not loaded: {}", spec->groups[g].name, r.status().message());
      } else if (r->errors > 0) {
        LOG_WARNING("features: {}: {} rows not stored: {}", r->group, r->errors, r->first_error);
      }
    }
  }
}

}  // namespace dais::cmd
