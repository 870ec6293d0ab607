#include "cmd/features.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_set>

#include "common/logging.h"
#include "features/offline/offline_files.h"
#include "features/store/invalidation.h"
#include "features/store/offline_import.h"
#include "features/store/redis_tier.h"
#include "fmt/format.h"
#include "frontends/http/feast_http.h"
#include "frontends/http/infer_codec.h"

namespace dais::cmd {

namespace fs = std::filesystem;
using features::FeatureSpecPtr;

CLI::App* AddFeaturesCommand(CLI::App* app, FeaturesCliOptions* o) {
  CLI::App* f = app->add_subcommand(
      "features", "Operate the online feature store: get, put, import, prewarm, stats");
  f->require_subcommand(1);
  auto common = [o](CLI::App* c, bool spec) {
    AddRedisFlags(c, &o->store);
    if (spec) {
      c->add_option("--spec", o->spec, "The features.yaml that defines the groups.")->required();
    }
  };
  CLI::App* get = f->add_subcommand("get", "Print features of entities (Feast's JSON shape)");
  common(get, true);
  get->add_option("--entity", o->entities, "An entity column: NAME=ID,ID,... Repeatable.")
      ->required();
  get->add_option("--feature", o->features,
                  "group:feature (repeatable; default: every feature of every group whose "
                  "entity is given)");
  CLI::App* put = f->add_subcommand("put", "Write feature rows (a Feast /push body)");
  common(put, true);
  put->add_option("--json", o->json,
                  "The push body: {\"push_source_name\": group, \"df\": {...}}; @FILE reads a "
                  "file, - reads stdin.")
      ->required();
  CLI::App* imp = f->add_subcommand(
      "import", "Stream an offline partition (<root>/<group>/dt=YYYY-MM-DD) into Redis");
  common(imp, true);
  imp->add_option("--root", o->root, "Root of the offline feature files.")->required();
  imp->add_option("--group", o->groups, "Group to import (repeatable; default: all).");
  imp->add_option("--date", o->date, "Partition date YYYY-MM-DD (default: the latest).");
  imp->add_option("--batch-rows", o->batch_rows, "Rows per pipelined batch.")
      ->capture_default_str();
  CLI::App* pre = f->add_subcommand(
      "prewarm",
      "Load the top N entities of a day's access counts (<root>/_access/dt=DATE/*.tsv, written "
      "by dais serve --feature-offline-root) from the offline files into Redis, slowing above "
      "--soft-limit of maxmemory and pausing above --hard-limit");
  common(pre, true);
  pre->add_option("--root", o->root, "Root of the offline feature files.")->required();
  pre->add_option("--top", o->top, "How many of the most accessed entities.")
      ->capture_default_str();
  pre->add_option("--date", o->date, "Day of the access counts (default: yesterday, UTC).");
  pre->add_option("--soft-limit", o->soft_limit,
                  "Fraction of maxmemory above which the rate is halved per step.")
      ->capture_default_str();
  pre->add_option("--hard-limit", o->hard_limit,
                  "Fraction of maxmemory above which pre-warm pauses until memory is below "
                  "--soft-limit again.")
      ->capture_default_str();
  pre->add_option("--batch-rows", o->batch_rows, "Rows per pipelined batch.")
      ->capture_default_str();
  CLI::App* stats = f->add_subcommand(
      "stats", "Memory and keys of each Redis master, and the top accessed entities");
  common(stats, false);
  stats->add_option("--root", o->root, "Offline root: also print the top accessed entities.");
  stats->add_option("--date", o->date, "Day of the access counts (default: today, UTC).");
  stats->add_option("--top", o->top, "How many accessed entities to print.");
  return f;
}

namespace {

struct Opened {
  std::unique_ptr<redis::Client> client;
  std::unique_ptr<features::FeatureStore> store;
  FeatureSpecPtr spec;
};

StatusOr<Opened> Open(const FeaturesCliOptions& o, bool need_spec) {
  Opened op;
  if (o.store.redis.empty()) return InvalidArgument("--redis is required");
  auto client = ConnectRedis(o.store);
  if (!client.ok()) return client.status();
  op.client = std::move(client).value();
  if (!op.client->WaitUntilReachable(std::chrono::seconds(5))) {
    return Unavailable(fmt::format("redis {} is not reachable", o.store.redis));
  }
  if (need_spec) {
    auto spec = features::LoadFeatureSpecFile(o.spec);
    if (!spec.ok()) return spec.status();
    op.spec = *spec;
  }
  features::StoreOptions so;
  so.lookup_timeout = std::chrono::milliseconds(2000);
  so.access_capacity = 0;
  // Writes (put, import, prewarm) publish their keys: running `dais serve` nodes drop their L1
  // copies at once (features/store/invalidation.h).
  op.store = std::make_unique<features::FeatureStore>(
      so, std::make_unique<features::PublishingTier>(
              std::make_unique<features::RedisTier>(op.client.get()),
              features::RedisPublisher(op.client.get())));
  return op;
}

// Runs one Feast API request in process and prints its answer (or {"error": ...}) on stdout.
int RunApi(frontends::http::FeastHttp& api, bool push, const std::string& body) {
  std::promise<StatusOr<std::string>> pr;
  auto done = [&pr](StatusOr<std::string> json) { pr.set_value(std::move(json)); };
  if (push) {
    api.Push(body, done);
  } else {
    api.GetOnlineFeatures(body, done);
  }
  StatusOr<std::string> json = pr.get_future().get();
  fmt::print("{}\n", json.ok() ? *json : frontends::http::ErrorJson(json.status().message()));
  return json.ok() ? 0 : 1;
}

int Fail(const Status& s) {
  fmt::print(stderr, "dais features: {}\n", s.message());
  return s.code() == StatusCode::kInvalidArgument ? 2 : 1;
}

// Max over masters of used_memory / maxmemory (0 when no master sets maxmemory).
double MemoryRatio(redis::Client& c) {
  double worst = 0;
  for (const auto& node : c.Masters()) {
    auto r = c.RunOn(node, {"INFO", "memory"}, std::chrono::milliseconds(1000));
    if (!r.ok() || r->type != redis::Reply::Type::kBulk) continue;
    auto field = [&](std::string_view name) -> double {
      size_t p = r->str.find(std::string(name) + ":");
      return p == std::string::npos ? 0 : std::atof(r->str.c_str() + p + name.size() + 1);
    };
    double max = field("maxmemory");
    if (max > 0) worst = std::max(worst, field("used_memory") / max);
  }
  return worst;
}

StatusOr<std::vector<features::HeavyHitters::Item>> ReadAccess(const std::string& root,
                                                               const std::string& date) {
  features::HeavyHitters merged(1 << 20);
  std::string dir = fmt::format("{}/_access/dt={}", root, date);
  std::error_code ec;
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".tsv") continue;
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    auto items = features::HeavyHitters::Parse(ss.str());
    if (!items.ok()) return items.status().WithPrefix(e.path().string());
    merged.Merge(*items);
    ++files;
  }
  if (files == 0) return NotFound(fmt::format("no access counts in {}", dir));
  return merged.Top(merged.size());
}

