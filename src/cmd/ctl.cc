#include "cmd/ctl.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "cluster/deployment.h"
#include "cluster/events.h"
#include "cluster/keys.h"
#include "cluster/training_job.h"
#include "cmd/ctl_collection.h"
#include "cmd/ctl_rollout.h"
#include "cmd/ctl_training.h"
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

// One document of an apply: where it came from, and once validated, what to write.
struct ApplyDoc {
  std::string where;  // "deploy.yaml document 2"
  std::string text;   // the document alone, as YAML
  std::string key, json, what;
};

// Validates one document (a deployment, route or tenant by its 'kind:') into key, json and
// what to print; InvalidArgument naming the field.
Status ValidateDoc(ApplyDoc* doc, const YAML::Node& root) {
  if (doc->text.size() > gateway::kMaxSpecDocumentBytes) {
    return InvalidArgument("a document of " + std::to_string(doc->text.size()) +
                           " bytes, over the limit of " +
                           std::to_string(gateway::kMaxSpecDocumentBytes));
  }
  std::string kind = "deployment";
  if (root.IsMap() && root["kind"] && root["kind"].IsScalar())
    kind = root["kind"].as<std::string>();
  if (kind == "route") {
    ASSIGN_OR_RETURN(gateway::RouteSpec r, gateway::ParseRoute(doc->text));
    doc->key = gateway::kRoutesPrefix + r.name;
    doc->json = gateway::RouteToJson(r);
    std::string split;
    for (const auto& v : r.versions) {
      split += (split.empty() ? "" : ", ") + fmt::format("v{} {}%", v.version, v.weight);
    }
    doc->what =
        fmt::format("route {} applied ({} -> {}; stable v{})", r.name, r.model, split, r.stable);
  } else if (kind == "tenant") {
    ASSIGN_OR_RETURN(gateway::TenantSpec t, gateway::ParseTenant(doc->text));
    doc->key = gateway::kTenantsPrefix + t.name;
    doc->json = gateway::TenantToJson(t);
    doc->what = fmt::format("tenant {} applied", t.name);
  } else if (kind == "deployment") {
    ASSIGN_OR_RETURN(cluster::DeploymentSpec d, cluster::ParseDeploymentYaml(doc->text));
    doc->key = "/dais/deployments/" + d.name;
    doc->json = cluster::DeploymentToJson(d);
    doc->what = fmt::format("deployment {} applied ({} x {})", d.name, d.replicas, d.model);
  } else if (kind == "training") {
    ASSIGN_OR_RETURN(cluster::TrainingJobSpec t, cluster::ParseTrainingJobYaml(doc->text));
    doc->key = cluster::kTrainingsPrefix + t.name;
    doc->json = cluster::TrainingJobToJson(t);
    doc->what =
        fmt::format("training {} applied ({}; release {})", t.name, t.config, t.release.strategy);
  } else if (kind == "collection") {
    ASSIGN_OR_RETURN(cluster::CollectionPlacement c, ParseCollectionApply(doc->text));
    doc->key = cluster::kCollectionsPrefix + c.name;
    doc->json = cluster::CollectionPlacementToJson(c);
    doc->what = fmt::format("collection {} applied ({} shard(s) x {} replica(s))", c.name, c.shards,
                            c.replicas);
  } else {
    return InvalidArgument("kind: '" + kind +
                           "' is not deployment, route, tenant, training or collection");
  }
  return OkStatus();
}

