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
#include <optional>
#include <set>
#include <sstream>

#include "agents/agent_spec.h"
#include "cluster/agent_placement.h"
#include "cluster/deployment.h"
#include "cluster/events.h"
#include "cluster/keys.h"
#include "cluster/training_job.h"
#include "cmd/ctl_agent.h"
#include "cmd/ctl_collection.h"
#include "cmd/ctl_get.h"
#include "cmd/ctl_rollout.h"
#include "cmd/ctl_training.h"
#include "cmd/ctl_watch.h"
#include "common/json.h"
#include "etcd/client.h"
#include "fmt/format.h"
#ifdef DAIS_HAVE_FED
#include "fed/federation_spec.h"
#endif
#include "gateway/route.h"
#include "gateway/tenant.h"

namespace dais::cmd {
namespace {

// One document of an apply: where it came from, and once validated, what to write.
struct ApplyDoc {
  std::string file;   // the file it came from (relative paths in a spec are relative to it)
  std::string where;  // "deploy.yaml document 2"
  std::string text;   // the document alone, as YAML
  std::string key, json, what;
  std::optional<agents::AgentSpec> agent;  // checked against the cluster before writing
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
  } else if (kind == "agent") {
    ASSIGN_OR_RETURN(agents::AgentSpec a, agents::ParseAgentNode(root));
    doc->key = agents::kAgentsPrefix + a.name;
    doc->json = agents::AgentToJson(a);
    doc->what = fmt::format("agent {} applied ({} step(s); {} priority)", a.name, a.steps.size(),
                            a.priority);
    doc->agent = std::move(a);
  } else if (kind == "federation") {
#ifdef DAIS_HAVE_FED
    ASSIGN_OR_RETURN(fed::FederationSpec f,
                     fed::ParseFederationSpec(doc->text, doc->file, /*check_files=*/false));
    if (!f.release_yaml.empty()) {
      RETURN_IF_ERROR(cluster::ParseTrainingReleaseYaml(f.release_yaml).status());
    }
    doc->key = fed::kFederationsPrefix + f.name;
    doc->json = fed::FederationSpecToYaml(f);
    doc->what = fmt::format(
        "federation {} applied ({} rounds of {}; run: dais fed serve --etcd ... --federation {})",
        f.name, f.rounds, f.model, f.name);
#else
    return Unimplemented("kind: federation needs a dais built with LibTorch");
#endif
  } else {
    return InvalidArgument(
        "kind: '" + kind +
        "' is not deployment, route, tenant, training, collection, agent or federation");
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
      doc.file = file;
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
  for (const ApplyDoc& d : docs) {
    if (!d.agent) continue;
    if (Status s = CheckAgentCapabilities(c, *d.agent, keys); !s.ok()) {
      refusals.push_back(fmt::format("{}: agent {}: {}", d.where, d.agent->name, s.message()));
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
      ->add_option("-f,--file", o->file,
                   "The spec: a deployment (docs/cluster.md), 'kind: route' / 'kind: tenant' "
                   "(docs/gateway.md), 'kind: training' (docs/learning-loop.md), 'kind: "
                   "federation' (docs/federated.md), 'kind: agent' "
                   "(docs/agents.md) or 'kind: collection' "
                   "(docs/memory.md); several YAML "
                   "documents (---) in one file, a directory of "
                   "*.yaml / *.yml files, or - for stdin. All are validated first: one refusal "
                   "and nothing is written.")
      ->required();
  CLI::App* get = cmd->add_subcommand(
      "get",
      "List objects of a kind, or one by name (kubectl-style: get deployments, get node n1)");
  get->add_option(
         "what", o->what,
         "nodes | deployments | instances | assignments | events (the scheduler's "
         "decisions of the last 30-60 min) | routes | tenants | trainings | collections (each "
         "shard's replicas); singular and short names too (node, no, deploy, inst, ev, col)")
      ->required();
  get->add_option("name", o->name,
                  "Only this one (instances and assignments: of this node or model; events: of "
                  "this deployment or node).");
  get->add_option("-o,--output", o->output,
                  "table, wide (more columns for nodes, deployments, assignments), json or yaml "
                  "(the stored object with what the table derives: a node's scheduling state, a "
                  "deployment's status, an assignment's node)")
      ->check(CLI::IsMember({"table", "wide", "json", "yaml"}))
      ->capture_default_str();
  CLI::App* describe = cmd->add_subcommand(
      "describe", "One object in full (YAML), with its instances or assignments and its events");
  describe->add_option("what", o->what, "node | deployment | route | tenant | training | ...")
      ->required();
  describe->add_option("name", o->name, "Its name.")->required();
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
      "let go; its points stay in Redis) or an agent (its runtimes stop after their runs in "
      "progress; its triggers, runs and dead letters stay in Redis)");
  del->add_option("what", o->what, "deployment | route | tenant | training | collection | agent")
      ->required()
      ->check(CLI::IsMember({"deployment", "route", "tenant", "training", "collection", "agent"}));
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
  if (command->get_subcommand("get")->parsed()) return CtlGet(**client, o);
  if (command->get_subcommand("describe")->parsed()) return CtlDescribe(**client, o);
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
                             : o.what == "agent"      ? cluster::kAgentsPrefix
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
  if (o.what == "agent") {
    (void)(*client)->Delete(std::string("/dais/status/") + cluster::kAgentTaskPrefix + o.name);
  }
  if (o.what == "collection") {
    (void)(*client)->Delete(
        std::string("/dais/status/") + cluster::kMemoryTaskPrefix + o.name + ":", /*prefix=*/true);
  }
  fmt::print("{} {} deleted\n", o.what, o.name);
  return 0;
}

}  // namespace dais::cmd
