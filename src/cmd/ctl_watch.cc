#include "cmd/ctl_watch.h"

#include <rapidjson/document.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <ctime>

#include "cluster/events.h"
#include "cluster/keys.h"
#include "common/json.h"
#include "common/mutex.h"
#include "etcd/watch.h"
#include "fmt/format.h"

namespace dais::cmd {
namespace {

std::string Now() {
  return cluster::FormatTimeMs(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

std::string Field(const rapidjson::Value& v, const char* key) {
  if (!v.IsObject() || !v.HasMember(key)) return "";
  if (v[key].IsString()) return v[key].GetString();
  if (v[key].IsInt64()) return std::to_string(v[key].GetInt64());
  return "";
}

// "n1/mlp_small  version 1  READY  gpus 0" of an instance's JSON.
std::string InstanceLine(const std::string& json) {
  rapidjson::Document d;
  if (!json::ParseJson(json, &d).ok() || !d.IsObject()) return json;
  std::string line =
      fmt::format("{}/{}  version {}  {}", Field(d, "node"), Field(d, "model"),
                  Field(d, "version").empty() ? "-" : Field(d, "version"), Field(d, "state"));
  if (d.HasMember("gpus") && d["gpus"].IsArray() && !d["gpus"].Empty()) {
    line += "  gpus";
    for (const auto& g : d["gpus"].GetArray())
      line += g.IsInt() ? " " + std::to_string(g.GetInt()) : "";
  }
  if (!Field(d, "reason").empty()) line += "  (" + Field(d, "reason") + ")";
  return line;
}

}  // namespace

int WatchCluster(etcd::Client& client, double for_seconds) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before the watch threads start: they inherit it
  Mutex out_mu;
  auto print = [&out_mu](const std::string& line) {
    MutexLock l(&out_mu);
    fmt::print("{}\n", line);
    std::fflush(stdout);
  };
  const std::string instances_prefix = cluster::kInstancesPrefix;
  etcd::Watcher::Callbacks instances;
  instances.on_snapshot = [&print](const etcd::RangeResult& r) {
    print(fmt::format("{}  {} instance(s) at revision {}", Now(), r.kvs.size(), r.revision));
    for (const auto& kv : r.kvs) print("  " + InstanceLine(kv.value));
  };
  instances.on_events = [&print, &instances_prefix](const std::vector<etcd::Event>& events) {
    for (const etcd::Event& e : events) {
      if (e.type == etcd::Event::Type::kPut) {
        print(Now() + "  " + InstanceLine(e.kv.value));
      } else {
        print(Now() + "  " + e.kv.key.substr(instances_prefix.size()) + "  gone");
      }
    }
  };
  etcd::Watcher::Callbacks events;
  events.on_snapshot = [](const etcd::RangeResult&) {};  // `dais ctl get events` lists the past
  events.on_events = [&print](const std::vector<etcd::Event>& changes) {
    for (const etcd::Event& e : changes) {
      if (e.type != etcd::Event::Type::kPut) continue;  // expiry
      auto ev = cluster::ClusterEventFromJson(e.kv.value);
      if (!ev.ok()) continue;
      print(fmt::format("{}  event {} {}{}: {}", cluster::FormatTimeMs(ev->time_ms), ev->kind,
                        ev->deployment, ev->node.empty() ? "" : " on " + ev->node, ev->message));
    }
  };
  etcd::Watcher watch_instances(&client, instances_prefix, std::move(instances));
  etcd::Watcher watch_events(&client, cluster::kEventsPrefix, std::move(events));
  if (for_seconds > 0) {
    const auto secs = static_cast<time_t>(for_seconds);
    timespec timeout{secs, static_cast<long>((for_seconds - static_cast<double>(secs)) * 1e9)};
    (void)sigtimedwait(&stop, nullptr, &timeout);
  } else {
    int sig = 0;
    sigwait(&stop, &sig);
  }
  return 0;
}

}  // namespace dais::cmd
