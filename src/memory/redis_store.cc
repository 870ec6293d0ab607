#include "memory/redis_store.h"

#include <charconv>
#include <chrono>

#include "common/logging.h"

namespace dais::memory {
namespace {

constexpr auto kTimeout = std::chrono::seconds(10);
constexpr const char* kSpecsKey = "dais:mem:collections";

// KEYS: points, seq, log. ARGV: log max length, then id, value, id, value, ... Returns the
// write's sequence. The log gets the write in entries of at most 1,000 points (Lua's unpack
// has a stack limit), all with its sequence.
const redis::Script& UpsertScript() {
  static const redis::Script s(R"lua(
local seq = redis.call('INCR', KEYS[2])
local prefix = seq .. ':'
local entry = {'_op', 'u', '_seq', seq}
for i = 2, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], prefix .. ARGV[i + 1])
  entry[#entry + 1] = ARGV[i]
  entry[#entry + 1] = ARGV[i + 1]
  if #entry >= 2004 or i + 1 >= #ARGV then
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[1], '*', unpack(entry))
    entry = {'_op', 'u', '_seq', seq}
  end
end
return seq
)lua");
  return s;
}

// KEYS: points, seq, log. ARGV: log max length, then ids. Returns the write's sequence.
const redis::Script& DeleteScript() {
  static const redis::Script s(R"lua(
local seq = redis.call('INCR', KEYS[2])
local entry = {'_op', 'd', '_seq', seq}
for i = 2, #ARGV do
  redis.call('HDEL', KEYS[1], ARGV[i])
  entry[#entry + 1] = ARGV[i]
  entry[#entry + 1] = ''
  if #entry >= 2004 or i >= #ARGV then
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[1], '*', unpack(entry))
    entry = {'_op', 'd', '_seq', seq}
  end
end
return seq
)lua");
  return s;
}

// KEYS: points. ARGV: now_ms, ids. Removes the ids whose stored expiry passed (a point written
// again since is kept).
const redis::Script& ForgetScript() {
  static const redis::Script s(R"lua(
local now = tonumber(ARGV[1])
local n = 0
for i = 2, #ARGV do
  local v = redis.call('HGET', KEYS[1], ARGV[i])
  if v then
    local expires = tonumber(string.match(v, '^%d+:(%d+):'))
    if expires and expires > 0 and expires <= now then
      redis.call('HDEL', KEYS[1], ARGV[i])
      n = n + 1
    end
  end
end
return n
)lua");
  return s;
}

std::string TenantPart(const CollectionSpec& spec) {
  return spec.tenant.empty() ? "_" : spec.tenant;
}

void AnswerSeq(StatusOr<redis::Reply> r, const std::string& what,
               const MemoryStore::SeqCallback& done) {
  if (!r.ok()) return done(r.status());
  if (r->is_error()) return done(Unavailable(what + ": " + r->str));
  if (r->type != redis::Reply::Type::kInteger) return done(Internal(what + ": not an integer"));
  done(static_cast<uint64_t>(r->integer));
}

Status ReplyError(const StatusOr<redis::Reply>& r, const std::string& what) {
  if (!r.ok()) return Unavailable(what + ": " + r.status().message());
  if (r->is_error()) return Unavailable(what + ": " + r->str);
  return OkStatus();
}

}  // namespace

std::string RedisStore::ShardKey(const CollectionSpec& spec, int shard, const char* what) {
  return "dais:" + TenantPart(spec) + ":mem:{" + spec.name + "/" + std::to_string(shard) +
         "}:" + what;
}

void RedisStore::Upsert(const CollectionSpec& spec, int shard, const std::vector<Point>& points,
                        int64_t expires_ms, Deadline deadline, SeqCallback done) {
  std::vector<std::string> args{std::to_string(kLogMaxLen)};
  args.reserve(points.size() * 2 + 1);
  for (const Point& p : points) {
    args.push_back(p.id);
    args.push_back(EncodeStored(p, expires_ms));
  }
  client_->Eval(
      UpsertScript(),
      {ShardKey(spec, shard, "points"), ShardKey(spec, shard, "seq"), ShardKey(spec, shard, "log")},
      std::move(args), deadline,
      [done = std::move(done), name = spec.name](StatusOr<redis::Reply> r) {
        AnswerSeq(std::move(r), "storing points of " + name + " in Redis", done);
      });
}

void RedisStore::Delete(const CollectionSpec& spec, int shard, const std::vector<std::string>& ids,
                        Deadline deadline, SeqCallback done) {
  std::vector<std::string> args{std::to_string(kLogMaxLen)};
  args.insert(args.end(), ids.begin(), ids.end());
  client_->Eval(
      DeleteScript(),
      {ShardKey(spec, shard, "points"), ShardKey(spec, shard, "seq"), ShardKey(spec, shard, "log")},
      std::move(args), deadline,
      [done = std::move(done), name = spec.name](StatusOr<redis::Reply> r) {
        AnswerSeq(std::move(r), "deleting points of " + name + " in Redis", done);
      });
}

Status RedisStore::Load(const CollectionSpec& spec, int shard,
                        const std::function<void(StoredPoint)>& each) {
  const std::string key = ShardKey(spec, shard, "points");
  std::string cursor = "0";
  do {
    auto r = client_->Run({key, {"HSCAN", key, cursor, "COUNT", "1000"}}, kTimeout);
    RETURN_IF_ERROR(ReplyError(r, "HSCAN " + key));
    if (r->elements.size() != 2) return Internal("HSCAN " + key + ": unexpected reply");
    cursor = r->elements[0].str;
    const auto& kv = r->elements[1].elements;
    for (size_t i = 0; i + 1 < kv.size(); i += 2) {
      std::string_view value = kv[i + 1].str;
      uint64_t seq = 0;
      const size_t colon = value.find(':');
      if (colon == std::string_view::npos ||
          std::from_chars(value.data(), value.data() + colon, seq).ec != std::errc()) {
        LOG_WARNING("{}: point {} has no sequence; skipped", key, kv[i].str);
        continue;
      }
      auto p = DecodeStored(kv[i].str, value.substr(colon + 1), seq, spec);
      if (!p.ok()) {
        LOG_WARNING("{}: {}; skipped", key, p.status().message());
        continue;
      }
      each(std::move(*p));
    }
  } while (cursor != "0");
  return OkStatus();
}

void RedisStore::Forget(const CollectionSpec& spec, int shard,
                        const std::vector<std::string>& ids) {
  std::vector<std::string> args{
      std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count())};
  args.insert(args.end(), ids.begin(), ids.end());
  client_->Eval(ForgetScript(), {ShardKey(spec, shard, "points")}, std::move(args),
                std::chrono::steady_clock::now() + kTimeout, [](StatusOr<redis::Reply> r) {
                  if (Status s = ReplyError(r, "removing expired points"); !s.ok()) {
                    LOG_WARNING("{}", s.message());
                  }
                });
}

