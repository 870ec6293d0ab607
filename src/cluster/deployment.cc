#include "cluster/deployment.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <yaml-cpp/yaml.h>

#include <limits>
#include <regex>
#include <set>

#include "cluster/spec_yaml.h"
#include "common/json.h"

namespace dais::cluster {
namespace {

Status Validate(const DeploymentSpec& d) {
  static const std::regex kName("[a-z0-9]([a-z0-9_.-]{0,61}[a-z0-9])?");
  if (!std::regex_match(d.name, kName)) {
    return InvalidArgument("name: '" + d.name +
                           "' must be 1-63 of [a-z0-9_.-], starting and "
                           "ending with a letter or digit");
  }
  if (d.model.empty()) return InvalidArgument("model: required");
  if (d.replicas < 0 || d.replicas > 10000) return InvalidArgument("replicas: 0 to 10000");
  if (d.cpu_milli < 0) return InvalidArgument("resources.cpu_milli: must not be negative");
  if (d.memory_mib < 0) return InvalidArgument("resources.memory_mib: must not be negative");
  if (d.gpus < 0 || d.gpus > 16) return InvalidArgument("resources.gpus: 0 to 16 whole GPUs");
  if (d.gpu_milli < 0 || d.gpu_milli >= 1000) {
    return InvalidArgument("resources.gpu_milli: " + std::to_string(d.gpu_milli) +
                           " must be a share of one GPU, 1 to 999 (use gpus for whole GPUs)");
  }
  if (d.gpus > 0 && d.gpu_milli > 0) {
    return InvalidArgument("resources: give gpus (whole GPUs) or gpu_milli (a share), not both");
  }
  if (!d.gpu_models.empty() && d.gpus == 0 && d.gpu_milli == 0) {
    return InvalidArgument("constraints.gpu_models: the deployment asks for no GPU");
  }
  if (d.max_per_node < -1 || d.max_per_node == 0) {
    return InvalidArgument("constraints.max_per_node: at least 1 (-1: no limit)");
  }
  if (d.priority != "latency-sensitive" && d.priority != "best-effort") {
    return InvalidArgument("priority: '" + d.priority +
                           "' is not latency-sensitive or best-effort");
  }
  if (d.may_preempt && d.priority != "latency-sensitive") {
    return InvalidArgument("may_preempt: only a latency-sensitive deployment may preempt");
  }
  return OkStatus();
}

}  // namespace

placement::TaskSpec DeploymentSpec::Task() const {
  placement::TaskSpec t;
  t.name = name;
  t.group = name;
  t.cpu_milli = cpu_milli;
  t.memory_mib = memory_mib;
  t.num_gpu = gpus > 0 ? gpus : (gpu_milli > 0 ? 1 : 0);
  t.gpu_milli = gpus > 0 ? placement::kGpuMilli : gpu_milli;
  t.gpu_models = gpu_models;
  t.max_per_node = max_per_node;
  return t;
}

StatusOr<DeploymentSpec> ParseDeploymentYaml(const std::string& yaml) {
  ASSIGN_OR_RETURN(const YAML::Node root, LoadYamlMap(yaml, "spec"));
  DeploymentSpec d;
  RETURN_IF_ERROR(Unknown(root,
                          {"name", "model", "version", "replicas", "resources", "constraints",
                           "priority", "may_preempt"},
                          ""));
  RETURN_IF_ERROR(Get(root, "name", "", &d.name));
  RETURN_IF_ERROR(Get(root, "model", "", &d.model));
  RETURN_IF_ERROR(Get(root, "version", "", &d.version));
  RETURN_IF_ERROR(Get(root, "replicas", "", &d.replicas));
  RETURN_IF_ERROR(Get(root, "priority", "", &d.priority));
  RETURN_IF_ERROR(Get(root, "may_preempt", "", &d.may_preempt));
  if (const YAML::Node r = root["resources"]; r) {
    if (!r.IsMap()) return InvalidArgument("resources: expected a mapping");
    RETURN_IF_ERROR(Unknown(r, {"cpu_milli", "memory_mib", "gpus", "gpu_milli", "gpu_memory_mib"},
                            "resources."));
    RETURN_IF_ERROR(Get(r, "cpu_milli", "resources.", &d.cpu_milli));
    RETURN_IF_ERROR(Get(r, "memory_mib", "resources.", &d.memory_mib));
    RETURN_IF_ERROR(Get(r, "gpus", "resources.", &d.gpus));
    RETURN_IF_ERROR(Get(r, "gpu_milli", "resources.", &d.gpu_milli));
    RETURN_IF_ERROR(Get(r, "gpu_memory_mib", "resources.", &d.gpu_memory_mib));
  }
  if (const YAML::Node c = root["constraints"]; c) {
    if (!c.IsMap()) return InvalidArgument("constraints: expected a mapping");
    RETURN_IF_ERROR(Unknown(c, {"gpu_models", "node_labels", "max_per_node"}, "constraints."));
    RETURN_IF_ERROR(Get(c, "gpu_models", "constraints.", &d.gpu_models));
    RETURN_IF_ERROR(Get(c, "node_labels", "constraints.", &d.node_labels));
    RETURN_IF_ERROR(Get(c, "max_per_node", "constraints.", &d.max_per_node));
  }
  RETURN_IF_ERROR(Validate(d));
  return d;
}

std::string DeploymentToJson(const DeploymentSpec& d) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  auto str = [&w](const std::string& s) {
    w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  };
  w.StartObject();
  w.Key("name");
  str(d.name);
  w.Key("model");
  str(d.model);
  w.Key("version");
  w.Int64(d.version);
  w.Key("replicas");
  w.Int(d.replicas);
  w.Key("cpu_milli");
  w.Int64(d.cpu_milli);
  w.Key("memory_mib");
  w.Int64(d.memory_mib);
  w.Key("gpus");
  w.Int(d.gpus);
  w.Key("gpu_milli");
  w.Int(d.gpu_milli);
  w.Key("gpu_memory_mib");
  w.Int64(d.gpu_memory_mib);
  w.Key("gpu_models");
  w.StartArray();
  for (const auto& m : d.gpu_models) str(m);
  w.EndArray();
  w.Key("node_labels");
  w.StartObject();
  for (const auto& [k, v] : d.node_labels) {
    str(k);
    str(v);
  }
  w.EndObject();
  w.Key("max_per_node");
  w.Int(d.max_per_node);
  w.Key("priority");
  str(d.priority);
  w.Key("may_preempt");
  w.Bool(d.may_preempt);
  w.EndObject();
  return sb.GetString();
}

