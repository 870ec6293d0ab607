#include "memory/point.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "common/json.h"

namespace dais::memory {
namespace {

// Full precision: a number must read back as the same double from the JSON it is stored as.
constexpr unsigned kJsonFlags = rapidjson::kParseNanAndInfFlag | rapidjson::kParseFullPrecisionFlag;

Status Bad(const std::string& where, const std::string& what) {
  return InvalidArgument(where + ": " + what);
}

Status ParseBody(std::string_view body, rapidjson::Document* doc) {
  RETURN_IF_ERROR(json::ParseJson<kJsonFlags>(body, doc));
  if (!doc->IsObject()) return InvalidArgument("request body: a JSON object is needed");
  return OkStatus();
}

StatusOr<std::string> ParseId(const rapidjson::Value& v, const std::string& where) {
  if (v.IsString() && v.GetStringLength() > 0 && v.GetStringLength() <= kMaxIdBytes) {
    return std::string(v.GetString(), v.GetStringLength());
  }
  if (v.IsInt64()) return std::to_string(v.GetInt64());
  return Bad(where, "a non-empty string of at most " + std::to_string(kMaxIdBytes) +
                        " bytes (or an integer) is needed");
}

StatusOr<std::vector<float>> ParseVector(const rapidjson::Value& v, const CollectionSpec& spec,
                                         const std::string& where) {
  if (!v.IsArray()) return Bad(where, "an array of numbers is needed");
  std::vector<float> out;
  out.reserve(v.Size());
  for (const auto& x : v.GetArray()) {
    if (!x.IsNumber()) {
      return Bad(where + "[" + std::to_string(out.size()) + "]", "a number is needed");
    }
    out.push_back(static_cast<float>(x.GetDouble()));
  }
  RETURN_IF_ERROR(CheckVector(spec, &out, where));
  return out;
}

StatusOr<FieldValue> ParseValue(const rapidjson::Value& v, FieldType type,
                                const std::string& where) {
  switch (type) {
    case FieldType::kString:
      if (v.IsString()) return FieldValue(std::string(v.GetString(), v.GetStringLength()));
      return Bad(where, "a string is needed");
    case FieldType::kNumber:
      if (v.IsNumber() && std::isfinite(v.GetDouble())) return FieldValue(v.GetDouble());
      return Bad(where, "a finite number is needed");
    case FieldType::kBool:
      if (v.IsBool()) return FieldValue(v.GetBool());
      return Bad(where, "true or false is needed");
  }
  return Bad(where, "unknown type");
}

StatusOr<Payload> ParsePayload(const rapidjson::Value& v, const CollectionSpec& spec,
                               const std::string& where) {
  if (!v.IsObject()) return Bad(where, "an object is needed");
  Payload out;
  for (const auto& m : v.GetObject()) {
    const std::string name(m.name.GetString(), m.name.GetStringLength());
    auto type = spec.payload.find(name);
    if (type == spec.payload.end()) {
      return Bad(where + "." + name, "not a payload field of collection " + spec.name);
    }
    if (m.value.IsNull()) continue;  // absent
    ASSIGN_OR_RETURN(FieldValue value, ParseValue(m.value, type->second, where + "." + name));
    out.emplace_back(name, std::move(value));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 1; i < out.size(); ++i) {
    if (out[i].first == out[i - 1].first) return Bad(where + "." + out[i].first, "given twice");
  }
  return out;
}

StatusOr<Point> ParsePoint(const rapidjson::Value& v, const CollectionSpec& spec,
                           const std::string& at) {
  if (!v.IsObject()) return Bad(at, "a point object {id, vector, payload} is needed");
  Point p;
  bool has_id = false, has_vector = false;
  for (const auto& m : v.GetObject()) {
    const std::string key(m.name.GetString(), m.name.GetStringLength());
    if (key == "id") {
      ASSIGN_OR_RETURN(p.id, ParseId(m.value, at + ".id"));
      has_id = true;
    } else if (key == "vector") {
      ASSIGN_OR_RETURN(p.vector, ParseVector(m.value, spec, at + ".vector"));
      has_vector = true;
    } else if (key == "payload") {
      ASSIGN_OR_RETURN(p.payload, ParsePayload(m.value, spec, at + ".payload"));
    } else {
      return Bad(at + "." + key, "unknown field (id, vector, payload)");
    }
  }
  if (!has_id) return Bad(at + ".id", "required");
  if (!has_vector) return Bad(at + ".vector", "required");
  return p;
}

std::optional<CompareOp> OpNamed(std::string_view name) {
  if (name == "eq") return CompareOp::kEq;
  if (name == "ne") return CompareOp::kNe;
  if (name == "gt") return CompareOp::kGt;
  if (name == "gte") return CompareOp::kGte;
  if (name == "lt") return CompareOp::kLt;
  if (name == "lte") return CompareOp::kLte;
  return std::nullopt;
}

StatusOr<Filter> ParseFilter(const rapidjson::Value& v, const CollectionSpec& spec) {
  if (!v.IsObject()) return Bad("filter", "an object {field: value | {op: value}} is needed");
  Filter out;
  for (const auto& m : v.GetObject()) {
    const std::string field(m.name.GetString(), m.name.GetStringLength());
    const std::string where = "filter." + field;
    auto type = spec.payload.find(field);
    if (type == spec.payload.end()) {
      return Bad(where, "not a payload field of collection " + spec.name);
    }
    if (!m.value.IsObject()) {  // equality
      ASSIGN_OR_RETURN(FieldValue value, ParseValue(m.value, type->second, where));
      out.push_back({field, CompareOp::kEq, std::move(value)});
      continue;
    }
    if (m.value.MemberCount() == 0) return Bad(where, "an empty condition");
    for (const auto& c : m.value.GetObject()) {
      const std::string op_name(c.name.GetString(), c.name.GetStringLength());
      auto op = OpNamed(op_name);
      if (!op) return Bad(where + "." + op_name, "unknown operator (eq, ne, gt, gte, lt, lte)");
      const bool ordered = *op != CompareOp::kEq && *op != CompareOp::kNe;
      if (ordered && type->second != FieldType::kNumber) {
        return Bad(where + "." + op_name, "ranges apply to number fields only");
      }
      ASSIGN_OR_RETURN(FieldValue value, ParseValue(c.value, type->second, where + "." + op_name));
      out.push_back({field, *op, std::move(value)});
    }
  }
  return out;
}

bool Holds(const Condition& c, const FieldValue& v) {
  if (c.op == CompareOp::kEq) return v == c.value;
  if (c.op == CompareOp::kNe) return v != c.value;
  const double* a = std::get_if<double>(&v);
  const double* b = std::get_if<double>(&c.value);
  if (a == nullptr || b == nullptr) return false;
  switch (c.op) {
    case CompareOp::kGt:
      return *a > *b;
    case CompareOp::kGte:
      return *a >= *b;
    case CompareOp::kLt:
      return *a < *b;
    case CompareOp::kLte:
      return *a <= *b;
    default:
      return false;
  }
}

Status ParseSearchField(const std::string& key, const rapidjson::Value& v,
                        const CollectionSpec& spec, SearchRequest* r, bool* has_vector) {
  if (key == "vector") {
    ASSIGN_OR_RETURN(r->vector, ParseVector(v, spec, "vector"));
    *has_vector = true;
  } else if (key == "k") {
    if (!v.IsInt64() || v.GetInt64() < 1 || v.GetInt64() > kMaxK) {
      return Bad("k", "an integer from 1 to " + std::to_string(kMaxK) + " is needed");
    }
    r->k = static_cast<int>(v.GetInt64());
  } else if (key == "filter") {
    ASSIGN_OR_RETURN(r->filter, ParseFilter(v, spec));
  } else if (key == "min_score" || key == "max_distance") {
    const bool l2 = spec.metric == Metric::kL2;
    if (l2 != (key == "max_distance")) {
      return Bad(key, std::string("collection ") + spec.name + " uses metric " +
                          MetricName(spec.metric) + ": give " +
                          (l2 ? "max_distance" : "min_score"));
    }
    if (!v.IsNumber() || !std::isfinite(v.GetDouble())) return Bad(key, "a number is needed");
    r->threshold = v.GetDouble();
  } else if (key == "with_payload" || key == "with_vector") {
    if (!v.IsBool()) return Bad(key, "true or false is needed");
    (key == "with_payload" ? r->with_payload : r->with_vector) = v.GetBool();
  } else if (key == "ef") {
    if (!v.IsInt64() || v.GetInt64() < 1 || v.GetInt64() > 4096) {
      return Bad(key, "an integer from 1 to 4096 is needed");
    }
    r->ef = static_cast<int>(v.GetInt64());
  } else if (key == "timeout_ms") {
    if (!v.IsInt64() || v.GetInt64() < 1 || v.GetInt64() > 600000) {
      return Bad(key, "an integer from 1 to 600000 is needed");
    }
    r->timeout_ms = v.GetInt64();
  } else {
    return Bad(key,
               "unknown field (vector, k, filter, min_score, max_distance, with_payload, "
               "with_vector, ef, timeout_ms)");
  }
  return OkStatus();
}

}  // namespace

Status CheckVector(const CollectionSpec& spec, std::vector<float>* v, const std::string& where) {
  if (static_cast<int>(v->size()) != spec.dimension) {
    return Bad(where, "has " + std::to_string(v->size()) + " values; collection " + spec.name +
                          " has dimension " + std::to_string(spec.dimension));
  }
  double norm = 0;
  for (size_t i = 0; i < v->size(); ++i) {
    const float x = (*v)[i];
    if (!std::isfinite(x)) {
      return Bad(where + "[" + std::to_string(i) + "]",
                 std::isnan(x) ? "NaN is not a coordinate" : "not finite (as a 32-bit float)");
    }
    norm += static_cast<double>(x) * x;
  }
  if (spec.metric == Metric::kCosine) {
    if (norm == 0) return Bad(where, "a zero vector has no direction (metric cosine)");
    const float inv = static_cast<float>(1.0 / std::sqrt(norm));
    for (float& x : *v) x *= inv;
  }
  return OkStatus();
}

namespace {

Status CheckKind(const FieldValue& v, FieldType type, const std::string& where) {
  switch (type) {
    case FieldType::kString:
      if (std::holds_alternative<std::string>(v)) return OkStatus();
      return Bad(where, "a string is needed");
    case FieldType::kNumber:
      if (const double* d = std::get_if<double>(&v); d != nullptr && std::isfinite(*d)) {
        return OkStatus();
      }
      return Bad(where, "a finite number is needed");
    case FieldType::kBool:
      if (std::holds_alternative<bool>(v)) return OkStatus();
      return Bad(where, "true or false is needed");
  }
  return Bad(where, "unknown type");
}

}  // namespace

Status CheckPoint(const CollectionSpec& spec, Point* p, const std::string& where) {
  if (p->id.empty() || p->id.size() > kMaxIdBytes) {
    return Bad(where + ".id",
               "a non-empty string of at most " + std::to_string(kMaxIdBytes) + " bytes is needed");
  }
  RETURN_IF_ERROR(CheckVector(spec, &p->vector, where + ".vector"));
  for (const auto& [name, value] : p->payload) {
    auto type = spec.payload.find(name);
    if (type == spec.payload.end()) {
      return Bad(where + ".payload." + name, "not a payload field of collection " + spec.name);
    }
    RETURN_IF_ERROR(CheckKind(value, type->second, where + ".payload." + name));
  }
  std::sort(p->payload.begin(), p->payload.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 1; i < p->payload.size(); ++i) {
    if (p->payload[i].first == p->payload[i - 1].first) {
      return Bad(where + ".payload." + p->payload[i].first, "given twice");
    }
  }
  return OkStatus();
}

Status CheckFilter(const CollectionSpec& spec, const Filter& filter) {
  for (size_t i = 0; i < filter.size(); ++i) {
    const Condition& c = filter[i];
    const std::string where = "filter[" + std::to_string(i) + "]";
    auto type = spec.payload.find(c.field);
    if (type == spec.payload.end()) {
      return Bad(where + ".field",
                 "\"" + c.field + "\" is not a payload field of collection " + spec.name);
    }
    const bool ordered = c.op != CompareOp::kEq && c.op != CompareOp::kNe;
    if (ordered && type->second != FieldType::kNumber) {
      return Bad(where + ".op", "ranges apply to number fields only");
    }
    RETURN_IF_ERROR(CheckKind(c.value, type->second, where + ".value"));
  }
  return OkStatus();
}

bool Matches(const Filter& filter, const Payload& payload) {
  for (const Condition& c : filter) {
    auto it = std::lower_bound(payload.begin(), payload.end(), c.field,
                               [](const auto& f, const std::string& n) { return f.first < n; });
    if (it == payload.end() || it->first != c.field || !Holds(c, it->second)) return false;
  }
  return true;
}

StatusOr<std::vector<Point>> ParseUpsert(std::string_view body, const CollectionSpec& spec) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(ParseBody(body, &doc));
  const rapidjson::Value& root = doc;  // const iterators: clang's C++20 operator== rules
  for (const auto& m : root.GetObject()) {
    if (std::string_view(m.name.GetString(), m.name.GetStringLength()) != "points") {
      return Bad(m.name.GetString(), "unknown field (points)");
    }
  }
  auto points = root.FindMember("points");
  if (points == root.MemberEnd() || !points->value.IsArray() || points->value.Empty() ||
      points->value.Size() > kMaxBatch) {
    return Bad("points", "an array of 1 to " + std::to_string(kMaxBatch) + " points is needed");
  }
  std::vector<Point> out;
  out.reserve(points->value.Size());
  for (const auto& p : points->value.GetArray()) {
    ASSIGN_OR_RETURN(Point point,
                     ParsePoint(p, spec, "points[" + std::to_string(out.size()) + "]"));
    out.push_back(std::move(point));
  }
  return out;
}

