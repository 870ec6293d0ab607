#include "cmd/service_discovery.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cctype>

#include "cluster/keys.h"
#include "gateway/rollout.h"

namespace dais::cmd {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

std::string Member(const rapidjson::Value& v, const char* name) {
  return v.IsObject() && v.HasMember(name) && v[name].IsString() ? v[name].GetString() : "";
}

// A Prometheus label name: [a-zA-Z0-9_], anything else becomes '_'.
std::string LabelName(std::string name) {
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

void Group(Writer& w, const std::string& target, const char* role, const std::string& id,
           const rapidjson::Value* labels) {
  w.StartObject();
  w.Key("targets");
  w.StartArray();
  w.String(target.c_str());
  w.EndArray();
  w.Key("labels");
  w.StartObject();
  w.Key("dais_role");
  w.String(role);
  w.Key(role[0] == 'n' ? "dais_node" : "dais_gateway");
  w.String(id.c_str());
  if (labels != nullptr && labels->IsObject()) {
    for (const auto& m : labels->GetObject()) {
      if (!m.value.IsString()) continue;
      w.Key(("__meta_dais_label_" + LabelName(m.name.GetString())).c_str());
      w.String(m.value.GetString());
    }
  }
  w.EndObject();
  w.EndObject();
}

}  // namespace

StatusOr<std::string> PrometheusTargets(etcd::Client& etcd, std::string_view role) {
  if (!role.empty() && role != "node" && role != "gateway") {
    return InvalidArgument("role must be node or gateway, not '" + std::string(role) + "'");
  }
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartArray();
  if (role.empty() || role == "node") {
    ASSIGN_OR_RETURN(etcd::RangeResult nodes, etcd.Get(cluster::kNodesPrefix, /*prefix=*/true));
    for (const etcd::KeyValue& kv : nodes.kvs) {
      rapidjson::Document d;
      if (d.Parse(kv.value.c_str()).HasParseError() || !d.IsObject()) continue;
      std::string target = Member(d, "metrics");
      if (target.empty()) target = Member(d, "http");
      if (target.empty()) continue;
      const std::string id = kv.key.substr(std::string(cluster::kNodesPrefix).size());
      Group(w, target, "node", id, d.HasMember("labels") ? &d["labels"] : nullptr);
    }
  }
  if (role.empty() || role == "gateway") {
    ASSIGN_OR_RETURN(etcd::RangeResult gateways,
                     etcd.Get(gateway::kGatewaysPrefix, /*prefix=*/true));
    for (const etcd::KeyValue& kv : gateways.kvs) {
      rapidjson::Document d;
      if (d.Parse(kv.value.c_str()).HasParseError()) continue;
      const std::string target = Member(d, "http");
      if (target.empty()) continue;
      Group(w, target, "gateway", kv.key.substr(std::string(gateway::kGatewaysPrefix).size()),
            nullptr);
    }
  }
  w.EndArray();
  return std::string(sb.GetString(), sb.GetSize());
}

}  // namespace dais::cmd
