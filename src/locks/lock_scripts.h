// Key layout and Lua scripts of the lock service (docs/locks.md, "Key layout", "Scripts").
// Every key of one model carries the hash tag {model}, so each script touches one slot and runs
// on Redis Cluster. Internal to src/locks.
#pragma once

#include <string>
#include <string_view>

#include "locks/lock_types.h"
#include "redis/script.h"

namespace dais::locks::internal {

// "dais:lock:{model}:" — the prefix of every key of `model`.
std::string ModelPrefix(std::string_view model);

struct LockKeys {
  std::string lock;     // prefix + Name(): HASH owner, token, level, since (ms); PEXPIRE lease
  std::string model;    // prefix + "model": the MODEL lock
  std::string intents;  // prefix + "intents": ZSET sub-lock name -> expiry (server ms)
  std::string fence;    // prefix + "fence": the last token issued (no expiry)
  std::string waiters;  // prefix + "waiters": ZSET waiter id (owner) -> expiry (server ms)
  std::string wake;     // prefix + "wake:": + waiter id = that waiter's wake-up LIST
  std::string member;   // Name(): the intention member ("" for MODEL)
  std::string level;    // LockLevelName()
};
LockKeys KeysFor(const LockResource& resource);

// The lock level a sub-lock name ("version:..." / "node:...") belongs to.
LockLevel LevelOfName(std::string_view name);

// KEYS lock, model, intents, fence, waiters.
// ARGV owner, lease ms, level, member, waiter id ("" = none), waiter ttl ms, wake prefix.
// Reply {1, token, "granted"|"renewed"} or {0, "held"|"model"|"intents", holder, hint ms}.
const redis::Script& AcquireScript();
// KEYS lock, intents, waiters. ARGV owner, member, wake prefix, waiter id to drop ("" none).
// Reply 1 deleted, 0 not the owner. Wakes the model's waiters when it deleted.
const redis::Script& ReleaseScript();
// KEYS lock, intents. ARGV owner, lease ms, level, member. Reply 1 renewed, 0 not the owner.
const redis::Script& RenewScript();
// KEYS model, intents, fence, waiters. ARGV prefix.
// Reply {fence, waiters, {model lock}|{}, {{name, owner, token, pttl}...}}; a lock entry is
// {name, owner, token, pttl}, owner "" for an intention without its key.
const redis::Script& InspectScript();
// KEYS model, intents, waiters. ARGV prefix, mode ("one"|"all"), name (mode one), wake prefix.
// Reply {{name, owner, token, pttl}...} of what was deleted.
const redis::Script& BreakScript();

}  // namespace dais::locks::internal
