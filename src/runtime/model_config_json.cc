// ModelConfigToJson: protobuf's JSON mapping of a model configuration, as Triton's
// /v2/models/<m>/config answers it (field names in lowerCamelCase, 64-bit integers as strings,
// enums by name, non-finite floats as strings).
#include <google/protobuf/descriptor.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>

#include "common/base64.h"
#include "common/utf8.h"
#include "runtime/model_config.h"

namespace dais::runtime {
namespace {

namespace pb = google::protobuf;

// ---------------------------------------------------------------------------------------------
// JSON

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void WriteString(std::string_view s, JsonWriter& w) {
  if (IsValidUtf8(s)) {
    w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  } else {
    const std::string clean = SanitizeUtf8(s);
    w.String(clean.data(), static_cast<rapidjson::SizeType>(clean.size()));
  }
}

// Shortest round-trip form, as protobuf's JSON printer does; non-finite values as strings.
template <typename F>
void WriteFloat(F v, JsonWriter& w) {
  if (std::isnan(v)) {
    w.String("NaN");
  } else if (std::isinf(v)) {
    w.String(v > 0 ? "Infinity" : "-Infinity");
  } else {
    char buf[64];
    const auto res = std::to_chars(buf, buf + sizeof(buf), v);
    w.RawValue(buf, static_cast<size_t>(res.ptr - buf), rapidjson::kNumberType);
  }
}

void WriteMessage(const pb::Message& m, JsonWriter& w);

void WriteEnum(const pb::EnumDescriptor* type, int value, JsonWriter& w) {
  const pb::EnumValueDescriptor* v = type->FindValueByNumber(value);
  if (v != nullptr) {
    WriteString(v->name(), w);
  } else {
    w.Int(value);  // An open-enum value this schema does not name.
  }
}

void WriteStringValue(const pb::FieldDescriptor* f, const std::string& s, JsonWriter& w) {
  if (f->type() == pb::FieldDescriptor::TYPE_BYTES) {
    const std::string encoded = Base64(s);
    w.String(encoded.data(), static_cast<rapidjson::SizeType>(encoded.size()));
  } else {
    WriteString(s, w);
  }
}

void WriteSingular(const pb::Message& m, const pb::FieldDescriptor* f, JsonWriter& w) {
  const pb::Reflection* r = m.GetReflection();
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT32:
      w.Int(r->GetInt32(m, f));
      break;
    case pb::FieldDescriptor::CPPTYPE_INT64:
      w.Int64(r->GetInt64(m, f));
      break;
    case pb::FieldDescriptor::CPPTYPE_UINT32:
      w.Uint(r->GetUInt32(m, f));
      break;
    case pb::FieldDescriptor::CPPTYPE_UINT64:
      w.Uint64(r->GetUInt64(m, f));
      break;
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      WriteFloat(r->GetDouble(m, f), w);
      break;
    case pb::FieldDescriptor::CPPTYPE_FLOAT:
      WriteFloat(r->GetFloat(m, f), w);
      break;
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      w.Bool(r->GetBool(m, f));
      break;
    case pb::FieldDescriptor::CPPTYPE_ENUM:
      WriteEnum(f->enum_type(), r->GetEnumValue(m, f), w);
      break;
    case pb::FieldDescriptor::CPPTYPE_STRING:
      WriteStringValue(f, r->GetString(m, f), w);
      break;
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      WriteMessage(r->GetMessage(m, f), w);
      break;
  }
}

void WriteRepeatedElement(const pb::Message& m, const pb::FieldDescriptor* f, int i,
                          JsonWriter& w) {
  const pb::Reflection* r = m.GetReflection();
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT32:
      w.Int(r->GetRepeatedInt32(m, f, i));
      break;
    case pb::FieldDescriptor::CPPTYPE_INT64:
      w.Int64(r->GetRepeatedInt64(m, f, i));
      break;
    case pb::FieldDescriptor::CPPTYPE_UINT32:
      w.Uint(r->GetRepeatedUInt32(m, f, i));
      break;
    case pb::FieldDescriptor::CPPTYPE_UINT64:
      w.Uint64(r->GetRepeatedUInt64(m, f, i));
      break;
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      WriteFloat(r->GetRepeatedDouble(m, f, i), w);
      break;
    case pb::FieldDescriptor::CPPTYPE_FLOAT:
      WriteFloat(r->GetRepeatedFloat(m, f, i), w);
      break;
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      w.Bool(r->GetRepeatedBool(m, f, i));
      break;
    case pb::FieldDescriptor::CPPTYPE_ENUM:
      WriteEnum(f->enum_type(), r->GetRepeatedEnumValue(m, f, i), w);
      break;
    case pb::FieldDescriptor::CPPTYPE_STRING:
      WriteStringValue(f, r->GetRepeatedString(m, f, i), w);
      break;
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      WriteMessage(r->GetRepeatedMessage(m, f, i), w);
      break;
  }
}