int RunStats(const FeaturesCliOptions& o) {
  if (!o.store.redis.empty()) {
    auto op = Open(o, false);
    if (!op.ok()) return Fail(op.status());
    fmt::print("{:<24} {:>12} {:>14} {:>14} {:>8}  {}\n", "node", "keys", "used_memory",
               "maxmemory", "used", "policy");
    for (const auto& node : op->client->Masters()) {
      auto keys = op->client->RunOn(node, {"DBSIZE"});
      auto mem = op->client->RunOn(node, {"INFO", "memory"});
      auto field = [&](std::string_view name) -> std::string {
        if (!mem.ok()) return "?";
        size_t p = mem->str.find(std::string(name) + ":");
        if (p == std::string::npos) return "?";
        size_t e = mem->str.find('\r', p);
        return mem->str.substr(p + name.size() + 1, e - p - name.size() - 1);
      };
      double used = std::atof(field("used_memory").c_str());
      double max = std::atof(field("maxmemory").c_str());
      fmt::print("{:<24} {:>12} {:>14} {:>14} {:>7.1f}%  {}\n", node,
                 keys.ok() ? keys->integer : -1, field("used_memory"), field("maxmemory"),
                 max > 0 ? 100 * used / max : 0.0, field("maxmemory_policy"));
    }
  }
  if (!o.root.empty()) {
    std::string date = o.date.empty() ? features::UtcDate(features::UnixNowUs() / 1000000) : o.date;
    auto items = ReadAccess(o.root, date);
    if (!items.ok()) return Fail(items.status());
    fmt::print("top accessed entities on {} ({} tracked):\n", date, items->size());
    for (size_t i = 0; i < items->size() && static_cast<int64_t>(i) < o.top; ++i) {
      fmt::print("{:>12}  {}\n", (*items)[i].count, (*items)[i].key);
    }
  }
  return 0;
}

