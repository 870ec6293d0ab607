#include "cluster/collection_placement.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "common/json.h"

namespace dais::cluster {
namespace {

std::string Serialize(const rapidjson::Value& v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  v.Accept(w);
  return sb.GetString();
}

Status Int(const rapidjson::Value& o, const char* key, const std::string& where, int64_t* out) {
  if (!o.HasMember(key)) return OkStatus();
  if (!o[key].IsInt64()) return InvalidArgument(where + key + ": expected an integer");
  *out = o[key].GetInt64();
  return OkStatus();
}

}  // namespace

std::string CollectionPlacement::ShardTask(int shard) const {
  return kMemoryTaskPrefix + name + ":" + std::to_string(shard);
}

DeploymentSpec CollectionPlacement::ShardDeployment(int shard) const {
  DeploymentSpec d;
  d.name = ShardTask(shard);
  d.model = d.name;  // one instance per node: the assignment key is the model
  d.version = 0;
  d.replicas = replicas;
  d.cpu_milli = cpu_milli;
  d.memory_mib = memory_mib;
  d.node_labels = node_labels;
  d.max_per_node = 1;
  return d;
}

std::string CollectionPlacement::ShardJob(int shard) const {
  return "{\"spec\":" + spec_json + ",\"shard\":" + std::to_string(shard) + "}";
}

StatusOr<CollectionPlacement> ParseCollectionPlacement(const std::string& json) {
  rapidjson::Document d;
  RETURN_IF_ERROR(json::ParseJson(json, &d));
  const rapidjson::Value& root = d;
  if (!root.IsObject() || !root.HasMember("spec") || !root["spec"].IsObject()) {
    return InvalidArgument("collection: expected {\"spec\": {...}, \"resources\": {...}}");
  }
  const rapidjson::Value& spec = root["spec"];
  CollectionPlacement c;
  c.spec_json = Serialize(spec);
  auto str = [&spec](const char* key) -> std::string {
    return spec.HasMember(key) && spec[key].IsString() ? spec[key].GetString() : "";
  };
  c.name = str("name");
  c.tenant = str("tenant");
  c.metric = str("metric");
  if (c.name.empty()) return InvalidArgument("collection: spec.name is missing");
  int64_t shards = 1, replicas = 1;
  RETURN_IF_ERROR(Int(spec, "shards", "spec.", &shards));
  RETURN_IF_ERROR(Int(spec, "replicas", "spec.", &replicas));
  if (shards < 1 || shards > 256) return InvalidArgument("collection: spec.shards: 1..256");
  if (replicas < 1 || replicas > 16) return InvalidArgument("collection: spec.replicas: 1..16");
  c.shards = static_cast<int>(shards);
  c.replicas = static_cast<int>(replicas);
  if (root.HasMember("resources")) {
    const rapidjson::Value& r = root["resources"];
    if (!r.IsObject()) return InvalidArgument("collection: resources: expected an object");
    RETURN_IF_ERROR(Int(r, "cpu_milli", "resources.", &c.cpu_milli));
    RETURN_IF_ERROR(Int(r, "memory_mib", "resources.", &c.memory_mib));
  }
  if (root.HasMember("node_labels")) {
    const rapidjson::Value& l = root["node_labels"];
    if (!l.IsObject()) return InvalidArgument("collection: node_labels: expected an object");
    for (auto it = l.MemberBegin(); it != l.MemberEnd(); ++it) {
      if (!it->value.IsString()) return InvalidArgument("collection: node_labels: strings");
      c.node_labels[it->name.GetString()] = it->value.GetString();
    }
  }
  return c;
}

std::string CollectionPlacementToJson(const CollectionPlacement& c) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("spec");
  w.RawValue(c.spec_json.data(), c.spec_json.size(), rapidjson::kObjectType);
  w.Key("resources");
  w.StartObject();
  w.Key("cpu_milli");
  w.Int64(c.cpu_milli);
  w.Key("memory_mib");
  w.Int64(c.memory_mib);
  w.EndObject();
  w.Key("node_labels");
  w.StartObject();
  for (const auto& [k, v] : c.node_labels) {
    w.Key(k.c_str());
    w.String(v.c_str());
  }
  w.EndObject();
  w.EndObject();
  return sb.GetString();
}

StatusOr<ShardJobSpec> ParseShardJob(const std::string& json) {
  rapidjson::Document d;
  RETURN_IF_ERROR(json::ParseJson(json, &d));
  const rapidjson::Value& root = d;
  if (!root.IsObject() || !root.HasMember("spec") || !root["spec"].IsObject() ||
      !root.HasMember("shard") || !root["shard"].IsInt()) {
    return InvalidArgument("assignment: 'memory' must be {\"spec\": {...}, \"shard\": N}");
  }
  return ShardJobSpec{Serialize(root["spec"]), root["shard"].GetInt()};
}

}  // namespace dais::cluster