namespace {

// An XRANGE / XREVRANGE entry of a shard's log.
MemoryStore::LogEntry ParseLogEntry(const redis::Reply& e, const std::string& key) {
  MemoryStore::LogEntry entry;
  entry.position = e.elements[0].str;
  const auto& f = e.elements[1].elements;
  if (f.size() < 4 || f[0].str != "_op" || f[2].str != "_seq" ||
      std::from_chars(f[3].str.data(), f[3].str.data() + f[3].str.size(), entry.seq).ec !=
          std::errc()) {
    LOG_WARNING("{}: entry {} is not a write; skipped", key, entry.position);
    entry.seq = 0;
    return entry;
  }
  entry.upsert = f[1].str == "u";
  for (size_t i = 4; i + 1 < f.size(); i += 2) entry.points.emplace_back(f[i].str, f[i + 1].str);
  return entry;
}

bool IsEntry(const redis::Reply& e) {
  return e.elements.size() == 2 && e.elements[1].type == redis::Reply::Type::kArray;
}

}  // namespace

StatusOr<MemoryStore::LogEntry> RedisStore::LogEnd(const CollectionSpec& spec, int shard) {
  const std::string key = ShardKey(spec, shard, "log");
  auto r = client_->Run({key, {"XREVRANGE", key, "+", "-", "COUNT", "1"}}, kTimeout);
  RETURN_IF_ERROR(ReplyError(r, "XREVRANGE " + key));
  if (r->elements.empty()) return LogEntry{"0-0", true, 0, {}};
  if (!IsEntry(r->elements[0])) return Internal("XREVRANGE " + key + ": unexpected reply");
  LogEntry last = ParseLogEntry(r->elements[0], key);
  last.points.clear();
  return last;
}

StatusOr<std::vector<MemoryStore::LogEntry>> RedisStore::ReadLog(const CollectionSpec& spec,
                                                                 int shard,
                                                                 const std::string& position,
                                                                 int max) {
  const std::string key = ShardKey(spec, shard, "log");
  auto r = client_->Run({key, {"XRANGE", key, "(" + position, "+", "COUNT", std::to_string(max)}},
                        kTimeout);
  RETURN_IF_ERROR(ReplyError(r, "XRANGE " + key));
  std::vector<LogEntry> out;
  for (const auto& e : r->elements) {
    if (!IsEntry(e)) return Internal("XRANGE " + key + ": unexpected reply");
    out.push_back(ParseLogEntry(e, key));
  }
  return out;
}

Status RedisStore::SaveSpec(const CollectionSpec& spec) {
  auto r =
      client_->Run({kSpecsKey, {"HSET", kSpecsKey, spec.name, CollectionSpecJson(spec)}}, kTimeout);
  return ReplyError(r, "saving collection " + spec.name + " in Redis");
}

Status RedisStore::Drop(const CollectionSpec& spec) {
  for (int i = 0; i < spec.shards; ++i) {
    for (const char* what : {"points", "seq", "log"}) {
      const std::string key = ShardKey(spec, i, what);
      RETURN_IF_ERROR(ReplyError(client_->Run({key, {"UNLINK", key}}, kTimeout), "UNLINK " + key));
    }
  }
  return ReplyError(client_->Run({kSpecsKey, {"HDEL", kSpecsKey, spec.name}}, kTimeout),
                    "dropping collection " + spec.name + " in Redis");
}

StatusOr<std::vector<CollectionSpecPtr>> RedisStore::Specs() {
  auto r = client_->Run({kSpecsKey, {"HGETALL", kSpecsKey}}, kTimeout);
  RETURN_IF_ERROR(ReplyError(r, "HGETALL " + std::string(kSpecsKey)));
  std::vector<CollectionSpecPtr> out;
  for (size_t i = 0; i + 1 < r->elements.size(); i += 2) {
    auto spec = ParseCollectionSpec(r->elements[i + 1].str);
    if (!spec.ok()) {
      LOG_WARNING("collection {} in Redis: {}; skipped", r->elements[i].str,
                  spec.status().message());
      continue;
    }
    out.push_back(*spec);
  }
  return out;
}

}  // namespace dais::memory
