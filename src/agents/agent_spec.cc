#include "agents/agent_spec.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <regex>
#include <set>

#include "agents/template.h"
#include "cluster/spec_yaml.h"
#include "common/duration.h"
#include "common/json.h"

namespace dais::agents {
namespace {

using cluster::Get;
using cluster::Unknown;
using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

constexpr StepKind kKinds[] = {StepKind::kFeatures,     StepKind::kInfer, StepKind::kMemorySearch,
                               StepKind::kMemoryUpsert, StepKind::kEmit,  StepKind::kBranch,
                               StepKind::kTxn};

void Str(Writer& w, const std::string& s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

// A YAML node as JSON: plain scalars that read as numbers, booleans or null become those; quoted
// scalars stay strings.
void YamlToJson(const YAML::Node& n, Writer& w) {
  if (n.IsMap()) {
    w.StartObject();
    for (const auto& kv : n) {
      Str(w, kv.first.as<std::string>());
      YamlToJson(kv.second, w);
    }
    w.EndObject();
  } else if (n.IsSequence()) {
    w.StartArray();
    for (const auto& item : n) YamlToJson(item, w);
    w.EndArray();
  } else if (n.IsNull()) {
    w.Null();
  } else {
    const std::string& s = n.Scalar();
    if (n.Tag() != "!") {  // plain
      if (s == "true" || s == "false") {
        w.Bool(s == "true");
        return;
      }
      if (s == "null" || s == "~") {
        w.Null();
        return;
      }
      // Decimal only (no hex, no overflow to the largest value), as JSON reads numbers.
      const char* end = s.data() + s.size();
      int64_t i = 0;
      if (auto [p, ec] = std::from_chars(s.data(), end, i); ec == std::errc() && p == end) {
        w.Int64(i);
        return;
      }
      double d = 0;
      if (auto [p, ec] = std::from_chars(s.data(), end, d, std::chars_format::general);
          ec == std::errc() && p == end && std::isfinite(d)) {
        w.Double(d);
        return;
      }
    }
    Str(w, s);
  }
}

std::string ToJson(const YAML::Node& n) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  YamlToJson(n, w);
  return sb.GetString();
}

Status NeedList(const YAML::Node& map, const std::string& key, const std::string& at,
                std::vector<std::string>* out) {
  RETURN_IF_ERROR(Get(map, key, at, out));
  for (const std::string& s : *out) {
    if (s.empty()) return InvalidArgument(at + key + ": an empty name");
  }
  return OkStatus();
}

bool Has(const std::vector<std::string>& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

// Every reference in a step's body names the event, the run, or an earlier step.
Status CheckReferences(const rapidjson::Value& v, const std::set<std::string>& known,
                       const std::string& at) {
  if (v.IsString()) {
    ASSIGN_OR_RETURN(std::vector<std::string> refs,
                     References(std::string_view(v.GetString(), v.GetStringLength())));
    for (const std::string& r : refs) {
      const std::string root = r.substr(0, r.find('.'));
      if (!known.count(root)) {
        return InvalidArgument(at + ": ${" + r + "} names no earlier step (known: event, run" +
                               std::string(known.size() > 2 ? ", the steps before" : "") + ")");
      }
    }
  } else if (v.IsArray()) {
    for (const auto& item : v.GetArray()) RETURN_IF_ERROR(CheckReferences(item, known, at));
  } else if (v.IsObject()) {
    for (const auto& m : v.GetObject()) RETURN_IF_ERROR(CheckReferences(m.value, known, at));
  }
  return OkStatus();
}

std::string StringMember(const rapidjson::Value& v, const char* key) {
  auto it = v.FindMember(key);
  return it != v.MemberEnd() && it->value.IsString() ? it->value.GetString() : "";
}

// The fields each kind needs, and what it names (for the capability check).
Status ParseStepBody(StepSpec* s, const rapidjson::Value& b, const AgentSpec& agent,
                     const std::string& at) {
  const Capabilities& caps = agent.capabilities;
  auto need = [&](const char* key, const char* what) -> Status {
    if (!b.HasMember(key)) return InvalidArgument(at + "." + key + ": required (" + what + ")");
    return OkStatus();
  };
  auto known = [&](std::set<std::string> keys) -> Status {
    for (const auto& m : b.GetObject()) {
      if (!keys.count(m.name.GetString())) {
        std::string list;
        for (const auto& k : keys) list += (list.empty() ? "" : ", ") + k;
        return InvalidArgument(at + "." + m.name.GetString() + ": unknown field (known: " + list +
                               ")");
      }
    }
    return OkStatus();
  };
  auto capable = [&](const std::vector<std::string>& list, const std::string& name,
                     const char* field, const char* cap) -> Status {
    if (!Has(list, name)) {
      return InvalidArgument(at + "." + field + ": '" + name + "' is not in capabilities." + cap);
    }
    return OkStatus();
  };
  switch (s->kind) {
    case StepKind::kFeatures: {
      RETURN_IF_ERROR(known({"features", "entities"}));
      RETURN_IF_ERROR(need("features", "a list of group:feature"));
      RETURN_IF_ERROR(need("entities", "{entity: id}"));
      if (!b["features"].IsArray() || b["features"].Empty()) {
        return InvalidArgument(at + ".features: expected a list of group:feature");
      }
      if (!b["entities"].IsObject() || b["entities"].ObjectEmpty()) {
        return InvalidArgument(at + ".entities: expected a mapping of entity to id");
      }
      for (const auto& f : b["features"].GetArray()) {
        const std::string name = f.IsString() ? f.GetString() : "";
        const size_t colon = name.find(':');
        if (colon == std::string::npos || colon == 0 || colon + 1 == name.size()) {
          return InvalidArgument(at + ".features: '" + name + "' is not group:feature");
        }
        const std::string group = name.substr(0, colon);
        RETURN_IF_ERROR(capable(caps.feature_groups, group, "features", "feature_groups"));
        if (!Has(s->feature_groups, group)) s->feature_groups.push_back(group);
      }
      return OkStatus();
    }
    case StepKind::kInfer:
      RETURN_IF_ERROR(known({"route", "inputs", "outputs", "parameters"}));
      RETURN_IF_ERROR(need("route", "the gateway route to call"));
      RETURN_IF_ERROR(need("inputs", "the request's tensors"));
      s->route = StringMember(b, "route");
      if (s->route.empty()) return InvalidArgument(at + ".route: expected a route name");
      if (!b["inputs"].IsArray() || b["inputs"].Empty()) {
        return InvalidArgument(at + ".inputs: expected a list of tensors");
      }
      for (const auto& in : b["inputs"].GetArray()) {
        if (!in.IsObject() || StringMember(in, "name").empty() ||
            StringMember(in, "datatype").empty() || !in.HasMember("shape") ||
            !in.HasMember("data")) {
          return InvalidArgument(at + ".inputs: each needs name, datatype, shape and data");
        }
      }
      return capable(caps.routes, s->route, "route", "routes");
    case StepKind::kMemorySearch:
    case StepKind::kMemoryUpsert:
      s->collection = StringMember(b, "collection");
      if (s->collection.empty()) return InvalidArgument(at + ".collection: required");
      if (s->kind == StepKind::kMemorySearch) {
        RETURN_IF_ERROR(known({"collection", "vector", "k", "filter", "min_score"}));
        RETURN_IF_ERROR(need("vector", "the query, a list of numbers or a reference to one"));
        if (b.HasMember("k") &&
            (!b["k"].IsInt64() || b["k"].GetInt64() < 1 || b["k"].GetInt64() > 10000)) {
          return InvalidArgument(at + ".k: 1 to 10000");
        }
      } else {
        RETURN_IF_ERROR(known({"collection", "points"}));
        RETURN_IF_ERROR(need("points", "[{id, vector, payload}]"));
      }
      return capable(caps.collections, s->collection, "collection", "collections");
    case StepKind::kEmit:
      RETURN_IF_ERROR(known({"stream", "fields"}));
      s->stream = StringMember(b, "stream");
      if (s->stream.empty()) return InvalidArgument(at + ".stream: required");
      if (!b.HasMember("fields") || !b["fields"].IsObject() || b["fields"].ObjectEmpty()) {
        return InvalidArgument(at + ".fields: expected a mapping of field to value");
      }
      return capable(caps.streams, s->stream, "stream", "streams");
    case StepKind::kTxn:
      RETURN_IF_ERROR(known({"type", "params"}));
      s->txn_type = StringMember(b, "type");
      if (s->txn_type.empty()) {
        return InvalidArgument(at + ".type: required (a transaction type of dais txn)");
      }
      if (!b.HasMember("params") || !b["params"].IsObject()) {
        return InvalidArgument(at + ".params: expected a mapping (the transaction's parameters)");
      }
      return capable(caps.transactions, s->txn_type, "type", "transactions");
    case StepKind::kBranch:
      RETURN_IF_ERROR(known({"if"}));
      if (StringMember(b, "if").empty()) {
        return InvalidArgument(at + ".if: required (a condition such as \"${a.b} > 3\")");
      }
      return OkStatus();
  }
  return OkStatus();
}

Status ParseSteps(const YAML::Node& steps, AgentSpec* a) {
  if (!steps.IsSequence() || steps.size() == 0) {
    return InvalidArgument("steps: expected a list of at least one step");
  }
  std::set<std::string> known = {"event", "run"};
  for (size_t i = 0; i < steps.size(); ++i) {
    const YAML::Node n = steps[i];
    std::string at = "steps[" + std::to_string(i) + "]";
    if (!n.IsMap()) return InvalidArgument(at + ": expected a mapping");
    StepSpec s;
    RETURN_IF_ERROR(Get(n, "name", at + ".", &s.name));
    static const std::regex kStepName("[a-z_][a-z0-9_]{0,62}");
    if (!std::regex_match(s.name, kStepName)) {
      return InvalidArgument(at + ".name: '" + s.name +
                             "' must be 1-63 of [a-z0-9_], not starting with a digit (it is "
                             "referenced as ${NAME.field})");
    }
    at += " (" + s.name + ")";
    if (known.count(s.name)) {
      return InvalidArgument(at + ".name: '" + s.name + "' is taken (event, run, or a step)");
    }
    int kinds = 0;
    YAML::Node body;
    for (StepKind k : kKinds) {
      if (n[StepKindName(k)]) {
        ++kinds;
        s.kind = k;
        body = n[StepKindName(k)];
      }
    }
    if (kinds != 1) {
      return InvalidArgument(at +
                             ": give exactly one of features, infer, memory_search, "
                             "memory_upsert, emit, branch, txn");
    }
    RETURN_IF_ERROR(Unknown(n, {"name", StepKindName(s.kind)}, at + "."));
    if (!body.IsMap()) return InvalidArgument(at + "." + StepKindName(s.kind) + ": a mapping");
    s.body = ToJson(body);
    rapidjson::Document doc;
    RETURN_IF_ERROR(json::ParseJson(s.body, &doc));
    at += std::string(".") + StepKindName(s.kind);
    RETURN_IF_ERROR(ParseStepBody(&s, doc, *a, at));
    RETURN_IF_ERROR(CheckReferences(doc, known, at));
    known.insert(s.name);
    a->steps.push_back(std::move(s));
  }
  return OkStatus();
}

// "host:port" of redis://HOST:PORT/STREAM (or rediss://), or "" when it is not one.
std::string StreamHost(const std::string& url) {
  for (const std::string scheme : {"redis://", "rediss://"}) {
    if (url.rfind(scheme, 0) == 0) {
      const std::string rest = url.substr(scheme.size());
      const size_t slash = rest.find('/');
      return slash == std::string::npos || slash == 0 ? "" : rest.substr(0, slash);
    }
  }
  return "";
}

Status Validate(const AgentSpec& a) {
  static const std::regex kName("[a-z0-9]([a-z0-9_.-]{0,61}[a-z0-9])?");
  if (!std::regex_match(a.name, kName)) {
    return InvalidArgument("name: '" + a.name +
                           "' must be 1-63 of [a-z0-9_.-], starting and ending with a letter or "
                           "digit");
  }
  if (a.tenant.empty()) return InvalidArgument("tenant: required (the agent's owner)");
  // A gateway tenant's name (gateway/tenant.cc); also a file name under dais node --agent-tokens.
  static const std::regex kTenant("[A-Za-z0-9]([A-Za-z0-9_.@-]{0,126}[A-Za-z0-9])?");
  if (!std::regex_match(a.tenant, kTenant)) {
    return InvalidArgument("tenant: '" + a.tenant +
                           "' is not a tenant name (1-128 of [A-Za-z0-9_.@-], starting and "
                           "ending with a letter or digit)");
  }
  if (a.priority != "high" && a.priority != "normal" && a.priority != "low") {
    return InvalidArgument("priority: '" + a.priority + "' is not high, normal or low");
  }
  if (!(a.sla_p99_ms >= 0) || !(a.sla_runs_per_second >= 0)) {
    return InvalidArgument("sla: p99_ms and runs_per_second must not be negative");
  }
  if (a.sla_window_ms < 100 || a.sla_window_ms > 3600000) {
    return InvalidArgument("sla.window: 100ms to 1h");
  }
  if (a.cpu_milli < 0 || a.memory_mib < 0) {
    return InvalidArgument("resources: cpu_milli and memory_mib must not be negative");
  }
  const bool stream = !a.trigger_stream.empty();
  if (stream && a.trigger_every_ms > 0) {
    return InvalidArgument(
        "trigger: give one of stream (redis://HOST:PORT/STREAM) and every (a duration), not both");
  }
  if (!stream && a.trigger_every_ms <= 0 && !a.trigger_http) {
    return InvalidArgument(
        "trigger: give stream (redis://HOST:PORT/STREAM), every (a duration) or http: true");
  }
  if (!stream && a.redis.empty()) {
    return InvalidArgument(std::string("redis: required with trigger.") +
                           (a.trigger_every_ms > 0 ? "every" : "http") +
                           " (HOST:PORT: where the runs, the emits and the timer's markers go)");
  }
  if (stream && (StreamHost(a.trigger_stream).empty() || a.TriggerStreamName().empty())) {
    return InvalidArgument("trigger.stream: '" + a.trigger_stream +
                           "' is not redis://HOST:PORT/STREAM");
  }
  if (a.concurrency < 1 || a.concurrency > 256) return InvalidArgument("concurrency: 1 to 256");
  if (a.max_attempts < 1 || a.max_attempts > 100) {
    return InvalidArgument("max_attempts: 1 to 100");
  }
  if (a.run_timeout_ms <= 0 || a.run_timeout_ms > 3600000) {
    return InvalidArgument("run_timeout: more than 0, at most 1h");
  }
  return OkStatus();
}

Status GetDurationMs(const YAML::Node& map, const std::string& key, const std::string& at,
                     int64_t* out) {
  const YAML::Node v = map[key];
  if (!v) return OkStatus();
  if (!v.IsScalar()) return InvalidArgument(at + key + ": expected a duration such as 5s");
  auto us = ParseDurationUs(v.Scalar());
  if (!us.ok()) return InvalidArgument(at + key + ": " + us.status().message());
  *out = *us / 1000;
  return OkStatus();
}

}  // namespace

const char* StepKindName(StepKind kind) {
  switch (kind) {
    case StepKind::kFeatures:
      return "features";
    case StepKind::kInfer:
      return "infer";
    case StepKind::kMemorySearch:
      return "memory_search";
    case StepKind::kMemoryUpsert:
      return "memory_upsert";
    case StepKind::kEmit:
      return "emit";
    case StepKind::kBranch:
      return "branch";
    case StepKind::kTxn:
      return "txn";
  }
  return "?";
}

std::string AgentSpec::RedisAddress() const {
  return redis.empty() ? StreamHost(trigger_stream) : redis;
}

std::string AgentSpec::TriggerStreamName() const {
  const size_t scheme = trigger_stream.find("://");
  if (scheme == std::string::npos) return "";
  const size_t slash = trigger_stream.find('/', scheme + 3);
  return slash == std::string::npos ? "" : trigger_stream.substr(slash + 1);
}

int AgentSpec::PriorityRank() const {
  return priority == "high" ? 0 : priority == "normal" ? 1 : 2;
}

namespace {
StatusOr<AgentSpec> ParseAgent(const YAML::Node& root);
}  // namespace

StatusOr<AgentSpec> ParseAgentYaml(const std::string& yaml) {
  ASSIGN_OR_RETURN(const YAML::Node root, cluster::LoadYamlMap(yaml, "agent spec"));
  return ParseAgentNode(root);
}

StatusOr<AgentSpec> ParseAgentNode(const YAML::Node& root) {
  if (!root.IsMap()) return InvalidArgument("the agent spec must be a YAML mapping");
  try {
    return ParseAgent(root);
  } catch (const YAML::Exception& e) {  // e.g. a key that is itself a list or a mapping
    return InvalidArgument(std::string("not an agent spec: ") + e.what());
  }
}

namespace {

StatusOr<AgentSpec> ParseAgent(const YAML::Node& root) {
  RETURN_IF_ERROR(
      Unknown(root,
              {"kind", "name", "tenant", "priority", "sla", "resources", "trigger", "redis",
               "max_attempts", "concurrency", "run_timeout", "capabilities", "steps"},
              ""));
  AgentSpec a;
  RETURN_IF_ERROR(Get(root, "name", "", &a.name));
  RETURN_IF_ERROR(Get(root, "tenant", "", &a.tenant));
  RETURN_IF_ERROR(Get(root, "redis", "", &a.redis));
  RETURN_IF_ERROR(Get(root, "priority", "", &a.priority));
  RETURN_IF_ERROR(Get(root, "max_attempts", "", &a.max_attempts));
  RETURN_IF_ERROR(Get(root, "concurrency", "", &a.concurrency));
  RETURN_IF_ERROR(GetDurationMs(root, "run_timeout", "", &a.run_timeout_ms));
  if (const YAML::Node s = root["sla"]; s) {
    if (!s.IsMap()) return InvalidArgument("sla: expected a mapping");
    RETURN_IF_ERROR(Unknown(s, {"p99_ms", "runs_per_second", "window"}, "sla."));
    RETURN_IF_ERROR(GetDurationMs(s, "window", "sla.", &a.sla_window_ms));
    RETURN_IF_ERROR(Get(s, "p99_ms", "sla.", &a.sla_p99_ms));
    RETURN_IF_ERROR(Get(s, "runs_per_second", "sla.", &a.sla_runs_per_second));
  }
  if (const YAML::Node r = root["resources"]; r) {
    if (!r.IsMap()) return InvalidArgument("resources: expected a mapping");
    RETURN_IF_ERROR(Unknown(r, {"cpu_milli", "memory_mib"}, "resources."));
    RETURN_IF_ERROR(Get(r, "cpu_milli", "resources.", &a.cpu_milli));
    RETURN_IF_ERROR(Get(r, "memory_mib", "resources.", &a.memory_mib));
  }
  const YAML::Node t = root["trigger"];
  if (!t || !t.IsMap()) return InvalidArgument("trigger: required (a mapping: stream or every)");
  RETURN_IF_ERROR(Unknown(t, {"stream", "every", "http", "group"}, "trigger."));
  RETURN_IF_ERROR(Get(t, "http", "trigger.", &a.trigger_http));
  RETURN_IF_ERROR(Get(t, "stream", "trigger.", &a.trigger_stream));
  RETURN_IF_ERROR(GetDurationMs(t, "every", "trigger.", &a.trigger_every_ms));
  RETURN_IF_ERROR(Get(t, "group", "trigger.", &a.group));
  if (const YAML::Node c = root["capabilities"]; c) {
    if (!c.IsMap()) return InvalidArgument("capabilities: expected a mapping");
    RETURN_IF_ERROR(Unknown(c,
                            {"routes", "feature_groups", "collections", "streams", "transactions"},
                            "capabilities."));
    RETURN_IF_ERROR(NeedList(c, "routes", "capabilities.", &a.capabilities.routes));
    RETURN_IF_ERROR(NeedList(c, "feature_groups", "capabilities.", &a.capabilities.feature_groups));
    RETURN_IF_ERROR(NeedList(c, "collections", "capabilities.", &a.capabilities.collections));
    RETURN_IF_ERROR(NeedList(c, "streams", "capabilities.", &a.capabilities.streams));
    RETURN_IF_ERROR(NeedList(c, "transactions", "capabilities.", &a.capabilities.transactions));
  }
  RETURN_IF_ERROR(Validate(a));
  if (a.group.empty()) a.group = a.name;
  const YAML::Node steps = root["steps"];
  if (!steps) return InvalidArgument("steps: required");
  RETURN_IF_ERROR(ParseSteps(steps, &a));
  return a;
}

}  // namespace

std::string AgentToJson(const AgentSpec& a) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  auto list = [&](const char* key, const std::vector<std::string>& items) {
    w.Key(key);
    w.StartArray();
    for (const auto& s : items) Str(w, s);
    w.EndArray();
  };
  w.StartObject();
  w.Key("kind");
  w.String("agent");
  w.Key("name");
  Str(w, a.name);
  w.Key("tenant");
  Str(w, a.tenant);
  w.Key("priority");
  Str(w, a.priority);
  w.Key("sla");
  w.StartObject();
  w.Key("p99_ms");
  w.Double(a.sla_p99_ms);
  w.Key("runs_per_second");
  w.Double(a.sla_runs_per_second);
  w.Key("window");
  Str(w, std::to_string(a.sla_window_ms) + "ms");
  w.EndObject();
  w.Key("resources");
  w.StartObject();
  w.Key("cpu_milli");
  w.Int64(a.cpu_milli);
  w.Key("memory_mib");
  w.Int64(a.memory_mib);
  w.EndObject();
  w.Key("trigger");
  w.StartObject();
  if (!a.trigger_stream.empty()) {
    w.Key("stream");
    Str(w, a.trigger_stream);
  } else if (a.trigger_every_ms > 0) {
    w.Key("every");
    Str(w, std::to_string(a.trigger_every_ms) + "ms");
  }
  if (a.trigger_http) {
    w.Key("http");
    w.Bool(true);
  }
  w.Key("group");
  Str(w, a.group);
  w.EndObject();
  if (!a.redis.empty()) {
    w.Key("redis");
    Str(w, a.redis);
  }
  w.Key("max_attempts");
  w.Int(a.max_attempts);
  w.Key("concurrency");
  w.Int(a.concurrency);
  w.Key("run_timeout");
  Str(w, std::to_string(a.run_timeout_ms) + "ms");
  w.Key("capabilities");
  w.StartObject();
  list("routes", a.capabilities.routes);
  list("feature_groups", a.capabilities.feature_groups);
  list("collections", a.capabilities.collections);
  list("streams", a.capabilities.streams);
  list("transactions", a.capabilities.transactions);
  w.EndObject();
  w.Key("steps");
  w.StartArray();
  for (const StepSpec& s : a.steps) {
    w.StartObject();
    w.Key("name");
    Str(w, s.name);
    w.Key(StepKindName(s.kind));
    w.RawValue(s.body.data(), s.body.size(), rapidjson::kObjectType);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return sb.GetString();
}

}  // namespace dais::agents
