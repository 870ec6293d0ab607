#include "cmd/serve_memory.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#include "common/logging.h"
#include "common/thread_sched.h"
#include "memory/redis_store.h"

namespace dais::cmd {
namespace {

// YAML -> JSON text (scalars that read as numbers or booleans stay so).
void QuotedJson(const std::string& s, std::string* out) {
  *out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') *out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    *out += c;
  }
  *out += '"';
}

void ToJson(const YAML::Node& n, std::string* out) {
  if (n.IsMap()) {
    *out += '{';
    bool first = true;
    for (const auto& kv : n) {
      const std::string key = kv.first.as<std::string>();
      if (key == "kind") continue;
      if (!first) *out += ',';
      first = false;
      QuotedJson(key, out);
      *out += ':';
      ToJson(kv.second, out);
    }
    *out += '}';
  } else if (n.IsSequence()) {
    *out += '[';
    for (size_t i = 0; i < n.size(); ++i) {
      if (i) *out += ',';
      ToJson(n[i], out);
    }
    *out += ']';
  } else if (n.IsScalar()) {
    const std::string s = n.Scalar();
    int64_t i;
    double d;
    bool b;
    if (n.Tag() != "!" && YAML::convert<int64_t>::decode(n, i)) {
      *out += std::to_string(i);
    } else if (n.Tag() != "!" && YAML::convert<double>::decode(n, d) && std::isfinite(d)) {
      std::ostringstream o;
      o.precision(17);
      o << d;
      *out += o.str();
    } else if (n.Tag() != "!" && YAML::convert<bool>::decode(n, b)) {
      *out += b ? "true" : "false";
    } else {
      QuotedJson(s, out);
    }
  } else {
    *out += "null";
  }
}

}  // namespace

void AddMemoryFlags(CLI::App* app, MemoryFlags* f) {
  app->add_flag("--memory", f->enabled,
                "Serve vector memory: collections of vectors with payloads, similarity search "
                "(/v2/memory/..., docs/memory.md). Durable in Redis with --redis (restored at "
                "start), else in this process's memory only.");
  app->add_option("--memory-collection", f->collections,
                  "Create this collection at start (a JSON or YAML spec file; implies --memory; "
                  "an existing identical one is kept). Repeatable.");
  app->add_option(
      "--memory-snapshot-dir", f->snapshot_dir,
      "The cold tier: snapshots of every collection as gzip JSON lines in day "
      "partitions (<dir>/<collection>/dt=YYYY-MM-DD/shard-N.jsonl.gz), written every "
      "--memory-snapshot-secs and at a clean stop. A collection Redis does not hold "
      "at start is rebuilt from its newest snapshot (and written back to Redis); on a "
      "dais node, the shards it holds, each rebuilt when Redis never saw a write to it.");
  app->add_option("--memory-snapshot-secs", f->snapshot_secs,
                  "Seconds between snapshots (0: only at a clean stop).")
      ->check(CLI::Range(0, 86400 * 7))
      ->capture_default_str();
  app->add_option("--memory-search-threads", f->search_threads,
                  "Threads that run the searches of the HTTP and gRPC APIs, all from one queue "
                  "(0: one per core this process may use; -1: none, each search runs on the I/O "
                  "thread that read it). With them a long search (a large ef or k) holds no I/O "
                  "thread and the time queued counts against timeout_ms; on 2 cores they "
                  "measured slower than none (docs/memory.md, \"Threads\").")
      ->check(CLI::Range(-1, 1024))
      ->capture_default_str();
}

StatusOr<memory::CollectionSpecPtr> ParseCollectionYaml(const std::string& text,
                                                        const std::string& where) {
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(where + ": not YAML or JSON: " + e.what());
  }
  if (!node.IsMap()) return InvalidArgument(where + ": a collection spec (a map) is needed");
  if (node["kind"] && node["kind"].as<std::string>("") != "collection") {
    return InvalidArgument(where + ": kind " + node["kind"].as<std::string>("") +
                           " is not a collection");
  }
  std::string json;
  ToJson(node, &json);
  auto spec = memory::ParseCollectionSpec(json);
  if (!spec.ok()) return InvalidArgument(where + ": " + spec.status().message());
  return spec;
}

StatusOr<memory::CollectionSpecPtr> LoadCollectionSpecFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read collection spec " + path);
  std::stringstream text;
  text << in.rdbuf();
  return ParseCollectionYaml(text.str(), path);
}

MemoryRuntime::MemoryRuntime() : api_(nullptr) {}

