#include "cmd/ctl.h"

#include <rapidjson/document.h>
#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <sstream>

#include "cluster/deployment.h"
#include "cluster/events.h"
#include "cluster/keys.h"
#include "cmd/ctl_rollout.h"
#include "cmd/ctl_watch.h"
#include "common/json.h"
#include "etcd/client.h"
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

// A route or a tenant (gateway/route.h, gateway/tenant.h), validated, stored as JSON.
int ApplyGatewaySpec(etcd::Client& c, const CtlOptions& o, const std::string& kind,
                     const std::string& text) {
  std::string key, json, what;
  if (kind == "route") {
    auto r = gateway::ParseRoute(text);
    if (!r.ok()) {
      fmt::print(stderr, "dais ctl apply: {}: {}\n", o.file, r.status().message());
      return 2;
    }
    key = gateway::kRoutesPrefix + r->name;
    json = gateway::RouteToJson(*r);
    std::string split;
    for (const auto& v : r->versions) {
      split += (split.empty() ? "" : ", ") + fmt::format("v{} {}%", v.version, v.weight);
    }
    what =
        fmt::format("route {} applied ({} -> {}; stable v{})", r->name, r->model, split, r->stable);
  } else {
    auto t = gateway::ParseTenant(text);
    if (!t.ok()) {
      fmt::print(stderr, "dais ctl apply: {}: {}\n", o.file, t.status().message());
      return 2;
    }
    key = gateway::kTenantsPrefix + t->name;
    json = gateway::TenantToJson(*t);
    what = fmt::format("tenant {} applied", t->name);
  }
  auto put = c.Put(key, json);
  if (!put.ok()) {
    fmt::print(stderr, "dais ctl apply: {}\n", put.status().message());
    return 1;
  }
  fmt::print("{}\n", what);
  return 0;
}

int Apply(etcd::Client& c, const CtlOptions& o) {
  std::ifstream f(o.file);
  if (!f) {
    fmt::print(stderr, "dais ctl apply: cannot read {}\n", o.file);
    return 2;
  }
  std::stringstream text;
  text << f.rdbuf();
  std::string kind = "deployment";
  try {
    const YAML::Node root = YAML::Load(text.str());
    if (root.IsMap() && root["kind"] && root["kind"].IsScalar()) {
      kind = root["kind"].as<std::string>();
    }
  } catch (const YAML::Exception&) {  // the parser below names the problem
  }
  if (kind == "route" || kind == "tenant") return ApplyGatewaySpec(c, o, kind, text.str());
  if (kind != "deployment") {
    fmt::print(stderr, "dais ctl apply: {}: kind: '{}' is not deployment, route or tenant\n",
               o.file, kind);
    return 2;
  }
  auto d = cluster::ParseDeploymentYaml(text.str());
  if (!d.ok()) {
    fmt::print(stderr, "dais ctl apply: {}: {}\n", o.file, d.status().message());
    return 2;
  }
  auto put = c.Put("/dais/deployments/" + d->name, cluster::DeploymentToJson(*d));
  if (!put.ok()) {
    fmt::print(stderr, "dais ctl apply: {}\n", put.status().message());
    return 1;
  }
  fmt::print("deployment {} applied ({} x {})\n", d->name, d->replicas, d->model);
  return 0;
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
    return {name,
            Str(d, "model"),
            Str(d, "replicas"),
            has ? std::to_string(s["assigned"].GetInt()) : "?",
            has ? std::to_string(s["pending"].GetInt()) : "?",
            has ? Str(s, "reason") : ""};
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

int Get(etcd::Client& c, const CtlOptions& o) {
  static const std::map<std::string, std::string> kPrefix = {
      {"nodes", cluster::kNodesPrefix},         {"deployments", "/dais/deployments/"},
      {"instances", cluster::kInstancesPrefix}, {"assignments", cluster::kAssignmentsPrefix},
      {"events", cluster::kEventsPrefix},       {"routes", gateway::kRoutesPrefix},
      {"tenants", gateway::kTenantsPrefix}};
  auto it = kPrefix.find(o.what);
  if (it == kPrefix.end()) {
    fmt::print(stderr,
               "dais ctl get: '{}' is not nodes, deployments, instances, assignments, events, "
               "routes or tenants\n",
               o.what);
    return 2;
  }
  auto r = c.Get(it->second, /*prefix=*/true);
  if (!r.ok()) {
    fmt::print(stderr, "dais ctl get: {}\n", r.status().message());
    return 1;
  }
  std::map<std::string, std::string> status;
  if (o.what == "nodes") {
    if (auto s = c.Get(cluster::kCordonedPrefix, true); s.ok()) {
      for (const auto& kv : s->kvs) {
        status[kv.key.substr(std::string(cluster::kCordonedPrefix).size())] = kv.value;
      }
    }
  }
  if (o.what == "deployments") {
    if (auto s = c.Get("/dais/status/", true); s.ok()) {
      for (const auto& kv : s->kvs) status[kv.key.substr(13)] = kv.value;
    }
  }
  if (o.output == "json") {
    std::string out = "[";
    for (const auto& kv : r->kvs) out += (out.size() > 1 ? "," : "") + kv.value;
    fmt::print("{}]\n", out);
    return 0;
  }
  static const std::map<std::string, std::vector<std::string>> kHeader = {
      {"nodes", {"NODE", "CPU", "MEMORY_MIB", "GPUS", "LABELS", "HTTP", "SCHEDULING"}},
      {"deployments", {"DEPLOYMENT", "MODEL", "REPLICAS", "ASSIGNED", "PENDING", "REASON"}},
      {"instances", {"NODE", "MODEL", "VERSION", "STATE", "GPUS", "REASON"}},
      {"assignments", {"NODE", "MODEL", "DEPLOYMENT", "VERSION", "GPUS"}},
      {"events", {"TIME (UTC)", "KIND", "DEPLOYMENT", "NODE", "MESSAGE"}},
      {"routes", {"ROUTE", "MODEL", "VERSIONS", "STABLE", "STICKY", "RULES"}},
      {"tenants", {"TENANT", "MODELS", "REQUESTS/S", "BURST"}}};
  std::vector<std::vector<std::string>> rows = {kHeader.at(o.what)};
  for (const auto& kv : r->kvs) {
    rapidjson::Document d;
    if (!json::ParseJson(kv.value, &d).ok() || !d.IsObject()) continue;
    rows.push_back(Row(o.what, d, kv.key.substr(it->second.size()), status));
  }
  Table(rows);
  return 0;
}

}  // namespace