// A map key as its JSON object key; also the sort key (integers sort numerically).
struct MapKey {
  std::string text;
  bool is_signed = false;
  int64_t s = 0;
  uint64_t u = 0;
  bool operator<(const MapKey& o) const {
    if (is_signed) return s < o.s;
    if (u != o.u) return u < o.u;
    return text < o.text;
  }
};

MapKey ReadMapKey(const pb::Message& entry, const pb::FieldDescriptor* f) {
  const pb::Reflection* r = entry.GetReflection();
  MapKey k;
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT32:
      k.is_signed = true;
      k.s = r->GetInt32(entry, f);
      break;
    case pb::FieldDescriptor::CPPTYPE_INT64:
      k.is_signed = true;
      k.s = r->GetInt64(entry, f);
      break;
    case pb::FieldDescriptor::CPPTYPE_UINT32:
      k.u = r->GetUInt32(entry, f);
      break;
    case pb::FieldDescriptor::CPPTYPE_UINT64:
      k.u = r->GetUInt64(entry, f);
      break;
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      k.u = r->GetBool(entry, f) ? 1 : 0;
      break;
    default:
      k.text = r->GetString(entry, f);
      return k;
  }
  if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_BOOL) {
    k.text = k.u ? "true" : "false";
  } else {
    k.text = k.is_signed ? std::to_string(k.s) : std::to_string(k.u);
  }
  return k;
}

void WriteMap(const pb::Message& m, const pb::FieldDescriptor* f, JsonWriter& w) {
  const pb::Reflection* r = m.GetReflection();
  const pb::Descriptor* entry_type = f->message_type();
  const pb::FieldDescriptor* key_field = entry_type->map_key();
  const pb::FieldDescriptor* value_field = entry_type->map_value();
  std::vector<std::pair<MapKey, const pb::Message*>> entries;
  for (int i = 0; i < r->FieldSize(m, f); ++i) {
    const pb::Message& entry = r->GetRepeatedMessage(m, f, i);
    entries.emplace_back(ReadMapKey(entry, key_field), &entry);
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  w.StartObject();
  for (const auto& [key, entry] : entries) {
    WriteString(key.text, w);
    WriteSingular(*entry, value_field, w);
  }
  w.EndObject();
}

void WriteMessage(const pb::Message& m, JsonWriter& w) {
  const pb::Descriptor* d = m.GetDescriptor();
  const pb::Reflection* r = m.GetReflection();
  w.StartObject();
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor* f = d->field(i);
    if (!f->is_repeated()) {
      const bool has_presence =
          f->containing_oneof() != nullptr || f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE;
      if (has_presence && !r->HasField(m, f)) continue;
    }
    WriteString(f->name(), w);
    if (f->is_map()) {
      WriteMap(m, f, w);
    } else if (f->is_repeated()) {
      w.StartArray();
      for (int k = 0; k < r->FieldSize(m, f); ++k) WriteRepeatedElement(m, f, k, w);
      w.EndArray();
    } else {
      WriteSingular(m, f, w);
    }
  }
  w.EndObject();
}

}  // namespace

std::string ModelConfigToJson(const google::protobuf::Message& config) {
  rapidjson::StringBuffer buffer;
  JsonWriter writer(buffer);
  WriteMessage(config, writer);
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace dais::runtime
