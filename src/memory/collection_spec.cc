#include "memory/collection_spec.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "common/duration.h"
#include "common/json.h"

namespace dais::memory {
namespace {

Status Bad(const std::string& field, const std::string& what) {
  return InvalidArgument("collection " + field + ": " + what);
}

StatusOr<int> IntField(const rapidjson::Value& v, const std::string& field, int lo, int hi) {
  if (!v.IsInt() || v.GetInt() < lo || v.GetInt() > hi) {
    return Bad(field, "an integer from " + std::to_string(lo) + " to " + std::to_string(hi) +
                          " is needed");
  }
  return v.GetInt();
}

StatusOr<Metric> ParseMetric(const rapidjson::Value& v) {
  const std::string s = v.IsString() ? v.GetString() : "";
  if (s == "cosine") return Metric::kCosine;
  if (s == "l2") return Metric::kL2;
  if (s == "inner_product" || s == "ip") return Metric::kInnerProduct;
  return Bad("metric", "cosine, l2 or inner_product is needed");
}

StatusOr<FieldType> ParseFieldType(const rapidjson::Value& v, const std::string& field) {
  const std::string s = v.IsString() ? v.GetString() : "";
  if (s == "string") return FieldType::kString;
  if (s == "number") return FieldType::kNumber;
  if (s == "bool") return FieldType::kBool;
  return Bad(field, "string, number or bool is needed");
}

Status ParsePayload(const rapidjson::Value& v, CollectionSpec* spec) {
  if (!v.IsObject()) return Bad("payload", "an object {field: type} is needed");
  if (v.MemberCount() > 64) return Bad("payload", "at most 64 fields");
  for (const auto& m : v.GetObject()) {
    const std::string name(m.name.GetString(), m.name.GetStringLength());
    if (!ValidName(name)) return Bad("payload." + name, "not a valid field name");
    ASSIGN_OR_RETURN(spec->payload[name], ParseFieldType(m.value, "payload." + name));
  }
  return OkStatus();
}

Status ParseIndex(const rapidjson::Value& v, IndexParams* index) {
  if (!v.IsObject()) {
    return Bad("index", "an object {m, ef_construction, ef_search, quantization} is needed");
  }
  for (const auto& m : v.GetObject()) {
    const std::string key(m.name.GetString(), m.name.GetStringLength());
    if (key == "m") {
      ASSIGN_OR_RETURN(index->m, IntField(m.value, "index.m", 2, 128));
    } else if (key == "ef_construction") {
      ASSIGN_OR_RETURN(index->ef_construction, IntField(m.value, "index.ef_construction", 8, 4096));
    } else if (key == "ef_search") {
      ASSIGN_OR_RETURN(index->ef_search, IntField(m.value, "index.ef_search", 1, 4096));
    } else if (key == "quantization") {
      const std::string_view q = m.value.IsString() ? m.value.GetString() : "";
      if (q == "sq8") {
        index->quantization = Quantization::kSq8;
      } else if (q == "none") {
        index->quantization = Quantization::kNone;
      } else {
        return Bad("index.quantization", "must be \"sq8\" or \"none\"");
      }
    } else {
      return Bad("index." + key, "unknown field (m, ef_construction, ef_search, quantization)");
    }
  }
  return OkStatus();
}

Status ParseField(const std::string& key, const rapidjson::Value& v, CollectionSpec* spec) {
  if (key == "name" || key == "tenant") {
    if (!v.IsString() || !ValidName(v.GetString())) {
      return Bad(key, "1-64 characters of a-z, 0-9, '_', '.', '-' are needed");
    }
    (key == "name" ? spec->name : spec->tenant) = v.GetString();
  } else if (key == "dimension") {
    ASSIGN_OR_RETURN(spec->dimension, IntField(v, key, 1, kMaxDimension));
  } else if (key == "metric") {
    ASSIGN_OR_RETURN(spec->metric, ParseMetric(v));
  } else if (key == "shards") {
    ASSIGN_OR_RETURN(spec->shards, IntField(v, key, 1, kMaxShards));
  } else if (key == "replicas") {
    ASSIGN_OR_RETURN(spec->replicas, IntField(v, key, 1, 16));
  } else if (key == "ttl") {
    if (v.IsInt64() && v.GetInt64() >= 0) {
      spec->ttl = std::chrono::seconds(v.GetInt64());
    } else if (v.IsString()) {
      auto us = ParseDurationUs(v.GetString());
      if (!us.ok()) return Bad("ttl", us.status().message());
      spec->ttl = std::chrono::seconds(*us / 1000000);
    } else {
      return Bad("ttl", "a duration (\"30d\", \"12h\") or seconds is needed");
    }
  } else if (key == "payload") {
    return ParsePayload(v, spec);
  } else if (key == "index") {
    return ParseIndex(v, &spec->index);
  } else {
    return Bad(key,
               "unknown field (name, tenant, dimension, metric, shards, replicas, ttl, "
               "payload, index)");
  }
  return OkStatus();
}

}  // namespace

const char* MetricName(Metric m) {
  switch (m) {
    case Metric::kCosine:
      return "cosine";
    case Metric::kL2:
      return "l2";
    case Metric::kInnerProduct:
      return "inner_product";
  }
  return "?";
}

const char* QuantizationName(Quantization q) { return q == Quantization::kSq8 ? "sq8" : "none"; }

const char* FieldTypeName(FieldType t) {
  switch (t) {
    case FieldType::kString:
      return "string";
    case FieldType::kNumber:
      return "number";
    case FieldType::kBool:
      return "bool";
  }
  return "?";
}

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '_' && c != '.' && c != '-'))) return false;
  }
  return true;
}

