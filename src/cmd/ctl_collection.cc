#include "cmd/ctl_collection.h"

#include <rapidjson/document.h>
#include <yaml-cpp/yaml.h>

#include <map>

#include "cluster/keys.h"
#include "cmd/serve_memory.h"
#include "common/json.h"

namespace dais::cmd {

StatusOr<cluster::CollectionPlacement> ParseCollectionApply(const std::string& yaml) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string("collection: not YAML: ") + e.what());
  }
  if (!root.IsMap()) return InvalidArgument("collection: a mapping is needed");
  cluster::CollectionPlacement c;
  try {
    if (const YAML::Node r = root["resources"]; r) {
      if (!r.IsMap()) return InvalidArgument("resources: expected a mapping");
      for (const auto& kv : r) {
        const std::string k = kv.first.as<std::string>();
        if (k == "cpu_milli") {
          c.cpu_milli = kv.second.as<int64_t>();
        } else if (k == "memory_mib") {
          c.memory_mib = kv.second.as<int64_t>();
        } else {
          return InvalidArgument("resources." + k + ": unknown (cpu_milli, memory_mib)");
        }
      }
      root.remove("resources");
    }
    if (const YAML::Node k = root["constraints"]; k) {
      if (!k.IsMap() || (k.size() > 0 && !k["node_labels"])) {
        return InvalidArgument("constraints: expected {node_labels: {k: v}}");
      }
      for (const auto& kv : k["node_labels"]) {
        c.node_labels[kv.first.as<std::string>()] = kv.second.as<std::string>();
      }
      root.remove("constraints");
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string("collection resources / constraints: ") + e.what());
  }
  if (c.cpu_milli < 0 || c.memory_mib < 0) {
    return InvalidArgument("resources: cpu_milli and memory_mib must not be negative");
  }
  YAML::Emitter out;
  out << root;
  ASSIGN_OR_RETURN(memory::CollectionSpecPtr spec, ParseCollectionYaml(out.c_str(), "collection"));
  c.name = spec->name;
  c.tenant = spec->tenant;
  c.metric = memory::MetricName(spec->metric);
  c.shards = spec->shards;
  c.replicas = spec->replicas;
  c.spec_json = memory::CollectionSpecJson(*spec);
  return c;
}

namespace {

struct ShardState {
  std::vector<std::string> ready, loading, failed;
};

// collection -> shard -> replicas by state, from the instance states.
StatusOr<std::map<std::string, std::map<int, ShardState>>> Replicas(etcd::Client& c) {
  ASSIGN_OR_RETURN(etcd::RangeResult r, c.Get(cluster::kInstancesPrefix, /*prefix=*/true));
  std::map<std::string, std::map<int, ShardState>> out;
  for (const auto& kv : r.kvs) {
    rapidjson::Document d;
    if (!json::ParseJson(kv.value, &d).ok() || !d.IsObject()) continue;
    auto str = [&d](const char* k) -> std::string {
      return d.HasMember(k) && d[k].IsString() ? d[k].GetString() : "";
    };
    const std::string model = str("model");
    if (model.rfind(cluster::kMemoryTaskPrefix, 0) != 0) continue;
    const size_t colon = model.rfind(':');
    const std::string name = model.substr(7, colon - 7);
    const int shard = std::atoi(model.c_str() + colon + 1);
    ShardState& s = out[name][shard];
    const std::string state = str("state");
    (state == "READY" ? s.ready : state == "FAILED" ? s.failed : s.loading).push_back(str("node"));
  }
  return out;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out.empty() ? "-" : out;
}

}  // namespace

StatusOr<std::vector<std::vector<std::string>>> CollectionRows(etcd::Client& c) {
  ASSIGN_OR_RETURN(etcd::RangeResult r, c.Get(cluster::kCollectionsPrefix, /*prefix=*/true));
  ASSIGN_OR_RETURN(auto replicas, Replicas(c));
  std::vector<std::vector<std::string>> rows = {
      {"COLLECTION", "TENANT", "METRIC", "SHARD", "READY", "NODES", "LOADING/FAILED"}};
  for (const auto& kv : r.kvs) {
    auto p = cluster::ParseCollectionPlacement(kv.value);
    if (!p.ok()) continue;
    for (int s = 0; s < p->shards; ++s) {
      const ShardState& st = replicas[p->name][s];
      std::vector<std::string> other = st.loading;
      for (const auto& f : st.failed) other.push_back(f + "(failed)");
      rows.push_back({p->name, p->tenant.empty() ? "-" : p->tenant, p->metric, std::to_string(s),
                      std::to_string(st.ready.size()) + "/" + std::to_string(p->replicas),
                      Join(st.ready), Join(other)});
    }
  }
  return rows;
}

StatusOr<std::string> CollectionJson(etcd::Client& c) {
  ASSIGN_OR_RETURN(etcd::RangeResult r, c.Get(cluster::kCollectionsPrefix, /*prefix=*/true));
  ASSIGN_OR_RETURN(auto replicas, Replicas(c));
  auto list = [](const std::vector<std::string>& v) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ",\"" : "\"") + v[i] + "\"";
    return out + "]";
  };
  std::string out = "[";
  for (const auto& kv : r.kvs) {
    auto p = cluster::ParseCollectionPlacement(kv.value);
    if (!p.ok()) continue;
    if (out.size() > 1) out += ",";
    out += "{\"collection\":" + kv.value + ",\"shards\":[";
    for (int s = 0; s < p->shards; ++s) {
      const ShardState& st = replicas[p->name][s];
      out += (s ? "," : "") + std::string("{\"shard\":") + std::to_string(s) +
             ",\"ready\":" + list(st.ready) + ",\"loading\":" + list(st.loading) +
             ",\"failed\":" + list(st.failed) + "}";
    }
    out += "]}";
  }
  return out + "]";
}

}  // namespace dais::cmd