// The files of `-f`: a file, every *.yaml / *.yml of a directory (sorted), or "-" (stdin).
StatusOr<std::vector<std::pair<std::string, std::string>>> ReadSpecs(const std::string& path) {
  std::vector<std::pair<std::string, std::string>> out;
  auto slurp = [](std::istream& in) {
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  if (path == "-") {
    out.emplace_back("stdin", slurp(std::cin));
    return out;
  }
  std::error_code ec;
  std::vector<std::string> files;
  if (std::filesystem::is_directory(path, ec)) {
    for (const auto& e : std::filesystem::directory_iterator(path, ec)) {
      const std::string ext = e.path().extension().string();
      if (e.is_regular_file() && (ext == ".yaml" || ext == ".yml")) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) return InvalidArgument(path + ": no *.yaml or *.yml file in the directory");
  } else {
    files.push_back(path);
  }
  for (const std::string& file : files) {
    std::ifstream f(file);
    if (!f) return InvalidArgument("cannot read " + file);
    out.emplace_back(file, slurp(f));
  }
  return out;
}

// Every document of every file, validated; the refusals, each named by file and document.
std::vector<ApplyDoc> ValidateAll(const std::vector<std::pair<std::string, std::string>>& files,
                                  std::vector<std::string>* refusals) {
  std::vector<ApplyDoc> docs;
  for (const auto& [file, text] : files) {
    std::vector<YAML::Node> nodes;
    try {
      nodes = YAML::LoadAll(text);
    } catch (const YAML::Exception& e) {
      refusals->push_back(fmt::format("{}: not YAML: {}", file, e.what()));
      continue;
    }
    int index = 0;
    for (const YAML::Node& node : nodes) {
      ++index;
      if (node.IsNull()) continue;  // an empty document ("---" at the start or the end)
      ApplyDoc doc;
      doc.where = nodes.size() > 1 ? fmt::format("{} document {}", file, index) : file;
      doc.text = YAML::Dump(node);
      if (Status s = ValidateDoc(&doc, node); !s.ok()) {
        refusals->push_back(fmt::format("{}: {}", doc.where, s.message()));
        continue;
      }
      docs.push_back(std::move(doc));
    }
  }
  if (docs.empty() && refusals->empty()) refusals->push_back("no document to apply");
  return docs;
}

// Applies every document of `-f` (a file of one or more YAML documents, a directory of them, or
// "-"), all validated first: any refusal and nothing is written. The writes are one etcd
// transaction, so a watcher sees all of them or none.
int Apply(etcd::Client& c, const CtlOptions& o) {
  auto files = ReadSpecs(o.file);
  if (!files.ok()) {
    fmt::print(stderr, "dais ctl apply: {}\n", files.status().message());
    return 2;
  }
  std::vector<std::string> refusals;
  std::vector<ApplyDoc> docs = ValidateAll(*files, &refusals);
  std::set<std::string> keys;
  for (const ApplyDoc& d : docs) {
    if (!keys.insert(d.key).second) {
      refusals.push_back(fmt::format("{}: {} is given twice", d.where, d.key));
    }
  }
  if (!refusals.empty()) {
    for (const std::string& r : refusals) fmt::print(stderr, "dais ctl apply: {}\n", r);
    fmt::print(stderr, "dais ctl apply: nothing applied ({} refused)\n", refusals.size());
    return 2;
  }
  constexpr size_t kMaxTxnOps = 128;  // etcd's default --max-txn-ops
  for (size_t first = 0; first < docs.size(); first += kMaxTxnOps) {
    std::vector<etcd::Op> ops;
    for (size_t i = first; i < std::min(docs.size(), first + kMaxTxnOps); ++i) {
      ops.push_back({etcd::Op::Kind::kPut, docs[i].key, docs[i].json, 0, false});
    }
    auto put = c.Txn({}, ops);
    if (!put.ok()) {
      fmt::print(stderr, "dais ctl apply: {} (applied: {} of {})\n", put.status().message(), first,
                 docs.size());
      return 1;
    }
  }
  for (const ApplyDoc& d : docs) fmt::print("{}\n", d.what);
  return 0;
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

// A kind gathered from several keys (trainings, collections): its table, or -o json.
int GetGathered(etcd::Client& c, const CtlOptions& o,
                StatusOr<std::vector<std::vector<std::string>>> (*rows)(etcd::Client&),
                StatusOr<std::string> (*json)(etcd::Client&)) {
  if (o.output == "json") {
    auto text = json(c);
    if (!text.ok()) {
      fmt::print(stderr, "dais ctl get: {}\n", text.status().message());
      return 1;
    }
    fmt::print("{}\n", *text);
    return 0;
  }
  auto table = rows(c);
  if (!table.ok()) {
    fmt::print(stderr, "dais ctl get: {}\n", table.status().message());
    return 1;
  }
  Table(*table);
  return 0;
}

int Get(etcd::Client& c, const CtlOptions& o) {
  if (o.what == "trainings") return GetGathered(c, o, TrainingRows, TrainingJson);
  if (o.what == "collections") return GetGathered(c, o, CollectionRows, CollectionJson);
  static const std::map<std::string, std::string> kPrefix = {
      {"nodes", cluster::kNodesPrefix},         {"deployments", "/dais/deployments/"},
      {"instances", cluster::kInstancesPrefix}, {"assignments", cluster::kAssignmentsPrefix},
      {"events", cluster::kEventsPrefix},       {"routes", gateway::kRoutesPrefix},
      {"tenants", gateway::kTenantsPrefix}};
  auto it = kPrefix.find(o.what);
  if (it == kPrefix.end()) {
    fmt::print(stderr,
               "dais ctl get: '{}' is not nodes, deployments, instances, assignments, events, "
               "routes, tenants, trainings or collections\n",
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
      {"deployments",
       {"DEPLOYMENT", "MODEL", "VERSION", "REPLICAS", "ASSIGNED", "PENDING", "REASON"}},
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
  cmd->fallthrough();  // `dais ctl get nodes --etcd host:2379`: the flag after the subcommand
  cmd->add_option("--etcd", o->etcd, "etcd endpoints host:port (comma-separated).")
      ->delimiter(',')
      ->capture_default_str()
      ->envname("DAIS_ETCD");
  CLI::App* apply = cmd->add_subcommand(
      "apply",
      "Create or update a deployment, a route, a tenant, a training job or a vector memory "
      "collection from a YAML spec "
      "('kind:'; validated before writing)");
  apply
      ->add_option(
          "-f,--file", o->file,
          "The spec: a deployment (docs/cluster.md), 'kind: route' / 'kind: tenant' "
          "(docs/gateway.md), 'kind: training' (docs/learning-loop.md) or 'kind: collection' "
          "(docs/memory.md); several YAML "
          "documents (---) in one file, a directory of "
          "*.yaml / *.yml files, or - for stdin. All are validated first: one refusal "
          "and nothing is written.")
      ->required();
  CLI::App* get = cmd->add_subcommand("get", "List nodes, deployments, instances or assignments");
  get->add_option(
         "what", o->what,
         "nodes | deployments | instances | assignments | events (the scheduler's "
         "decisions of the last 30-60 min) | routes | tenants | trainings | collections (each "
         "shard's replicas)")
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
      "delete",
      "Delete a deployment (its instances are unloaded), a route, a tenant, a training job "
      "(its run in progress is stopped; its run records stay) or a collection (its shards are "
      "let go; its points stay in Redis)");
  del->add_option("what", o->what, "deployment | route | tenant | training | collection")
      ->required()
      ->check(CLI::IsMember({"deployment", "route", "tenant", "training", "collection"}));
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
  const std::string prefix = o.what == "route"        ? gateway::kRoutesPrefix
                             : o.what == "tenant"     ? gateway::kTenantsPrefix
                             : o.what == "training"   ? cluster::kTrainingsPrefix
                             : o.what == "collection" ? cluster::kCollectionsPrefix
                                                      : "/dais/deployments/";
  auto r = (*client)->Delete(prefix + o.name);
  if (!r.ok()) {
    fmt::print(stderr, "dais ctl delete: {}\n", r.status().message());
    return 1;
  }
  if (o.what == "deployment") (void)(*client)->Delete("/dais/status/" + o.name);
  if (o.what == "training") {
    (void)(*client)->Delete(std::string("/dais/status/") + cluster::kTrainingTaskPrefix + o.name);
  }
  if (o.what == "collection") {
    (void)(*client)->Delete(
        std::string("/dais/status/") + cluster::kMemoryTaskPrefix + o.name + ":", /*prefix=*/true);
  }
  fmt::print("{} {} deleted\n", o.what, o.name);
  return 0;
}

}  // namespace dais::cmd