StatusOr<CollectionSpecPtr> CollectionSpecFromJson(const rapidjson::Value& v) {
  if (!v.IsObject()) return InvalidArgument("collection: a JSON object is needed");
  auto spec = std::make_shared<CollectionSpec>();
  for (const auto& m : v.GetObject()) {
    RETURN_IF_ERROR(
        ParseField(std::string(m.name.GetString(), m.name.GetStringLength()), m.value, spec.get()));
  }
  if (spec->name.empty()) return Bad("name", "required");
  if (spec->dimension == 0) return Bad("dimension", "required");
  if (spec->index.ef_construction < spec->index.m) {
    return Bad("index.ef_construction", "must be at least index.m");
  }
  return CollectionSpecPtr(std::move(spec));
}

StatusOr<CollectionSpecPtr> ParseCollectionSpec(std::string_view text) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::ParseJson(text, &doc));
  return CollectionSpecFromJson(doc);
}

std::string CollectionSpecJson(const CollectionSpec& spec) {
  rapidjson::StringBuffer out;
  rapidjson::Writer<rapidjson::StringBuffer> w(out);
  w.StartObject();
  w.Key("name");
  w.String(spec.name.c_str());
  if (!spec.tenant.empty()) {
    w.Key("tenant");
    w.String(spec.tenant.c_str());
  }
  w.Key("dimension");
  w.Int(spec.dimension);
  w.Key("metric");
  w.String(MetricName(spec.metric));
  w.Key("shards");
  w.Int(spec.shards);
  w.Key("replicas");
  w.Int(spec.replicas);
  w.Key("ttl");
  w.Int64(spec.ttl.count());
  w.Key("payload");
  w.StartObject();
  for (const auto& [name, type] : spec.payload) {
    w.Key(name.c_str());
    w.String(FieldTypeName(type));
  }
  w.EndObject();
  w.Key("index");
  w.StartObject();
  w.Key("m");
  w.Int(spec.index.m);
  w.Key("ef_construction");
  w.Int(spec.index.ef_construction);
  w.Key("ef_search");
  w.Int(spec.index.ef_search);
  w.Key("quantization");
  w.String(QuantizationName(spec.index.quantization));
  w.EndObject();
  w.EndObject();
  return out.GetString();
}

}  // namespace dais::memory