StatusOr<std::unique_ptr<MemoryRuntime>> MemoryRuntime::Create(const MemoryFlags& flags,
                                                               const FeatureFlags& redis_flags) {
  if (!flags.enabled && flags.collections.empty()) return std::unique_ptr<MemoryRuntime>();
  std::vector<memory::CollectionSpecPtr> specs;
  for (const std::string& path : flags.collections) {
    ASSIGN_OR_RETURN(auto spec, LoadCollectionSpecFile(path));
    specs.push_back(std::move(spec));
  }
  if (flags.managed && (redis_flags.redis.empty() || !flags.collections.empty())) {
    return InvalidArgument(
        "a node's vector memory holds the shards the scheduler assigns, loaded from Redis: "
        "--memory needs --redis, and collections are declared with `dais ctl apply` (kind: "
        "collection), not --memory-collection");
  }
  std::unique_ptr<MemoryRuntime> r(new MemoryRuntime());
  r->managed_ = flags.managed;
  if (!redis_flags.redis.empty()) {
    ASSIGN_OR_RETURN(r->redis_, ConnectRedis(redis_flags));
    if (!r->redis_->WaitUntilReachable(std::chrono::seconds(10))) {
      return Unavailable("vector memory: Redis " + redis_flags.redis +
                         " is not reachable (the collections are restored from it)");
    }
    r->store_ = std::make_unique<memory::RedisStore>(r->redis_.get());
  }
  memory::MemoryOptions options;
  if (flags.managed) options.cold_tier = flags.snapshot_dir;  // standalone: at start (below)
  options.search_threads = flags.search_threads == 0
                               ? std::max(static_cast<int>(AllowedCpus().size()), 1)
                               : std::max(flags.search_threads, 0);
  r->service_ = std::make_unique<memory::MemoryService>(r->store_.get(), options);
  r->api_ = frontends::http::MemoryHttp(r->service_.get());
  if (flags.managed) {
    r->api_.set_managed(true);
    r->snapshot_dir_ = flags.snapshot_dir;
    r->snapshot_secs_ = flags.snapshot_secs;
    LOG_INFO("vector memory: holding the shards the scheduler assigns, durable in Redis {}",
             redis_flags.redis);
    r->sweeper_ = std::thread([p = r.get()] { p->SweepLoop(); });
    return r;
  }
  const auto start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(r->service_->Restore([](const std::string& c, int shard, size_t n) {
    LOG_INFO("vector memory: restoring {} shard {}: {} points", c, shard, n);
  }));
  for (const auto& s : r->service_->Stats()) {
    LOG_INFO("vector memory: collection {} restored from Redis: {} points in {} shard(s), {:.1f} s",
             s.spec->name, s.points, s.spec->shards,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  if (!flags.snapshot_dir.empty()) {
    RETURN_IF_ERROR(r->service_->RestoreFromSnapshots(
        flags.snapshot_dir, [&](const std::string& c, int shard, size_t n) {
          LOG_INFO("vector memory: {} shard {} rebuilt from the cold tier {}: {} points", c, shard,
                   flags.snapshot_dir, n);
        }));
    r->snapshot_dir_ = flags.snapshot_dir;
    r->snapshot_secs_ = flags.snapshot_secs;
  }
  for (const auto& spec : specs) {
    if (Status s = r->service_->Create(spec); !s.ok()) {
      return Status(s.code(), "--memory-collection " + spec->name + ": " + s.message());
    }
  }
  LOG_INFO("vector memory: {} collection(s), {}", r->service_->Stats().size(),
           r->store_ ? "durable in Redis " + redis_flags.redis
                     : std::string("in memory only (no --redis)"));
  r->sweeper_ = std::thread([p = r.get()] { p->SweepLoop(); });
  return r;
}

features::KnnSearch MemoryRuntime::KnnSearch() {
  return [service = service_.get()](
             const features::KnnSpec& knn,
             std::vector<float> query) -> StatusOr<std::vector<features::KnnHit>> {
    ASSIGN_OR_RETURN(auto spec, service->Spec(knn.collection));
    RETURN_IF_ERROR(memory::CheckVector(*spec, &query, "query " + knn.query_name));
    memory::SearchRequest r;
    r.vector = std::move(query);
    r.k = knn.k;
    r.with_payload = false;
    if (knn.has_min_score) r.threshold = knn.min_score;
    ASSIGN_OR_RETURN(auto hits, service->Search(knn.collection, r));
    std::vector<features::KnnHit> out;
    out.reserve(hits.size());
    for (auto& h : hits) out.push_back({std::move(h.id), h.score});
    return out;
  };
}

MemoryRuntime::~MemoryRuntime() {
  stop_ = true;
  if (sweeper_.joinable()) sweeper_.join();
  if (!snapshot_dir_.empty() && service_ != nullptr) WriteSnapshot();
}

void MemoryRuntime::WriteSnapshot() {
  const auto start = std::chrono::steady_clock::now();
  if (Status s = service_->Snapshot(snapshot_dir_); !s.ok()) {
    LOG_ERROR("vector memory: snapshot to {} failed: {}", snapshot_dir_, s.message());
    return;
  }
  size_t points = 0;
  for (const auto& c : service_->Stats()) points += c.points;
  LOG_INFO("vector memory: snapshot of {} points written to {} in {:.2f} s", points, snapshot_dir_,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

void MemoryRuntime::SweepLoop() {
  auto next_snapshot = std::chrono::steady_clock::now() + std::chrono::seconds(snapshot_secs_);
  auto next_sweep = std::chrono::steady_clock::now();
  auto next_sync = next_sweep + std::chrono::seconds(2);
  while (!stop_) {
    service_->CatchUp();  // other processes' writes, every 100 ms
    const auto now = std::chrono::steady_clock::now();
    if (!managed_ && now >= next_sync) {  // other processes' collections, every 2 s
      if (Status s = service_->SyncCollections(); !s.ok()) {
        LOG_WARNING("vector memory: reading the collections in Redis: {}", s.message());
      }
      next_sync = now + std::chrono::seconds(2);
    }
    if (now >= next_sweep) {
      service_->Sweep();
      next_sweep = now + std::chrono::seconds(1);
    }
    if (!snapshot_dir_.empty() && snapshot_secs_ > 0 && now >= next_snapshot) {
      WriteSnapshot();
      next_snapshot = std::chrono::steady_clock::now() + std::chrono::seconds(snapshot_secs_);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace dais::cmd
