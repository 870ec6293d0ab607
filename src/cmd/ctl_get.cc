#include "cmd/ctl_get.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <vector>

#include "agents/agent_spec.h"
#include "cluster/deployment.h"
#include "cluster/events.h"
#include "cluster/keys.h"
#include "cmd/cli_habits.h"
#include "cmd/ctl_agent.h"
#include "cmd/ctl_collection.h"
#include "cmd/ctl_training.h"
#include "common/json.h"
#include "fmt/format.h"
#include "gateway/route.h"
#include "gateway/tenant.h"

namespace dais::cmd {
namespace {

std::string Str(const rapidjson::Value& v, const char* key) {
  if (!v.IsObject() || !v.HasMember(key)) return "";
  const auto& f = v[key];
  if (f.IsString()) return f.GetString();
  if (f.IsInt64()) return std::to_string(f.GetInt64());
  if (f.IsBool()) return f.GetBool() ? "true" : "false";
  return "";
}

// "0,1" of an object's "gpus" array of indices.
std::string Gpus(const rapidjson::Value& v) {
  std::string out;
  if (!v.IsObject() || !v.HasMember("gpus") || !v["gpus"].IsArray()) return out;
  for (const auto& g : v["gpus"].GetArray()) {
    if (g.IsInt()) out += (out.empty() ? "" : ",") + std::to_string(g.GetInt());
  }
  return out;
}

// Prints rows as an aligned table.
void Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    width.resize(std::max(width.size(), r.size()));
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i] + (i + 1 < r.size() ? std::string(width[i] - r[i].size() + 2, ' ') : "");
    }
    fmt::print("{}\n", line);
  }
}

// Why the scheduler refuses a stored deployment (written around `ctl apply`), or empty.
std::string InvalidDeployment(const rapidjson::Document& d) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  d.Accept(w);
  auto parsed = cluster::DeploymentFromJson(sb.GetString());
  return parsed.ok() ? "" : parsed.status().message();
}