// The /get-online-features body for --entity NAME=ID,ID,... and --feature (default: every
// feature of the groups keyed by the given entities).
StatusOr<std::string> GetRequestJson(const FeaturesCliOptions& o,
                                     const features::FeatureSpec& spec) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  std::vector<std::string> refs = o.features;
  w.StartObject();
  w.Key("project");
  w.String(spec.domain.c_str());
  w.Key("entities");
  w.StartObject();
  for (const auto& e : o.entities) {
    size_t eq = e.find('=');
    if (eq == std::string::npos) return InvalidArgument("--entity must be NAME=ID,ID,...");
    std::string name = e.substr(0, eq);
    const features::EntitySpec* es = spec.FindEntity(name);
    w.Key(name.c_str());
    w.StartArray();
    std::stringstream ss(e.substr(eq + 1));
    for (std::string id; std::getline(ss, id, ',');) {
      // int64 ids go as JSON numbers when they look like one (echoed back as numbers).
      int64_t n = 0;
      auto r = std::from_chars(id.data(), id.data() + id.size(), n);
      bool number = es && es->key_type == features::KeyType::kInt64 && !id.empty() &&
                    r.ec == std::errc() && r.ptr == id.data() + id.size();
      number ? w.Int64(n) : w.String(id.c_str());
    }
    w.EndArray();
    if (o.features.empty()) {
      for (const auto& g : spec.groups) {
        if (g.entity != name) continue;
        for (const auto& f : g.features) refs.push_back(g.name + ":" + f.name);
      }
    }
  }
  w.EndObject();
  w.Key("features");
  w.StartArray();
  for (const std::string& r : refs) w.String(r.c_str());
  w.EndArray();
  w.EndObject();
  return std::string(sb.GetString());
}

// --json: the body itself, "-" (stdin) or "@FILE".
StatusOr<std::string> PutBody(const std::string& json) {
  if (json != "-" && !json.starts_with("@")) return json;
  std::stringstream ss;
  if (json == "-") {
    ss << std::cin.rdbuf();
  } else {
    std::ifstream in(json.substr(1));
    if (!in) return NotFound("cannot read " + json.substr(1));
    ss << in.rdbuf();
  }
  return ss.str();
}

// What `prewarm` loads: the entity ids of the most accessed entities of the day before (or
// --date), and the groups keyed by their entities.
Status PrewarmSelection(const FeaturesCliOptions& o, const features::FeatureSpec& spec,
                        std::unordered_set<std::string>* only, std::vector<size_t>* groups) {
  std::string date =
      o.date.empty() ? features::UtcDate(features::UnixNowUs() / 1000000 - 86400) : o.date;
  ASSIGN_OR_RETURN(auto items, ReadAccess(o.root, date));
  std::set<std::string> entities;
  std::string prefix = spec.domain + ":";
  for (const auto& it : items) {
    if (static_cast<int64_t>(only->size()) >= o.top) break;
    if (!it.key.starts_with(prefix)) continue;
    size_t eq = it.key.find('=');
    if (eq == std::string::npos) continue;
    entities.insert(it.key.substr(prefix.size(), eq - prefix.size()));
    only->insert(it.key.substr(eq + 1));
  }
  fmt::print(stderr, "prewarm: top {} entities of {} (domain {})\n", only->size(), date,
             spec.domain);
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    if (entities.count(spec.groups[g].entity)) groups->push_back(g);
  }
  return OkStatus();
}

// Pre-warm's brake on Redis memory: before every batch (one INFO per master, ~0.1 ms) it slows
// down above the soft limit and pauses above the hard one until memory is back under the soft
// limit. A batch is at most batch_rows records, so with window 2 it overshoots by two batches.
struct PrewarmThrottle {
  const FeaturesCliOptions& o;
  redis::Client& client;
  int64_t paused_ms = 0;
  int64_t slowed = 0;

  bool BeforeBatch() {
    double ratio = MemoryRatio(client);
    if (ratio > o.hard_limit) {
      fmt::print(stderr,
                 "\nprewarm: redis memory at {:.0f}% of maxmemory (hard limit {:.0f}%): paused\n",
                 100 * ratio, 100 * o.hard_limit);
      while (ratio > o.soft_limit) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        paused_ms += 200;
        ratio = MemoryRatio(client);
      }
      fmt::print(stderr, "prewarm: memory back to {:.0f}%: resumed\n", 100 * ratio);
    } else if (ratio > o.soft_limit) {
      // The further above the soft limit, the longer the pause per batch.
      ++slowed;
      double over = (ratio - o.soft_limit) / std::max(1e-6, o.hard_limit - o.soft_limit);
      std::this_thread::sleep_for(std::chrono::milliseconds(10 + static_cast<int>(200 * over)));
    }
    return true;
  }
};

