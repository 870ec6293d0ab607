#include "features/store/redis_tier.h"

#include <atomic>
#include <cstring>
#include <random>

#include "fmt/format.h"

namespace dais::features {

namespace {

constexpr const char* kWriteLua =
    R"(-- dais feature write: KEYS[1] record key; ARGV[1] event time (8-byte LE int64 us);
-- ARGV[2] TTL in ms (0: none); ARGV[3..] field, value pairs. Returns 1 applied, 0 older.
local cur = redis.call('HGET', KEYS[1], '_ts')
if cur and string.len(cur) == 8 and struct.unpack('<i8', cur) > struct.unpack('<i8', ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[1], '_ts', ARGV[1], unpack(ARGV, 3))
local ttl = tonumber(ARGV[2])
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) else redis.call('PERSIST', KEYS[1]) end
return 1
)";

std::string Int64Le(int64_t v) {
  std::string s(8, '\0');
  std::memcpy(s.data(), &v, 8);
  return s;
}

}  // namespace

RedisTier::RedisTier(redis::Client* client) : client_(client) {}

const redis::Script& RedisTier::WriteScript() {
  static const redis::Script kScript(kWriteLua);
  return kScript;
}

redis::KeyedCommand RedisTier::ReadCommand(const TierRead& read) {
  // HMGET key _ts <features...>, encoded straight into one string (no vector of arguments).
  redis::KeyedCommand c;
  c.key = read.key;
  const auto& features = read.group->features;
  size_t bytes = 32 + 2 * read.key.size();
  for (const auto& f : features) bytes += f.name.size() + 16;
  c.encoded.reserve(bytes);
  redis::AppendArrayHeader(3 + features.size(), &c.encoded);
  redis::AppendBulk("HMGET", &c.encoded);
  redis::AppendBulk(read.key, &c.encoded);
  redis::AppendBulk("_ts", &c.encoded);
  for (const auto& f : features) redis::AppendBulk(f.name, &c.encoded);
  return c;
}

std::vector<std::string> RedisTier::WriteArgs(const TierWrite& w, uint64_t random) {
  std::vector<std::string> args;
  args.reserve(2 + 2 * w.group->features.size());
  args.push_back(Int64Le(w.event_time_us));
  int64_t ttl = w.group->ttl_ms;
  if (ttl > 0 && w.group->ttl_jitter > 0) {
    double u = static_cast<double>(random >> 11) * 0x1.0p-53;  // [0, 1)
    ttl += static_cast<int64_t>(static_cast<double>(ttl) * w.group->ttl_jitter * u);
  }
  args.push_back(std::to_string(ttl));
  for (size_t i = 0; i < w.group->features.size(); ++i) {
    args.push_back(w.group->features[i].name);
    args.push_back(w.payload.substr(w.group->offsets[i], w.group->features[i].byte_size));
  }
  return args;
}

StatusOr<TierRecordPtr> RedisTier::DecodeRecord(const TierRead& read, const redis::Reply& reply) {
  using redis::Reply;
  if (reply.type == Reply::Type::kError) {
    return Internal(fmt::format("redis error for {}: {}", read.key, reply.str));
  }
  const GroupSpec& g = *read.group;
  if (reply.type != Reply::Type::kArray || reply.elements.size() != g.features.size() + 1) {
    return Internal(fmt::format("unexpected HMGET reply for {}", read.key));
  }
  auto rec = std::make_shared<CachedRecord>();
  const Reply& ts = reply.elements[0];
  if (ts.type == Reply::Type::kNil) return rec;  // not found
  if (ts.type != Reply::Type::kBulk || ts.str.size() != 8) {
    return Internal(fmt::format("{}: field _ts is not an 8-byte event time", read.key));
  }
  rec->found = true;
  std::memcpy(&rec->event_time_us, ts.str.data(), 8);
  rec->payload.reserve(g.record_bytes);
  for (size_t i = 0; i < g.features.size(); ++i) {
    const Reply& v = reply.elements[i + 1];
    if (v.type == Reply::Type::kNil) {
      // Written before this feature existed in the same schema version: serve its default.
      rec->payload += g.features[i].default_bytes;
      continue;
    }
    if (v.type != Reply::Type::kBulk || v.str.size() != g.features[i].byte_size) {
      return Internal(
          fmt::format("{}: feature {} holds {} bytes, the spec says {} (written "
                      "under another layout without a version change?)",
                      read.key, g.features[i].name, v.str.size(), g.features[i].byte_size));
    }
    rec->payload += v.str;
  }
  return rec;
}

void RedisTier::Read(std::vector<TierRead> reads, Deadline deadline, ReadCallback cb) {
  std::vector<redis::KeyedCommand> cmds;
  cmds.reserve(reads.size());
  for (const auto& r : reads) cmds.push_back(ReadCommand(r));
  client_->ExecuteBatch(std::move(cmds), deadline,
                        [reads = std::move(reads),
                         cb = std::move(cb)](std::vector<StatusOr<redis::Reply>> replies) mutable {
                          std::vector<StatusOr<TierRecordPtr>> out;
                          out.reserve(reads.size());
                          for (size_t i = 0; i < reads.size(); ++i) {
                            if (!replies[i].ok()) {
                              out.emplace_back(replies[i].status());
                            } else {
                              out.push_back(DecodeRecord(reads[i], *replies[i]));
                            }
                          }
                          cb(std::move(reads), std::move(out));
                        });
}

void RedisTier::Write(std::vector<TierWrite> writes, Deadline deadline, WriteCallback cb) {
  struct State {
    std::vector<StatusOr<bool>> out;
    std::atomic<size_t> pending;
    WriteCallback cb;
  };
  if (writes.empty()) return cb({});
  auto st = std::make_shared<State>();
  st->out.assign(writes.size(), StatusOr<bool>(false));
  st->pending = writes.size();
  st->cb = std::move(cb);
  thread_local std::mt19937_64 rng(std::random_device{}());
  for (size_t i = 0; i < writes.size(); ++i) {
    client_->Eval(WriteScript(), {writes[i].key}, WriteArgs(writes[i], rng()), deadline,
                  [st, i](StatusOr<redis::Reply> r) {
                    if (!r.ok()) {
                      st->out[i] = r.status();
                    } else if (r->type == redis::Reply::Type::kError) {
                      st->out[i] = Internal("redis: " + r->str);
                    } else {
                      st->out[i] = r->type == redis::Reply::Type::kInteger && r->integer == 1;
                    }
                    if (st->pending.fetch_sub(1) == 1) st->cb(std::move(st->out));
                  });
  }
}

bool RedisTier::Healthy() const { return client_->Reachable(); }

}  // namespace dais::features