// One table row of a stored value (`rest`: its key after the prefix).
std::vector<std::string> Row(const std::string& what, const rapidjson::Document& d,
                             const std::string& rest, std::map<std::string, std::string>& status) {
  if (what == "nodes") {
    std::string gpus, labels;
    if (d.HasMember("gpus") && d["gpus"].IsArray()) {
      for (const auto& g : d["gpus"].GetArray())
        gpus += (gpus.empty() ? "" : ",") + Str(g, "model");
    }
    if (d.HasMember("labels") && d["labels"].IsObject()) {
      for (const auto& l : d["labels"].GetObject()) {
        labels += (labels.empty() ? "" : ",") + std::string(l.name.GetString()) + "=" +
                  (l.value.IsString() ? l.value.GetString() : "");
      }
    }
    const std::string node = Str(d, "node");
    return {node,
            Str(d, "cpu_milli"),
            Str(d, "memory_mib"),
            gpus,
            labels,
            Str(d, "http"),
            status.count(node) ? status[node] + "ed" : "enabled"};
  }
  if (what == "deployments") {
    rapidjson::Document s;
    const std::string name = Str(d, "name");
    const bool has = status.count(name) && json::ParseJson(status[name], &s).ok();
    // VERSION: the spec's, or the one resolved from the nodes' repositories ("2 (latest)").
    std::string version = Str(d, "version");
    if (version.empty() || version == "-1") {
      version =
          has && s.HasMember("version") && s["version"].IsInt64() && s["version"].GetInt64() >= 0
              ? std::to_string(s["version"].GetInt64()) + " (latest)"
              : "latest";
    }
    return {name,
            Str(d, "model"),
            version,
            Str(d, "replicas"),
            has ? std::to_string(s["assigned"].GetInt()) : "?",
            has ? std::to_string(s["pending"].GetInt()) : "?",
            InvalidDeployment(d).empty() ? (has ? Str(s, "reason") : "")
                                         : "invalid, not scheduled: " + InvalidDeployment(d)};
  }
  if (what == "instances") {
    return {Str(d, "node"),  Str(d, "model"), Str(d, "version"),
            Str(d, "state"), Gpus(d),         Str(d, "reason")};
  }
  if (what == "routes") {
    std::string split;
    if (d.HasMember("versions") && d["versions"].IsArray()) {
      for (const auto& v : d["versions"].GetArray()) {
        split += (split.empty() ? "" : ",") + Str(v, "version") + ":" + Str(v, "weight") + "%";
      }
    }
    const size_t rules = d.HasMember("match") && d["match"].IsArray() ? d["match"].Size() : 0;
    return {Str(d, "name"),   Str(d, "model"),         split,
            Str(d, "stable"), Str(d, "sticky_header"), std::to_string(rules)};
  }
  if (what == "tenants") {
    std::string models;
    if (d.HasMember("models") && d["models"].IsArray()) {
      for (const auto& m : d["models"].GetArray()) {
        if (m.IsString()) models += (models.empty() ? "" : ",") + std::string(m.GetString());
      }
    }
    auto num = [&d](const char* k) {
      return d.HasMember(k) && d[k].IsNumber() ? fmt::format("{:g}", d[k].GetDouble()) : "";
    };
    // No rate (0 or absent) is no limit: the bucket's burst means nothing then.
    const bool limited = d.HasMember("requests_per_second") &&
                         d["requests_per_second"].IsNumber() &&
                         d["requests_per_second"].GetDouble() > 0;
    return {Str(d, "name"), models.empty() ? "(all)" : models,
            limited ? num("requests_per_second") : "unlimited", limited ? num("burst") : "-"};
  }
  if (what == "agents") {
    const rapidjson::Value* t =
        d.HasMember("trigger") && d["trigger"].IsObject() ? &d["trigger"] : nullptr;
    std::string trigger = t == nullptr             ? ""
                          : t->HasMember("stream") ? Str(*t, "stream")
                          : t->HasMember("every")  ? "every " + Str(*t, "every")
                                                   : "";
    if (t != nullptr && t->HasMember("http") && (*t)["http"].IsTrue()) {
      trigger += trigger.empty() ? "http" : "+http";
    }
    const size_t steps = d.HasMember("steps") && d["steps"].IsArray() ? d["steps"].Size() : 0;
    const std::string p99 = d.HasMember("sla") && d["sla"].IsObject() &&
                                    d["sla"].HasMember("p99_ms") && d["sla"]["p99_ms"].IsNumber()
                                ? fmt::format("{:g}", d["sla"]["p99_ms"].GetDouble())
                                : "";
    return {Str(d, "name"), Str(d, "tenant"),      Str(d, "priority"),
            trigger,        std::to_string(steps), p99};
  }
  if (what == "events") {
    const int64_t ms =
        d.HasMember("time_ms") && d["time_ms"].IsInt64() ? d["time_ms"].GetInt64() : 0;
    return {cluster::FormatTimeMs(ms), Str(d, "kind"), Str(d, "deployment"), Str(d, "node"),
            Str(d, "message")};
  }
  const std::string version = Str(d, "version");  // assignments
  return {rest.substr(0, rest.find('/')), Str(d, "model"), Str(d, "deployment"),
          version == "-1" ? "latest" : version, Gpus(d)};
}

// The extra columns of -o wide.
std::vector<std::string> WideColumns(const std::string& what, const rapidjson::Document& d,
                                     const std::string& status_json) {
  if (what == "nodes") {
    const size_t models =
        d.HasMember("versions") && d["versions"].IsObject() ? d["versions"].MemberCount() : 0;
    return {Str(d, "grpc"), Str(d, "metrics"), std::to_string(models)};
  }
  if (what == "deployments") {
    rapidjson::Document s;
    const bool has = !status_json.empty() && json::ParseJson(status_json, &s).ok();
    return {Str(d, "priority"), has ? Str(s, "version_source") : ""};
  }
  if (what == "assignments") return {Str(d, "priority"), Str(d, "gpu_milli")};
  return {};
}

const std::map<std::string, std::vector<std::string>>& Headers() {
  static const std::map<std::string, std::vector<std::string>> kHeader = {
      {"nodes", {"NODE", "CPU", "MEMORY_MIB", "GPUS", "LABELS", "HTTP", "SCHEDULING"}},
      {"deployments",
       {"DEPLOYMENT", "MODEL", "VERSION", "REPLICAS", "ASSIGNED", "PENDING", "REASON"}},
      {"instances", {"NODE", "MODEL", "VERSION", "STATE", "GPUS", "REASON"}},
      {"assignments", {"NODE", "MODEL", "DEPLOYMENT", "VERSION", "GPUS"}},
      {"events", {"TIME (UTC)", "KIND", "DEPLOYMENT", "NODE", "MESSAGE"}},
      {"routes", {"ROUTE", "MODEL", "VERSIONS", "STABLE", "STICKY", "RULES"}},
      {"tenants", {"TENANT", "MODELS", "REQUESTS/S", "BURST"}},
      {"agents", {"AGENT", "TENANT", "PRIORITY", "TRIGGER", "STEPS", "SLA_P99_MS"}}};
  return kHeader;
}