// Read strictly, as ctl apply's YAML is (issue 32: a document written straight into etcd with
// `replicas: "5"` or `replicas: 4294967297` was scheduled as one replica while `ctl get` showed
// 5): a field of the wrong type, or an integer its field cannot hold, is InvalidArgument naming
// it; then the same Validate as ParseDeploymentYaml.
StatusOr<DeploymentSpec> DeploymentFromJson(const std::string& json) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::ParseJson(json, &doc));
  if (!doc.IsObject()) return InvalidArgument("deployment: not a JSON object");
  DeploymentSpec d;
  Status bad = OkStatus();
  auto s = [&](const char* k, std::string* out) {
    if (!doc.HasMember(k)) return;
    if (!doc[k].IsString()) {
      bad = InvalidArgument(std::string(k) + ": expected a string");
      return;
    }
    *out = doc[k].GetString();
  };
  auto i = [&](const char* k, auto* out) {
    using T = std::decay_t<decltype(*out)>;
    if (!doc.HasMember(k)) return;
    if (!doc[k].IsInt64() || doc[k].GetInt64() < std::numeric_limits<T>::min() ||
        doc[k].GetInt64() > std::numeric_limits<T>::max()) {
      bad = InvalidArgument(std::string(k) + ": expected an integer from " +
                            std::to_string(std::numeric_limits<T>::min()) + " to " +
                            std::to_string(std::numeric_limits<T>::max()));
      return;
    }
    *out = static_cast<T>(doc[k].GetInt64());
  };
  s("name", &d.name);
  s("model", &d.model);
  s("priority", &d.priority);
  i("version", &d.version);
  i("replicas", &d.replicas);
  i("cpu_milli", &d.cpu_milli);
  i("memory_mib", &d.memory_mib);
  i("gpus", &d.gpus);
  i("gpu_milli", &d.gpu_milli);
  i("gpu_memory_mib", &d.gpu_memory_mib);
  i("max_per_node", &d.max_per_node);
  RETURN_IF_ERROR(bad);
  if (doc.HasMember("may_preempt")) {
    if (!doc["may_preempt"].IsBool()) return InvalidArgument("may_preempt: expected true or false");
    d.may_preempt = doc["may_preempt"].GetBool();
  }
  if (doc.HasMember("gpu_models")) {
    if (!doc["gpu_models"].IsArray()) return InvalidArgument("gpu_models: expected a list");
    for (const auto& m : doc["gpu_models"].GetArray()) {
      if (!m.IsString()) return InvalidArgument("gpu_models: expected strings");
      d.gpu_models.emplace_back(m.GetString());
    }
  }
  if (doc.HasMember("node_labels")) {
    if (!doc["node_labels"].IsObject()) return InvalidArgument("node_labels: expected a mapping");
    for (const auto& m : doc["node_labels"].GetObject()) {
      if (!m.value.IsString()) return InvalidArgument("node_labels: expected string values");
      d.node_labels[m.name.GetString()] = m.value.GetString();
    }
  }
  RETURN_IF_ERROR(Validate(d));
  return d;
}

}  // namespace dais::cluster
