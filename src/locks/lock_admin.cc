// Operator functions: List, Inspect, Break (declared in lock_service.h).
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "common/logging.h"
#include "locks/lock_scripts.h"
#include "locks/lock_service.h"

namespace dais::locks {

using std::chrono::milliseconds;

namespace {

constexpr milliseconds kAdminTimeout{2000};

int64_t ToInt(const redis::Reply& r) {
  if (r.type == redis::Reply::Type::kInteger) return r.integer;
  try {
    return std::stoll(r.str);
  } catch (...) {
    return 0;
  }
}

// {name, owner, token, pttl} → LockInfo.
LockInfo ParseLock(std::string_view model, const redis::Reply& r) {
  LockInfo info;
  info.model = std::string(model);
  if (r.elements.size() < 4) return info;
  info.name = r.elements[0].str;
  info.level = internal::LevelOfName(info.name);
  info.key = internal::ModelPrefix(model) + info.name;
  info.owner = r.elements[1].str;
  info.token = ToInt(r.elements[2]);
  info.ttl = milliseconds(ToInt(r.elements[3]));
  return info;
}

Status Check(const StatusOr<redis::Reply>& r, std::string_view what) {
  if (!r.ok()) return r.status().WithPrefix(what);
  if (r->is_error()) return Internal(std::string(what) + ": " + r->str);
  if (r->type != redis::Reply::Type::kArray) {
    return Internal(std::string(what) + ": unexpected reply " + redis::ReplyToString(*r));
  }
  return OkStatus();
}

Status ValidModel(std::string_view model) {
  return ValidateResource(LockResource::Model(std::string(model)));
}

StatusOr<std::vector<LockInfo>> RunBreak(redis::Client* client, std::string_view model,
                                         const std::string& mode, const std::string& name) {
  RETURN_IF_ERROR(ValidModel(model));
  const internal::LockKeys k = internal::KeysFor(LockResource::Model(std::string(model)));
  StatusOr<redis::Reply> r =
      client->RunEval(internal::BreakScript(), {k.model, k.intents, k.waiters},
                      {internal::ModelPrefix(model), mode, name, k.wake}, kAdminTimeout);
  RETURN_IF_ERROR(Check(r, "lock break"));
  std::vector<LockInfo> removed;
  for (const redis::Reply& e : r->elements) removed.push_back(ParseLock(model, e));
  for (const LockInfo& l : removed) {
    LOG_WARNING("lock break: removed {}/{} (owner {}, token {}, {} ms left)", model, l.name,
                l.owner, l.token, l.ttl.count());
  }
  if (removed.empty()) LOG_WARNING("lock break: {} {}: nothing held", model, name);
  return removed;
}

}  // namespace

StatusOr<ModelLockState> Inspect(redis::Client* client, std::string_view model) {
  RETURN_IF_ERROR(ValidModel(model));
  const internal::LockKeys k = internal::KeysFor(LockResource::Model(std::string(model)));
  StatusOr<redis::Reply> r =
      client->RunEval(internal::InspectScript(), {k.model, k.intents, k.fence, k.waiters},
                      {internal::ModelPrefix(model)}, kAdminTimeout);
  RETURN_IF_ERROR(Check(r, "lock inspect"));
  if (r->elements.size() < 4) return Internal("lock inspect: short reply");
  ModelLockState state;
  state.model = std::string(model);
  state.fence = ToInt(r->elements[0]);
  state.waiters = ToInt(r->elements[1]);
  if (!r->elements[2].elements.empty()) state.model_lock = ParseLock(model, r->elements[2]);
  for (const redis::Reply& e : r->elements[3].elements) {
    LockInfo info = ParseLock(model, e);
    if (info.owner.empty()) {
      state.stale_intentions.push_back(info.name);
    } else {
      state.sub_locks.push_back(std::move(info));
    }
  }
  return state;
}

StatusOr<std::vector<LockInfo>> List(redis::Client* client, std::string_view model_pattern) {
  const std::vector<std::string> masters = client->Masters();
  if (masters.empty()) return Unavailable("lock list: redis not connected");
  const std::string match = fmt::format("dais:lock:{{{}}}:fence", model_pattern);
  std::set<std::string> models;
  for (const std::string& node : masters) {
    std::string cursor = "0";
    do {
      StatusOr<redis::Reply> r =
          client->RunOn(node, {"SCAN", cursor, "MATCH", match, "COUNT", "1000"}, kAdminTimeout);
      RETURN_IF_ERROR(Check(r, "lock list: SCAN " + node));
      if (r->elements.size() != 2) return Internal("lock list: bad SCAN reply");
      cursor = r->elements[0].str;
      for (const redis::Reply& key : r->elements[1].elements) {
        // dais:lock:{model}:fence
        const std::string& s = key.str;
        const size_t open = s.find('{'), close = s.rfind("}:fence");
        if (open != std::string::npos && close != std::string::npos && close > open) {
          models.insert(s.substr(open + 1, close - open - 1));
        }
      }
    } while (cursor != "0");
  }
  std::vector<LockInfo> out;
  for (const std::string& model : models) {
    StatusOr<ModelLockState> state = Inspect(client, model);
    if (!state.ok()) {
      if (state.status().code() == StatusCode::kInvalidArgument) continue;  // not our naming
      return state.status();
    }
    if (state->model_lock) out.push_back(*state->model_lock);
    for (LockInfo& l : state->sub_locks) out.push_back(std::move(l));
  }
  std::sort(out.begin(), out.end(), [](const LockInfo& a, const LockInfo& b) {
    return std::tie(a.model, a.name) < std::tie(b.model, b.name);
  });
  return out;
}

StatusOr<std::vector<LockInfo>> Break(redis::Client* client, const LockResource& resource) {
  RETURN_IF_ERROR(ValidateResource(resource));
  return RunBreak(client, resource.model, "one", resource.Name());
}

StatusOr<std::vector<LockInfo>> BreakModel(redis::Client* client, std::string_view model) {
  return RunBreak(client, model, "all", "");
}

}  // namespace dais::locks