const std::map<std::string, std::vector<std::string>>& WideHeaders() {
  static const std::map<std::string, std::vector<std::string>> kWide = {
      {"nodes", {"GRPC", "METRICS", "MODELS"}},
      {"deployments", {"PRIORITY", "VERSION_SOURCE"}},
      {"assignments", {"PRIORITY", "GPU_MILLI"}}};
  return kWide;
}

const std::map<std::string, std::string>& Prefixes() {
  static const std::map<std::string, std::string> kPrefix = {
      {"nodes", cluster::kNodesPrefix},         {"deployments", "/dais/deployments/"},
      {"instances", cluster::kInstancesPrefix}, {"assignments", cluster::kAssignmentsPrefix},
      {"events", cluster::kEventsPrefix},       {"routes", gateway::kRoutesPrefix},
      {"tenants", gateway::kTenantsPrefix},     {"agents", agents::kAgentsPrefix}};
  return kPrefix;
}

// One object of a kind: its name, its stored JSON with what the table derives from other keys
// (a node's scheduling state, a deployment's status, an assignment's node), and its row.
struct Item {
  std::string name;
  std::string json;
  std::vector<std::string> row;
};

std::string WithField(const rapidjson::Document& d, const char* key, const std::string& raw_json) {
  rapidjson::Document out;
  out.CopyFrom(d, out.GetAllocator());
  rapidjson::Document extra;
  if (!raw_json.empty() && json::ParseJson(raw_json, &extra).ok()) {
    out.AddMember(rapidjson::Value(key, out.GetAllocator()),
                  rapidjson::Value(extra, out.GetAllocator()), out.GetAllocator());
  }
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  out.Accept(w);
  return sb.GetString();
}

std::string Quoted(const std::string& s) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.String(s.c_str(), s.size());
  return sb.GetString();
}

// Does `item` (of kind `what`) answer to `name`? Instances and assignments by node or model,
// events by deployment or node, the rest by their name.
bool Matches(const std::string& what, const Item& item, const rapidjson::Document& d,
             const std::string& name) {
  if (name.empty()) return true;
  if (what == "instances" || what == "assignments") {
    return item.name == name || Str(d, "node") == name || Str(d, "model") == name ||
           item.name.substr(0, item.name.find('/')) == name ||
           (what == "assignments" && Str(d, "deployment") == name);
  }
  if (what == "events") return Str(d, "deployment") == name || Str(d, "node") == name;
  return item.name == name;
}

StatusOr<std::vector<Item>> StoredItems(etcd::Client& c, const std::string& what,
                                        const std::string& name, bool wide) {
  const std::string& prefix = Prefixes().at(what);
  ASSIGN_OR_RETURN(etcd::RangeResult r, c.Get(prefix, /*prefix=*/true));
  std::map<std::string, std::string> status;
  if (what == "nodes") {
    if (auto s = c.Get(cluster::kCordonedPrefix, true); s.ok()) {
      for (const auto& kv : s->kvs) {
        status[kv.key.substr(std::string(cluster::kCordonedPrefix).size())] = kv.value;
      }
    }
  }
  if (what == "deployments") {
    if (auto s = c.Get("/dais/status/", true); s.ok()) {
      for (const auto& kv : s->kvs) status[kv.key.substr(13)] = kv.value;
    }
  }
  std::vector<Item> items;
  for (const auto& kv : r.kvs) {
    rapidjson::Document d;
    if (!json::ParseJson(kv.value, &d).ok() || !d.IsObject()) continue;
    Item item{kv.key.substr(prefix.size()), kv.value, {}};
    if (!Matches(what, item, d, name)) continue;
    item.row = Row(what, d, item.name, status);
    if (what == "nodes") {
      item.json = WithField(d, "scheduling", Quoted(item.row.back()));
    } else if (what == "deployments") {
      item.json = WithField(d, "status", status.count(item.name) ? status[item.name] : "");
    } else if (what == "assignments") {
      item.json = WithField(d, "node", Quoted(item.name.substr(0, item.name.find('/'))));
    }
    if (wide) {
      auto more = WideColumns(what, d, status.count(item.name) ? status[item.name] : "");
      item.row.insert(item.row.end(), more.begin(), more.end());
    }
    items.push_back(std::move(item));
  }
  return items;
}