// Imports one group's partition(s); false when it failed or some rows did not go in.
bool ImportGroup(const std::string& sub, const FeaturesCliOptions& o, Opened& op, size_t g,
                 features::ImportOptions io) {
  const bool tty = isatty(STDERR_FILENO);
  io.progress = [&](const features::ImportProgress& p) {
    std::string line = fmt::format(
        "{} {} dt={}: {} rows, {} written, {} older kept, {} bad, {} errors, {:.0f} rows/s", sub,
        p.group, p.date, p.rows, p.written, p.skipped_older, p.bad_rows, p.errors,
        p.seconds > 0 ? static_cast<double>(p.rows) / p.seconds : 0.0);
    fmt::print(stderr, "{}{}", line, tty ? "\r" : "\n");
  };
  const features::FeatureSpec& spec = *op.spec;
  auto r = features::ImportPartition(op.store->tier(), spec, g, o.root,
                                     o.date.empty() || sub == "prewarm" ? "" : o.date, io);
  if (tty) fmt::print(stderr, "\n");
  if (!r.ok()) {
    fmt::print(stderr, "{} {}: {}\n", sub, spec.groups[g].name, r.status().message());
    return false;
  }
  fmt::print(
      "{} {} dt={}: files={} rows={} written={} skipped_older={} bad_rows={} errors={} "
      "seconds={:.2f} rows_per_sec={:.0f}\n",
      sub, r->group, r->date, r->files, r->rows, r->written, r->skipped_older, r->bad_rows,
      r->errors, r->seconds, r->seconds > 0 ? static_cast<double>(r->rows) / r->seconds : 0.0);
  if (r->errors > 0) fmt::print(stderr, "first error: {}\n", r->first_error);
  return r->errors == 0;
}

// import / prewarm.
int RunImport(const std::string& sub, const FeaturesCliOptions& o, Opened& op) {
  const features::FeatureSpec& spec = *op.spec;
  std::unordered_set<std::string> only;
  std::vector<size_t> groups;
  if (sub == "prewarm") {
    if (Status s = PrewarmSelection(o, spec, &only, &groups); !s.ok()) return Fail(s);
  } else {
    for (size_t g = 0; g < spec.groups.size(); ++g) {
      if (o.groups.empty() ||
          std::find(o.groups.begin(), o.groups.end(), spec.groups[g].name) != o.groups.end()) {
        groups.push_back(g);
      }
    }
    if (groups.empty()) return Fail(InvalidArgument("no such --group in " + o.spec));
  }
  PrewarmThrottle throttle{o, *op.client};
  int rc = 0;
  for (size_t g : groups) {
    features::ImportOptions io;
    io.batch_rows = o.batch_rows;
    if (sub == "prewarm") {
      io.only = &only;
      io.window = 2;
      io.before_batch = [&throttle](int64_t) { return throttle.BeforeBatch(); };
    }
    if (!ImportGroup(sub, o, op, g, std::move(io))) rc = 1;
  }
  if (sub == "prewarm") {
    fmt::print("prewarm: paused {:.1f}s, slowed {} batches\n",
               static_cast<double>(throttle.paused_ms) / 1e3, throttle.slowed);
  }
  return rc;
}

}  // namespace

int RunFeatures(CLI::App* cmd, const FeaturesCliOptions& o) {
  const std::string sub = cmd->get_subcommands().front()->get_name();
  if (sub == "stats") return RunStats(o);
  auto op = Open(o, true);
  if (!op.ok()) return Fail(op.status());
  const FeatureSpecPtr spec = op->spec;
  frontends::http::FeastHttp api(
      op->store.get(), [spec] { return std::vector<FeatureSpecPtr>{spec}; },
      [](const std::string&) { return FeatureSpecPtr(); });
  if (sub == "get") {
    StatusOr<std::string> body = GetRequestJson(o, *spec);
    if (!body.ok()) return Fail(body.status());
    return RunApi(api, false, *body);
  }
  if (sub == "put") {
    StatusOr<std::string> body = PutBody(o.json);
    if (!body.ok()) return Fail(body.status());
    return RunApi(api, true, *body);
  }
  return RunImport(sub, o, *op);
}

}  // namespace dais::cmd
