#include "cluster/assignment.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "common/json.h"

namespace dais::cluster {

std::string Assignment::ToJson() const {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("deployment");
  w.String(deployment.c_str());
  w.Key("model");
  w.String(model.c_str());
  w.Key("version");
  w.Int64(version);
  w.Key("gpus");
  w.StartArray();
  for (int g : gpus) w.Int(g);
  w.EndArray();
  w.Key("gpu_milli");
  w.Int(gpu_milli);
  w.Key("priority");
  w.String(priority.c_str());
  if (!training.empty()) {
    w.Key("training");
    w.RawValue(training.data(), training.size(), rapidjson::kObjectType);
  }
  if (!memory.empty()) {
    w.Key("memory");
    w.RawValue(memory.data(), memory.size(), rapidjson::kObjectType);
  }
  if (!agent.empty()) {
    w.Key("agent");
    w.RawValue(agent.data(), agent.size(), rapidjson::kObjectType);
  }
  w.EndObject();
  return sb.GetString();
}

StatusOr<Assignment> AssignmentFromJson(const std::string& json) {
  rapidjson::Document d;
  RETURN_IF_ERROR(json::ParseJson(json, &d));
  if (!d.IsObject()) return InvalidArgument("assignment: not a JSON object");
  Assignment a;
  auto string = [&d](const char* key, std::string* out, bool required) -> Status {
    if (!d.HasMember(key)) {
      return required ? InvalidArgument(std::string("assignment: '") + key + "' is missing")
                      : OkStatus();
    }
    if (!d[key].IsString()) {
      return InvalidArgument(std::string("assignment: '") + key + "' must be a string");
    }
    *out = d[key].GetString();
    return OkStatus();
  };
  RETURN_IF_ERROR(string("deployment", &a.deployment, true));
  RETURN_IF_ERROR(string("model", &a.model, true));
  RETURN_IF_ERROR(string("priority", &a.priority, false));
  if (d.HasMember("version")) {
    if (!d["version"].IsInt64()) return InvalidArgument("assignment: 'version' must be an integer");
    a.version = d["version"].GetInt64();
  }
  if (d.HasMember("gpu_milli")) {
    if (!d["gpu_milli"].IsInt())
      return InvalidArgument("assignment: 'gpu_milli' must be an integer");
    a.gpu_milli = d["gpu_milli"].GetInt();
  }
  if (d.HasMember("gpus")) {
    if (!d["gpus"].IsArray()) return InvalidArgument("assignment: 'gpus' must be an array");
    for (const auto& g : d["gpus"].GetArray()) {
      if (!g.IsInt()) return InvalidArgument("assignment: 'gpus' must hold GPU indices");
      a.gpus.push_back(g.GetInt());
    }
  }
  for (auto [key, out] : {std::pair{"training", &a.training}, std::pair{"memory", &a.memory},
                          std::pair{"agent", &a.agent}}) {
    if (!d.HasMember(key)) continue;
    if (!d[key].IsObject()) {
      return InvalidArgument(std::string("assignment: '") + key + "' must be an object");
    }
    rapidjson::StringBuffer sb;
    rapidjson::Writer<rapidjson::StringBuffer> w(sb);
    d[key].Accept(w);
    *out = sb.GetString();
  }
  return a;
}

}  // namespace dais::cluster