void Blocks(YAML::Node node) {
  node.SetStyle(YAML::EmitterStyle::Block);
  if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) Blocks(it->second);
  } else if (node.IsSequence()) {
    for (auto it = node.begin(); it != node.end(); ++it) Blocks(*it);
  }
}

// JSON as block YAML (JSON is YAML's flow style: yaml-cpp reads it as is).
std::string Yaml(const std::string& json_text) {
  YAML::Node node = YAML::Load(json_text);
  Blocks(node);
  YAML::Emitter out;
  out << node;
  return std::string(out.c_str()) + "\n";
}

bool SingleObjectKind(const std::string& what) {
  return what != "instances" && what != "assignments" && what != "events";
}

// -o json / yaml of items: one object when NAME picked one of a named kind, else a list.
int PrintStructured(const CtlOptions& o, const std::string& what,
                    const std::vector<std::string>& objects) {
  std::string text;
  if (!o.name.empty() && SingleObjectKind(what) && objects.size() == 1) {
    text = objects.front();
  } else {
    text = "[";
    for (const std::string& j : objects) text += (text.size() > 1 ? "," : "") + j;
    text += "]";
  }
  if (o.output == "yaml") {
    fmt::print("{}", Yaml(text));
  } else {
    fmt::print("{}\n", text);
  }
  return 0;
}

int NotFound(const std::string& what, const std::string& name) {
  fmt::print(stderr, "dais ctl get: no {} named '{}'\n", what.substr(0, what.size() - 1), name);
  return 1;
}

// Trainings and collections are gathered from several keys by their own printers.
int GetGathered(etcd::Client& c, const CtlOptions& o, const std::string& what) {
  const bool trainings = what == "trainings";
  if (o.output == "json" || o.output == "yaml") {
    auto text = trainings ? TrainingJson(c) : CollectionJson(c);
    if (!text.ok()) {
      fmt::print(stderr, "dais ctl get: {}\n", text.status().message());
      return 1;
    }
    rapidjson::Document d;
    std::vector<std::string> objects;
    if (json::ParseJson(*text, &d).ok() && d.IsArray()) {
      for (const auto& v : d.GetArray()) {
        if (!o.name.empty() && Str(v, "name") != o.name) continue;
        rapidjson::StringBuffer sb;
        rapidjson::Writer<rapidjson::StringBuffer> w(sb);
        v.Accept(w);
        objects.push_back(sb.GetString());
      }
    }
    if (!o.name.empty() && objects.empty()) return NotFound(what, o.name);
    return PrintStructured(o, what, objects);
  }
  auto table = trainings ? TrainingRows(c) : CollectionRows(c);
  if (!table.ok()) {
    fmt::print(stderr, "dais ctl get: {}\n", table.status().message());
    return 1;
  }
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < table->size(); ++i) {
    if (i == 0 || o.name.empty() || (*table)[i].front() == o.name) rows.push_back((*table)[i]);
  }
  if (!o.name.empty() && rows.size() == 1) return NotFound(what, o.name);
  Table(rows);
  return 0;
}

constexpr const char* kKinds =
    "nodes, deployments, instances, assignments, events, routes, tenants, trainings, "
    "collections, agents or runs (of an agent)";

}  // namespace

void PrintTable(const std::vector<std::vector<std::string>>& rows) { Table(rows); }

StatusOr<std::string> KindJson(etcd::Client& c, const std::string& kind) {
  if (kind == "trainings") return TrainingJson(c);
  if (kind == "collections") return CollectionJson(c);
  if (Prefixes().count(kind) == 0) return Status(StatusCode::kInvalidArgument, "no kind " + kind);
  ASSIGN_OR_RETURN(std::vector<Item> items, StoredItems(c, kind, "", /*wide=*/false));
  std::string out = "[";
  for (const Item& item : items) {
    if (out.size() > 1) out += ',';
    out += item.json;
  }
  return out + "]";
}

