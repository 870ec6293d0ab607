#include "cmd/locks.h"

#include <CLI/CLI.hpp>

#include "common/logging.h"
#include "fmt/format.h"
#include "locks/lock_service.h"

namespace dais::cmd {

CLI::App* AddLocksCommand(CLI::App* app, LocksCliOptions* o) {
  CLI::App* l = app->add_subcommand(
      "locks", "Inspect and, in an emergency, break the model-load locks held in Redis");
  l->require_subcommand(1);
  CLI::App* list = l->add_subcommand("list", "Every lock (owner, fencing token, lease left)");
  AddRedisFlags(list, &o->store);
  list->add_option("--model", o->model, "Glob of model names.")->capture_default_str();
  CLI::App* inspect = l->add_subcommand(
      "inspect", "One model's hierarchy: MODEL lock, VERSION/NODE locks, intentions, fence");
  AddRedisFlags(inspect, &o->store);
  inspect->add_option("--model", o->model, "The model.")->required();
  CLI::App* brk = l->add_subcommand(
      "break",
      "Force-delete a lock whoever holds it (its holder finds out at its next renewal and its "
      "late effects are fenced). Requires --force; logged.");
  AddRedisFlags(brk, &o->store);
  brk->add_option("--model", o->model, "The model.")->required();
  brk->add_option("--level", o->level, "model, version or node (with --all: every lock).")
      ->check(CLI::IsMember({"model", "version", "node"}));
  brk->add_option("--version", o->version, "Version (level version).");
  brk->add_option("--node", o->node, "Node id (level node, or a version lock's node scope).");
  brk->add_flag("--all", o->all, "Every lock and intention of the model.");
  brk->add_flag("--force", o->force, "Required: breaking a lock is an operator's override.");
  return l;
}

namespace {

int Fail(const Status& s) {
  fmt::print(stderr, "dais locks: {}\n", s.message());
  return s.code() == StatusCode::kInvalidArgument ? 2 : 1;
}

void PrintLocks(const std::vector<locks::LockInfo>& locks) {
  fmt::print("{:<20} {:<8} {:<32} {:<36} {:>18} {:>9}\n", "model", "level", "lock", "owner",
             "token", "ttl_ms");
  for (const auto& l : locks) {
    fmt::print("{:<20} {:<8} {:<32} {:<36} {:>18} {:>9}\n", l.model, locks::LockLevelName(l.level),
               l.name, l.owner.empty() ? "-" : l.owner, l.token, l.ttl.count());
  }
}

}  // namespace

int RunLocks(CLI::App* cmd, const LocksCliOptions& o) {
  const std::string sub = cmd->get_subcommands().front()->get_name();
  if (o.store.redis.empty()) return Fail(InvalidArgument("--redis is required"));
  auto client = ConnectRedis(o.store);
  if (!client.ok()) return Fail(client.status());
  if (!(*client)->WaitUntilReachable(std::chrono::seconds(5))) {
    return Fail(Unavailable("redis " + o.store.redis + " is not reachable"));
  }
  redis::Client* c = client->get();
  if (sub == "list") {
    auto locks = locks::List(c, o.model);
    if (!locks.ok()) return Fail(locks.status());
    PrintLocks(*locks);
    return 0;
  }
  if (sub == "inspect") {
    auto st = locks::Inspect(c, o.model);
    if (!st.ok()) return Fail(st.status());
    fmt::print("model {}: fence {} (the last fencing token issued), {} waiter(s)\n", st->model,
               st->fence, st->waiters);
    std::vector<locks::LockInfo> all;
    if (st->model_lock) all.push_back(*st->model_lock);
    all.insert(all.end(), st->sub_locks.begin(), st->sub_locks.end());
    PrintLocks(all);
    for (const auto& s : st->stale_intentions) fmt::print("stale intention: {}\n", s);
    return 0;
  }
  // break
  if (!o.force) {
    return Fail(InvalidArgument(
        "breaking a lock overrides its holder: add --force if you mean it (the holder learns "
        "it at its next renewal; its late effects are rejected by fencing)"));
  }
  StatusOr<std::vector<locks::LockInfo>> removed = InvalidArgument("give --level or --all");
  if (o.all) {
    removed = locks::BreakModel(c, o.model);
  } else if (o.level == "model") {
    removed = locks::Break(c, locks::LockResource::Model(o.model));
  } else if (o.level == "version") {
    if (o.version.empty()) return Fail(InvalidArgument("--level version needs --version"));
    removed = locks::Break(c, locks::LockResource::Version(o.model, o.version, o.node));
  } else if (o.level == "node") {
    if (o.node.empty()) return Fail(InvalidArgument("--level node needs --node"));
    removed = locks::Break(c, locks::LockResource::Node(o.model, o.node));
  }
  if (!removed.ok()) return Fail(removed.status());
  LOG_WARNING("dais locks break --model {}: removed {} lock(s) by operator request", o.model,
              removed->size());
  PrintLocks(*removed);
  return 0;
}

}  // namespace dais::cmd
