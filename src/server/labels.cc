#include "server/labels.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cmath>

#include "common/json.h"

namespace dais::server {
namespace {

constexpr size_t kMaxIdBytes = 256;
constexpr size_t kMaxEntityIds = 16;
constexpr size_t kMaxValues = 64;

Status Bad(const std::string& where, const std::string& what) {
  return InvalidArgument(where + ": " + what);
}

bool NonEmptyString(const rapidjson::Value& v, size_t max_bytes) {
  return v.IsString() && v.GetStringLength() > 0 && v.GetStringLength() <= max_bytes;
}

StatusOr<double> LabelValue(const rapidjson::Value& v, const std::string& where) {
  if (v.IsBool()) return v.GetBool() ? 1.0 : 0.0;
  if (v.IsNumber() && std::isfinite(v.GetDouble())) return v.GetDouble();
  return Bad(where, "a finite number or a boolean is needed");
}

StatusOr<Label> ParseLabel(const rapidjson::Value& v, const std::string& at, int64_t now_ms) {
  if (!v.IsObject()) return Bad(at, "a label object is needed");
  Label l;
  for (const auto& m : v.GetObject()) {
    const std::string key(m.name.GetString(), m.name.GetStringLength());
    const std::string where = at + "." + key;
    const rapidjson::Value& x = m.value;
    if (key == "request_id") {
      if (!NonEmptyString(x, kMaxIdBytes)) return Bad(where, "a non-empty string is needed");
      l.request_id.assign(x.GetString(), x.GetStringLength());
    } else if (key == "entity_ids") {
      if (!x.IsArray() || x.Empty() || x.Size() > kMaxEntityIds) {
        return Bad(where, "an array of 1 to " + std::to_string(kMaxEntityIds) + " ids is needed");
      }
      for (const auto& id : x.GetArray()) {
        if (!NonEmptyString(id, kMaxIdBytes)) return Bad(where, "every id must be a string");
        l.entity_ids.emplace_back(id.GetString(), id.GetStringLength());
      }
    } else if (key == "time_ms") {
      if (!x.IsInt64() || x.GetInt64() <= 0) {
        return Bad(where, "a positive integer (ms since the epoch) is needed");
      }
      l.time_ms = x.GetInt64();
    } else if (key == "label") {
      if (!l.values.empty()) return Bad(where, "give \"label\" or \"labels\", not both");
      ASSIGN_OR_RETURN(double value, LabelValue(x, where));
      l.values.emplace_back("label", value);
    } else if (key == "labels") {
      if (!l.values.empty()) return Bad(where, "give \"label\" or \"labels\", not both");
      if (!x.IsObject() || x.MemberCount() == 0 || x.MemberCount() > kMaxValues) {
        return Bad(where,
                   "an object of 1 to " + std::to_string(kMaxValues) + " named values is needed");
      }
      for (const auto& n : x.GetObject()) {
        std::string name(n.name.GetString(), n.name.GetStringLength());
        if (name.empty() || name.size() > kMaxIdBytes) return Bad(where, "an empty name");
        ASSIGN_OR_RETURN(double value, LabelValue(n.value, where + "." + name));
        l.values.emplace_back(std::move(name), value);
      }
    } else if (key == "source") {
      if (!NonEmptyString(x, kMaxIdBytes)) return Bad(where, "a non-empty string is needed");
      l.source.assign(x.GetString(), x.GetStringLength());
    } else {
      return Bad(where,
                 "unknown field (expected request_id, entity_ids, time_ms, label, "
                 "labels, source)");
    }
  }
  RETURN_IF_ERROR(CheckLabel(at, now_ms, &l));
  return l;
}

}  // namespace

Status CheckLabel(const std::string& at, int64_t now_ms, Label* l) {
  if (l->request_id.size() > kMaxIdBytes) return Bad(at + ".request_id", "longer than 256 bytes");
  if (l->entity_ids.size() > kMaxEntityIds) {
    return Bad(at + ".entity_ids",
               "an array of 1 to " + std::to_string(kMaxEntityIds) + " ids is needed");
  }
  for (const auto& id : l->entity_ids) {
    if (id.empty() || id.size() > kMaxIdBytes) {
      return Bad(at + ".entity_ids", "every id must be a string");
    }
  }
  if (l->request_id.empty() && l->entity_ids.empty()) {
    return Bad(at, "request_id or entity_ids is needed (what the label judges)");
  }
  if (l->values.empty()) return Bad(at, "label or labels is needed");
  if (l->values.size() > kMaxValues) {
    return Bad(at + ".labels",
               "an object of 1 to " + std::to_string(kMaxValues) + " named values is needed");
  }
  for (const auto& [name, value] : l->values) {
    if (name.empty() || name.size() > kMaxIdBytes) return Bad(at + ".labels", "an empty name");
    if (!std::isfinite(value)) {
      return Bad(at + ".labels." + name, "a finite number or a boolean is needed");
    }
  }
  if (l->source.empty() || l->source.size() > kMaxIdBytes) {
    return Bad(at + ".source", "a non-empty string is needed");
  }
  if (l->time_ms < 0)
    return Bad(at + ".time_ms", "a positive integer (ms since the epoch) is needed");
  if (l->time_ms == 0) l->time_ms = now_ms;
  return OkStatus();
}

StatusOr<std::vector<Label>> ParseLabels(std::string_view body, int64_t now_ms) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::ParseJson(body, &doc));
  const rapidjson::Value* list = &doc;
  std::string prefix = "labels";
  if (doc.IsObject() && doc.HasMember("labels") && doc["labels"].IsArray()) {
    if (doc.MemberCount() != 1) return Bad("body", "only \"labels\" is expected beside it");
    list = &doc["labels"];
  }
  std::vector<Label> out;
  if (list->IsArray()) {
    if (list->Empty()) return Bad(prefix, "no labels");
    if (list->Size() > kMaxLabelsPerRequest) {
      return Bad(prefix, std::to_string(list->Size()) + " labels; at most " +
                             std::to_string(kMaxLabelsPerRequest) + " per request");
    }
    for (rapidjson::SizeType i = 0; i < list->Size(); ++i) {
      ASSIGN_OR_RETURN(Label l,
                       ParseLabel((*list)[i], prefix + "[" + std::to_string(i) + "]", now_ms));
      out.push_back(std::move(l));
    }
    return out;
  }
  if (!list->IsObject()) return Bad("body", "a label object, an array or {\"labels\": [...]}");
  ASSIGN_OR_RETURN(Label l, ParseLabel(*list, "label", now_ms));
  out.push_back(std::move(l));
  return out;
}

std::string LabelValuesJson(const Label& label) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  for (const auto& [name, value] : label.values) {
    w.Key(name.data(), static_cast<rapidjson::SizeType>(name.size()));
    if (value == std::floor(value) && std::fabs(value) < 9e15) {
      w.Int64(static_cast<int64_t>(value));
    } else {
      w.Double(value);
    }
  }
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

std::string EntityIdsJson(const Label& label) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartArray();
  for (const auto& id : label.entity_ids) {
    w.String(id.data(), static_cast<rapidjson::SizeType>(id.size()));
  }
  w.EndArray();
  return std::string(sb.GetString(), sb.GetSize());
}

}  // namespace dais::server
