#include "cluster/events.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <ctime>

#include "common/json.h"
#include "fmt/format.h"

namespace dais::cluster {

std::string ClusterEvent::ToJson() const {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("time_ms");
  w.Int64(time_ms);
  for (const auto& [key, value] : {std::pair<const char*, const std::string*>{"kind", &kind},
                                   {"deployment", &deployment},
                                   {"node", &node},
                                   {"message", &message},
                                   {"scheduler", &scheduler}}) {
    w.Key(key);
    w.String(value->c_str(), static_cast<rapidjson::SizeType>(value->size()));
  }
  w.EndObject();
  return sb.GetString();
}

std::string ClusterEvent::Key(int64_t sequence) const {
  return fmt::format("{}{:013d}-{}-{:06d}", kEventsPrefix, time_ms, scheduler, sequence);
}

StatusOr<ClusterEvent> ClusterEventFromJson(const std::string& json) {
  rapidjson::Document d;
  RETURN_IF_ERROR(json::ParseJson(json, &d));
  if (!d.IsObject() || !d.HasMember("time_ms") || !d["time_ms"].IsInt64()) {
    return InvalidArgument("event: 'time_ms' is missing or not an integer");
  }
  ClusterEvent e;
  e.time_ms = d["time_ms"].GetInt64();
  for (const auto& [key, value] : {std::pair<const char*, std::string*>{"kind", &e.kind},
                                   {"deployment", &e.deployment},
                                   {"node", &e.node},
                                   {"message", &e.message},
                                   {"scheduler", &e.scheduler}}) {
    if (d.HasMember(key) && d[key].IsString()) *value = d[key].GetString();
  }
  return e;
}

std::string FormatTimeMs(int64_t time_ms) {
  const std::time_t secs = static_cast<std::time_t>(time_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return fmt::format("{}.{:03d}", buf, time_ms % 1000);
}

}  // namespace dais::cluster