StatusOr<std::vector<std::string>> ParseIds(std::string_view body, bool* with_vector) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(ParseBody(body, &doc));
  const rapidjson::Value& root = doc;
  std::vector<std::string> out;
  bool has_ids = false;
  for (const auto& m : root.GetObject()) {
    const std::string key(m.name.GetString(), m.name.GetStringLength());
    if (key == "with_vector" && with_vector != nullptr) {
      if (!m.value.IsBool()) return Bad(key, "true or false is needed");
      *with_vector = m.value.GetBool();
    } else if (key == "ids") {
      if (!m.value.IsArray() || m.value.Empty() || m.value.Size() > kMaxBatch) {
        return Bad("ids", "an array of 1 to " + std::to_string(kMaxBatch) + " ids is needed");
      }
      for (const auto& id : m.value.GetArray()) {
        ASSIGN_OR_RETURN(std::string s, ParseId(id, "ids[" + std::to_string(out.size()) + "]"));
        out.push_back(std::move(s));
      }
      has_ids = true;
    } else {
      return Bad(key, with_vector ? "unknown field (ids, with_vector)" : "unknown field (ids)");
    }
  }
  if (!has_ids) return Bad("ids", "required");
  return out;
}

StatusOr<SearchRequest> ParseSearch(std::string_view body, const CollectionSpec& spec) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(ParseBody(body, &doc));
  const rapidjson::Value& root = doc;
  SearchRequest r;
  bool has_vector = false;
  for (const auto& m : root.GetObject()) {
    RETURN_IF_ERROR(ParseSearchField(std::string(m.name.GetString(), m.name.GetStringLength()),
                                     m.value, spec, &r, &has_vector));
  }
  if (!has_vector) return Bad("vector", "required");
  return r;
}

