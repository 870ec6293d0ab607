#include "txn/recent_items.h"

#include <chrono>

#include "common/json.h"
#include "common/logging.h"
#include "features/spec/feature_codec.h"
#include "features/store/invalidation.h"
#include "features/store/online_tier.h"
#include "redis/client.h"
#include "redis/script.h"
#include "txn/txn_metrics.h"

namespace dais::txn {

namespace {

// KEYS: record, applied marker. ARGV: field, item bytes, default list, _ts bytes, marker TTL ms,
// record TTL ms (0: none).
const redis::Script& ApplyScript() {
  static const redis::Script s(R"lua(
local t = redis.call('TYPE', KEYS[1]).ok
if t ~= 'hash' and t ~= 'none' then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is a ' .. t .. ', not a feature record')
end
if not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[5]) then return 0 end
local w = #ARGV[2]
local old = redis.call('HGET', KEYS[1], ARGV[1])
if (not old) or #old ~= #ARGV[3] then old = ARGV[3] end
local out = ARGV[2]
for i = 1, #old, w do
  local c = string.sub(old, i, i + w - 1)
  if c ~= ARGV[2] and #out < #old then out = out .. c end
end
redis.call('HSET', KEYS[1], ARGV[1], out, '_ts', ARGV[4])
if tonumber(ARGV[6]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[6]) end
return 1
)lua");
  return s;
}

std::string Int64Bytes(int64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff);
  return out;
}

}  // namespace

RecentItemsUpdater::RecentItemsUpdater(redis::Client* client, features::FeatureSpecPtr spec,
                                       RecentItemsOptions options)
    : client_(client),
      spec_(std::move(spec)),
      options_(std::move(options)),
      stream_(streams::MakeRedisEventStream(client, 0)) {}

RecentItemsUpdater::~RecentItemsUpdater() { Stop(); }

Status RecentItemsUpdater::Start() {
  ASSIGN_OR_RETURN(ref_, spec_->Resolve(options_.feature));
  const auto& def = spec_->groups[ref_.group].features[ref_.feature];
  if (def.dtype != DataType::kInt64 && def.dtype != DataType::kInt32) {
    return InvalidArgument(options_.feature + ": must be INT64 or INT32 (item ids)");
  }
  RETURN_IF_ERROR(stream_->EnsureGroup(options_.stream, options_.group));
  thread_ = std::thread([this] { Loop(); });
  return OkStatus();
}

void RecentItemsUpdater::Stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

StatusOr<std::vector<std::string>> RecentItemsUpdater::Apply(
    const std::vector<streams::Entry>& entries) {
  auto& consumed = TxnMetrics::Get().consumed;
  const features::GroupSpec& group = spec_->groups[ref_.group];
  const features::FeatureDef& def = group.features[ref_.feature];
  const features::EntitySpec* entity = spec_->FindEntity(group.entity);
  std::vector<std::string> ack, written;
  for (const streams::Entry& e : entries) {
    rapidjson::Document doc;
    std::string event_id = e.Field("event_id");
    Status parsed = json::ParseJson(e.Field("payload"), &doc);
    auto text = [&](const std::string& name) -> std::string {
      if (!parsed.ok() || !doc.IsObject() || !doc.HasMember(name.c_str())) return "";
      const auto& v = doc[name.c_str()];
      return v.IsString() ? std::string(v.GetString(), v.GetStringLength()) : "";
    };
    auto id = features::CanonicalEntityId(entity->key_type, text(options_.entity_field));
    std::string item_text = text(options_.item_field);
    std::string item;
    int64_t item_id = 0;
    bool ok = id.ok() && !event_id.empty() && !item_text.empty();
    if (ok) {
      try {
        item_id = std::stoll(item_text);
      } catch (...) {
        ok = false;
      }
    }
    if (ok) ok = features::AppendElement(def.dtype, features::Scalar::Int(item_id), &item).ok();
    if (!ok) {
      LOG_WARNING("recent items: entry {} ({}) has no usable {} / {}: skipped", e.entry_id,
                  event_id, options_.entity_field, options_.item_field);
      consumed.Get({options_.group, "failed"}).Increment();
      ack.push_back(e.entry_id);
      continue;
    }
    std::string key = features::RecordKey(*spec_, group, *id);
    // The marker shares the record's hash tag ({entity=id}): same Redis Cluster slot.
    std::string marker = key + ":applied:" + event_id;
    int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    auto r =
        client_->RunEval(ApplyScript(), {key, marker},
                         {def.name, item, def.default_bytes, Int64Bytes(now_us),
                          std::to_string(options_.marker_ttl_ms), std::to_string(group.ttl_ms)});
    if (!r.ok() || r->is_error()) {
      consumed.Get({options_.group, "failed"}).Increment();
      Publish(written);  // what was applied before the failure
      return Unavailable("recent items: " + (r.ok() ? r->str : r.status().message()));
    }
    consumed.Get({options_.group, r->integer == 1 ? "applied" : "duplicate"}).Increment();
    ack.push_back(e.entry_id);
    written.push_back(std::move(key));
  }
  if (!written.empty()) {
    std::vector<std::string_view> views(written.begin(), written.end());
    (void)client_->Run({"",
                        {"PUBLISH", std::string(features::kInvalidationChannel),
                         features::EncodeInvalidation(views)}});
  }
  return ack;
}

void RecentItemsUpdater::Publish(const std::vector<std::string>& keys) {
  if (keys.empty()) return;
  std::vector<std::string_view> views(keys.begin(), keys.end());
  (void)client_->Run({"",
                      {"PUBLISH", std::string(features::kInvalidationChannel),
                       features::EncodeInvalidation(views)}});
}

void RecentItemsUpdater::Loop() {
  bool pending = true;  // first the entries delivered to this consumer before a restart
  auto last_claim = std::chrono::steady_clock::now();
  while (!stopping_) {
    StatusOr<std::vector<streams::Entry>> got = std::vector<streams::Entry>{};
    auto now = std::chrono::steady_clock::now();
    if (now - last_claim > std::chrono::milliseconds(std::max(1000, options_.claim_idle_ms / 2))) {
      last_claim = now;
      got = stream_->Claim(options_.stream, options_.group, options_.consumer,
                           options_.claim_idle_ms, 100);
    } else {
      got = stream_->Read(options_.stream, options_.group, options_.consumer, 100, 500, pending);
      if (got.ok() && got->empty()) pending = false;
    }
    if (!got.ok()) {
      LOG_WARNING("recent items: {}", got.status().message());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    if (got->empty()) continue;
    auto ack = Apply(*got);
    if (!ack.ok()) {
      LOG_WARNING("{}", ack.status().message());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      pending = true;
      continue;
    }
    if (Status st = stream_->Ack(options_.stream, options_.group, *ack); !st.ok()) {
      LOG_WARNING("recent items: {}", st.message());
    }
  }
}

}  // namespace dais::txn
