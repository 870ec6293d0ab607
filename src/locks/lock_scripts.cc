#include "locks/lock_scripts.h"

namespace dais::locks::internal {

std::string ModelPrefix(std::string_view model) {
  std::string p = "dais:lock:{";
  p.append(model);
  p += "}:";
  return p;
}

LockKeys KeysFor(const LockResource& resource) {
  const std::string prefix = ModelPrefix(resource.model);
  LockKeys k;
  const std::string name = resource.Name();
  k.lock = prefix + name;
  k.model = prefix + "model";
  k.intents = prefix + "intents";
  k.fence = prefix + "fence";
  k.waiters = prefix + "waiters";
  k.wake = prefix + "wake:";
  if (resource.level != LockLevel::kModel) k.member = name;
  k.level = std::string(LockLevelName(resource.level));
  return k;
}

LockLevel LevelOfName(std::string_view name) {
  if (name.starts_with("version:")) return LockLevel::kVersion;
  if (name.starts_with("node:")) return LockLevel::kNode;
  return LockLevel::kModel;
}

namespace {

// Shared Lua helpers. Times are the server's (TIME), in ms; TIME is allowed before writes because
// Redis >= 5 replicates scripts by their effects (always, since 7).
constexpr const char* kPrelude = R"lua(
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function extend(key, ms)
  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, ms) end
end
local function wake_all(waiters, prefix, now)
  redis.call('ZREMRANGEBYSCORE', waiters, '-inf', now)
  for _, id in ipairs(redis.call('ZRANGE', waiters, 0, -1)) do
    local k = prefix .. id
    redis.call('LPUSH', k, '1')
    redis.call('LTRIM', k, 0, 0)
    redis.call('PEXPIRE', k, 10000)
  end
end
)lua";

constexpr const char* kAcquire = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local owner, lease, level, member = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local waiter, waiter_ttl, wake = ARGV[5], tonumber(ARGV[6]), ARGV[7]
local sub = level ~= 'model'
local function granted(token, how)
  if sub then
    redis.call('ZADD', KEYS[3], now + lease, member)
    extend(KEYS[3], lease)
  end
  if waiter ~= '' then
    redis.call('ZREM', KEYS[5], waiter)
    redis.call('DEL', wake .. waiter)
  end
  return {1, token, how}
end
local function refused(why, holder, hint)
  if waiter ~= '' then
    redis.call('ZADD', KEYS[5], now + waiter_ttl, waiter)
    extend(KEYS[5], waiter_ttl)
  end
  return {0, why, holder, hint}
end
local cur = redis.call('HGET', KEYS[1], 'owner')
if cur == owner then
  redis.call('PEXPIRE', KEYS[1], lease)
  return granted(tonumber(redis.call('HGET', KEYS[1], 'token')), 'renewed')
end
if cur then return refused('held', cur, redis.call('PTTL', KEYS[1])) end
if sub then
  local m = redis.call('HGET', KEYS[2], 'owner')
  if m then return refused('model', m, redis.call('PTTL', KEYS[2])) end
else
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
  if #last > 0 then return refused('intents', last[1], tonumber(last[2]) - now) end
end
-- Fencing token: one counter per model, never lower than the server's clock in microseconds, so
-- that tokens keep growing even after a restart that lost the counter.
local floor = tonumber(t[1]) * 1000000 + tonumber(t[2])
local token = math.max(tonumber(redis.call('GET', KEYS[4]) or '0') + 1, floor)
local ts = string.format('%.0f', token)
redis.call('SET', KEYS[4], ts)
redis.call('HSET', KEYS[1], 'owner', owner, 'token', ts, 'level', level, 'since', now)
redis.call('PEXPIRE', KEYS[1], lease)
return granted(token, 'granted')
)lua";

constexpr const char* kRelease = R"lua(
local owner, member, wake, drop = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local now = now_ms()
if drop ~= '' then
  redis.call('ZREM', KEYS[3], drop)
  redis.call('DEL', wake .. drop)
end
if redis.call('HGET', KEYS[1], 'owner') ~= owner then return 0 end
redis.call('DEL', KEYS[1])
if member ~= '' then redis.call('ZREM', KEYS[2], member) end
wake_all(KEYS[3], wake, now)
return 1
)lua";

constexpr const char* kRenew = R"lua(
local owner, lease, level, member = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
if redis.call('HGET', KEYS[1], 'owner') ~= owner then return 0 end
redis.call('PEXPIRE', KEYS[1], lease)
if level ~= 'model' then
  redis.call('ZADD', KEYS[2], now_ms() + lease, member)
  extend(KEYS[2], lease)
end
return 1
)lua";

constexpr const char* kInspect = R"lua(
local prefix = ARGV[1]
local now = now_ms()
local function info(key, name)
  local owner = redis.call('HGET', key, 'owner')
  if not owner then return nil end
  return {name, owner, redis.call('HGET', key, 'token') or '0', redis.call('PTTL', key)}
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
local subs = {}
local marks = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = 1, #marks, 2 do
  local li = info(prefix .. marks[i], marks[i])
  if not li then li = {marks[i], '', '0', tonumber(marks[i + 1]) - now} end
  table.insert(subs, li)
end
return {redis.call('GET', KEYS[3]) or '0', redis.call('ZCARD', KEYS[4]),
        info(KEYS[1], 'model') or {}, subs}
)lua";

constexpr const char* kBreak = R"lua(
local prefix, mode, name, wake = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local now = now_ms()
local removed = {}
local function kill(key, n)
  local owner = redis.call('HGET', key, 'owner')
  if owner then
    table.insert(removed, {n, owner, redis.call('HGET', key, 'token') or '0',
                           redis.call('PTTL', key)})
  end
  redis.call('DEL', key)
end
if mode == 'all' then
  kill(KEYS[1], 'model')
  for _, m in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do kill(prefix .. m, m) end
  redis.call('DEL', KEYS[2])
elseif name == 'model' then
  kill(KEYS[1], 'model')
else
  kill(prefix .. name, name)
  redis.call('ZREM', KEYS[2], name)
end
wake_all(KEYS[3], wake, now)
return removed
)lua";

}  // namespace

const redis::Script& AcquireScript() {
  static const redis::Script s(std::string(kPrelude) + kAcquire);
  return s;
}
const redis::Script& ReleaseScript() {
  static const redis::Script s(std::string(kPrelude) + kRelease);
  return s;
}
const redis::Script& RenewScript() {
  static const redis::Script s(std::string(kPrelude) + kRenew);
  return s;
}
const redis::Script& InspectScript() {
  static const redis::Script s(std::string(kPrelude) + kInspect);
  return s;
}
const redis::Script& BreakScript() {
  static const redis::Script s(std::string(kPrelude) + kBreak);
  return s;
}

}  // namespace dais::locks::internal