std::string CanonicalKind(const std::string& what) {
  static const std::map<std::string, std::string> kAliases = {{"node", "nodes"},
                                                              {"no", "nodes"},
                                                              {"deployment", "deployments"},
                                                              {"deploy", "deployments"},
                                                              {"instance", "instances"},
                                                              {"inst", "instances"},
                                                              {"assignment", "assignments"},
                                                              {"event", "events"},
                                                              {"ev", "events"},
                                                              {"route", "routes"},
                                                              {"tenant", "tenants"},
                                                              {"training", "trainings"},
                                                              {"collection", "collections"},
                                                              {"col", "collections"},
                                                              {"agent", "agents"},
                                                              {"run", "runs"}};
  static const std::vector<std::string> kPlural = {
      "nodes",   "deployments", "instances",   "assignments", "events", "routes",
      "tenants", "trainings",   "collections", "agents",      "runs"};
  if (std::find(kPlural.begin(), kPlural.end(), what) != kPlural.end()) return what;
  auto it = kAliases.find(what);
  return it == kAliases.end() ? "" : it->second;
}

int CtlGet(etcd::Client& c, const CtlOptions& options) {
  CtlOptions o = options;
  o.what = CanonicalKind(options.what);
  if (o.what.empty()) {
    std::vector<std::string> names = {"nodes",       "deployments", "instances", "assignments",
                                      "events",      "routes",      "tenants",   "trainings",
                                      "collections", "agents",      "runs"};
    auto near = Suggest(options.what, names);
    fmt::print(stderr, "dais ctl get: '{}' is not {}{}\n", options.what, kKinds,
               near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near.front()));
    return 2;
  }
  if (o.what == "trainings" || o.what == "collections") return GetGathered(c, o, o.what);
  if (o.what == "runs") {
    if (o.name.empty()) {
      fmt::print(stderr, "dais ctl get runs: name the agent (dais ctl get runs AGENT)\n");
      return 2;
    }
    return GetRuns(c, o.name, 20, o.output == "json");
  }
  auto items = StoredItems(c, o.what, o.name, o.output == "wide");
  if (!items.ok()) {
    fmt::print(stderr, "dais ctl get: {}\n", items.status().message());
    return 1;
  }
  if (!o.name.empty() && items->empty()) return NotFound(o.what, o.name);
  if (o.output == "json" || o.output == "yaml") {
    std::vector<std::string> objects;
    for (const Item& i : *items) objects.push_back(i.json);
    return PrintStructured(o, o.what, objects);
  }
  std::vector<std::vector<std::string>> rows = {Headers().at(o.what)};
  if (o.output == "wide" && WideHeaders().count(o.what)) {
    const auto& more = WideHeaders().at(o.what);
    rows.front().insert(rows.front().end(), more.begin(), more.end());
  }
  for (Item& i : *items) rows.push_back(std::move(i.row));
  Table(rows);
  return 0;
}

int CtlDescribe(etcd::Client& c, const CtlOptions& options) {
  CtlOptions o = options;
  o.output = "yaml";
  fmt::print("# {} {}\n", CanonicalKind(o.what).empty() ? o.what : CanonicalKind(o.what), o.name);
  if (int rc = CtlGet(c, o); rc != 0) return rc;
  const std::string what = CanonicalKind(o.what);
  o.output = "table";
  if (what == "nodes" || what == "deployments") {
    // A node's instances; a deployment's assignments (each instance's state is in `instances`).
    o.what = what == "nodes" ? "instances" : "assignments";
    fmt::print("\n{}:\n", what == "nodes" ? "Instances" : "Assignments");
    auto items = StoredItems(c, o.what, o.name, false);
    std::vector<std::vector<std::string>> rows = {Headers().at(o.what)};
    if (items.ok()) {
      for (Item& i : *items) rows.push_back(std::move(i.row));
    }
    Table(rows);
  }
  fmt::print("\nEvents (the scheduler's, last 30-60 min):\n");
  auto events = StoredItems(c, "events", o.name, false);
  std::vector<std::vector<std::string>> rows = {Headers().at("events")};
  if (events.ok()) {
    const size_t from = events->size() > 20 ? events->size() - 20 : 0;
    for (size_t i = from; i < events->size(); ++i) rows.push_back(std::move((*events)[i].row));
  }
  if (rows.size() == 1) {
    fmt::print("(none)\n");
  } else {
    Table(rows);
  }
  return 0;
}

}  // namespace dais::cmd