CLI::App* AddCtlCommand(CLI::App* app, CtlOptions* o) {
  CLI::App* cmd = app->add_subcommand("ctl", "The cluster from the command line (etcd)");
  cmd->require_subcommand(1);
  cmd->add_option("--etcd", o->etcd, "etcd endpoints host:port (comma-separated).")
      ->delimiter(',')
      ->capture_default_str();
  CLI::App* apply = cmd->add_subcommand(
      "apply",
      "Create or update a deployment, a route or a tenant from a YAML spec ('kind:'; validated "
      "before writing)");
  apply
      ->add_option("-f,--file", o->file,
                   "The spec: a deployment (docs/cluster.md), or 'kind: route' / 'kind: tenant' "
                   "(docs/gateway.md).")
      ->required();
  CLI::App* get = cmd->add_subcommand("get", "List nodes, deployments, instances or assignments");
  get->add_option("what", o->what,
                  "nodes | deployments | instances | assignments | events (the scheduler's "
                  "decisions of the last 30-60 min) | routes | tenants")
      ->required();
  get->add_option("-o,--output", o->output, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  for (const char* verb : {"cordon", "uncordon", "drain"}) {
    CLI::App* c = cmd->add_subcommand(
        verb, std::string(verb) == "cordon"     ? "No new instances on a node"
              : std::string(verb) == "uncordon" ? "Let a node take instances again"
                                                : "Cordon a node and move its instances elsewhere");
    c->add_option("name", o->name, "The node's id.")->required();
  }
  CLI::App* watch = cmd->add_subcommand(
      "watch",
      "Live view: the instances, then each state change and scheduler event as it happens");
  watch->add_option("--for", o->watch_seconds, "Stop after this many seconds (default: Ctrl-C).");
  AddRolloutCommands(cmd, &o->rollout);
  CLI::App* del = cmd->add_subcommand(
      "delete", "Delete a deployment (its instances are unloaded), a route or a tenant");
  del->add_option("what", o->what, "deployment | route | tenant")
      ->required()
      ->check(CLI::IsMember({"deployment", "route", "tenant"}));
  del->add_option("name", o->name, "Its name.")->required();
  return cmd;
}

int RunCtl(CLI::App* command, const CtlOptions& o) {
  auto client = etcd::Client::Create({o.etcd});
  if (!client.ok()) {
    fmt::print(stderr, "dais ctl: {}\n", client.status().message());
    return 2;
  }
  if (command->get_subcommand("apply")->parsed()) return Apply(**client, o);
  if (command->get_subcommand("get")->parsed()) return Get(**client, o);
  if (command->get_subcommand("watch")->parsed()) return WatchCluster(**client, o.watch_seconds);
  if (int rc = RunRolloutCommands(command, **client, o.rollout); rc >= 0) return rc;
  for (const char* verb : {"cordon", "drain", "uncordon"}) {
    if (!command->get_subcommand(verb)->parsed()) continue;
    const std::string key = std::string(cluster::kCordonedPrefix) + o.name;
    auto r = std::string(verb) == "uncordon" ? (*client)->Delete(key) : (*client)->Put(key, verb);
    if (!r.ok()) {
      fmt::print(stderr, "dais ctl {}: {}\n", verb, r.status().message());
      return 1;
    }
    fmt::print("node {} {}\n", o.name,
               std::string(verb) == "uncordon" ? "uncordoned"
               : std::string(verb) == "drain"  ? "draining (its instances move elsewhere)"
                                               : "cordoned");
    return 0;
  }
  const std::string prefix = o.what == "route"    ? gateway::kRoutesPrefix
                             : o.what == "tenant" ? gateway::kTenantsPrefix
                                                  : "/dais/deployments/";
  auto r = (*client)->Delete(prefix + o.name);
  if (!r.ok()) {
    fmt::print(stderr, "dais ctl delete: {}\n", r.status().message());
    return 1;
  }
  if (o.what == "deployment") (void)(*client)->Delete("/dais/status/" + o.name);
  fmt::print("{} {} deleted\n", o.what, o.name);
  return 0;
}

}  // namespace dais::cmd