StatusOr<Filter> ParseFilterJson(std::string_view text, const CollectionSpec& spec) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::ParseJson<kJsonFlags>(text, &doc));
  return ParseFilter(doc, spec);
}

std::string PayloadJson(const Payload& payload) {
  rapidjson::StringBuffer out;
  rapidjson::Writer<rapidjson::StringBuffer> w(out);
  w.StartObject();
  for (const auto& [name, value] : payload) {
    w.Key(name.c_str(), static_cast<rapidjson::SizeType>(name.size()));
    if (const auto* s = std::get_if<std::string>(&value)) {
      w.String(s->c_str(), static_cast<rapidjson::SizeType>(s->size()));
    } else if (const auto* d = std::get_if<double>(&value)) {
      w.Double(*d);
    } else {
      w.Bool(std::get<bool>(value));
    }
  }
  w.EndObject();
  return out.GetString();
}

StatusOr<Payload> ParsePayloadJson(std::string_view text, const CollectionSpec& spec) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::ParseJson<kJsonFlags>(text, &doc));
  return ParsePayload(doc, spec, "payload");
}

StatusOr<std::vector<int>> ParseShardsParam(std::string_view query, int count) {
  std::vector<int> out;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    std::string_view kv = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (kv.substr(0, 7) != "shards=") continue;
    std::string_view list = kv.substr(7);
    while (!list.empty()) {
      const size_t comma = list.find(',');
      const std::string_view item = list.substr(0, comma);
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
      int n = -1;
      const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), n);
      if (ec != std::errc() || end != item.data() + item.size() || n < 0 || n >= count) {
        return InvalidArgument("shards: '" + std::string(item) + "' is not a shard (0.." +
                               std::to_string(count - 1) + ")");
      }
      out.push_back(n);
    }
  }
  return out;
}

}  // namespace dais::memory
