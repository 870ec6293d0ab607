#include "perf/http_codec.h"

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <charconv>
#include <cstring>

#include "common/json.h"
#include "tensor/half.h"

namespace dais::perf {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

void RawNumber(Writer* w, const std::string& s) {
  w->RawValue(s.data(), s.size(), rapidjson::kNumberType);
}

// Writes the elements of `t` (raw bytes) as a flat JSON array.
void WriteData(Writer* w, const InputTensor& t) {
  w->StartArray();
  const char* p = t.bytes.data();
  const char* end = p + t.bytes.size();
  if (t.dtype == DataType::kBytes) {
    while (end - p >= 4) {
      uint32_t n = Load<uint32_t>(p);
      p += 4;
      if (static_cast<size_t>(end - p) < n) break;
      w->String(p, n);
      p += n;
    }
    w->EndArray();
    return;
  }
  const size_t size = DataTypeSize(t.dtype);
  for (; size > 0 && static_cast<size_t>(end - p) >= size; p += size) {
    switch (t.dtype) {
      case DataType::kBool:
        w->Bool(*p != 0);
        break;
      case DataType::kUint8:
        w->Uint(Load<uint8_t>(p));
        break;
      case DataType::kUint16:
        w->Uint(Load<uint16_t>(p));
        break;
      case DataType::kUint32:
        w->Uint(Load<uint32_t>(p));
        break;
      case DataType::kUint64:
        w->Uint64(Load<uint64_t>(p));
        break;
      case DataType::kInt8:
        w->Int(Load<int8_t>(p));
        break;
      case DataType::kInt16:
        w->Int(Load<int16_t>(p));
        break;
      case DataType::kInt32:
        w->Int(Load<int32_t>(p));
        break;
      case DataType::kInt64:
        w->Int64(Load<int64_t>(p));
        break;
      case DataType::kFp16:
        RawNumber(w, fmt::format("{}", internal::HalfToDouble(Load<uint16_t>(p))));
        break;
      case DataType::kBf16:
        RawNumber(w, fmt::format("{}", internal::Bf16ToDouble(Load<uint16_t>(p))));
        break;
      case DataType::kFp32:  // shortest text that reads back as the same float
        RawNumber(w, fmt::format("{}", Load<float>(p)));
        break;
      case DataType::kFp64:
        RawNumber(w, fmt::format("{}", Load<double>(p)));
        break;
      case DataType::kBytes:
      case DataType::kInvalid:
        break;
    }
  }
  w->EndArray();
}

bool GetUint64(const rapidjson::Value& v, uint64_t* out) {
  if (v.IsUint64()) {
    *out = v.GetUint64();
    return true;
  }
  if (v.IsString()) {  // protobuf's JSON mapping writes 64-bit integers as strings
    const char* s = v.GetString();
    const char* e = s + v.GetStringLength();
    auto [ptr, ec] = std::from_chars(s, e, *out);
    return ec == std::errc() && ptr == e;
  }
  return false;
}

bool GetInt64(const rapidjson::Value& v, int64_t* out) {
  if (v.IsInt64()) {
    *out = v.GetInt64();
    return true;
  }
  if (v.IsString()) {
    const char* s = v.GetString();
    const char* e = s + v.GetStringLength();
    auto [ptr, ec] = std::from_chars(s, e, *out);
    return ec == std::errc() && ptr == e;
  }
  return false;
}

uint64_t MemberUint64(const rapidjson::Value& obj, const char* key) {
  uint64_t v = 0;
  if (obj.IsObject()) {
    auto it = obj.FindMember(key);
    if (it != obj.MemberEnd()) GetUint64(it->value, &v);
  }
  return v;
}

void AddDuration(const rapidjson::Value& stats, const char* key, Duration* d) {
  if (!stats.IsObject()) return;
  auto it = stats.FindMember(key);
  if (it == stats.MemberEnd()) return;
  d->count += MemberUint64(it->value, "count");
  d->ns += MemberUint64(it->value, "ns");
}

Status ParseTensors(const rapidjson::Value& doc, const char* key, std::vector<TensorSpec>* out) {
  auto it = doc.FindMember(key);
  if (it == doc.MemberEnd()) return OkStatus();
  if (!it->value.IsArray())
    return InvalidArgument(fmt::format("metadata: '{}' is not a list", key));
  for (const auto& t : it->value.GetArray()) {
    if (!t.IsObject() || !t.HasMember("name") || !t["name"].IsString() ||
        !t.HasMember("datatype") || !t["datatype"].IsString() || !t.HasMember("shape") ||
        !t["shape"].IsArray()) {
      return InvalidArgument(
          fmt::format("metadata: each of '{}' needs name, datatype and shape", key));
    }
    TensorSpec spec;
    spec.name = t["name"].GetString();
    spec.datatype = t["datatype"].GetString();
    spec.dtype = DataTypeFromName(spec.datatype);
    for (const auto& d : t["shape"].GetArray()) {
      int64_t dim = 0;
      if (!GetInt64(d, &dim)) {
        return InvalidArgument(
            fmt::format("metadata: '{}' has a non-integer dimension", spec.name));
      }
      spec.shape.push_back(dim);
    }
    out->push_back(std::move(spec));
  }
  return OkStatus();
}

Status ParseDocument(std::string_view json, const char* what, rapidjson::Document* doc) {
  doc->Parse(json.data(), json.size());
  if (doc->HasParseError() || !doc->IsObject()) {
    return InvalidArgument(fmt::format("{}: the server's answer is not a JSON object", what));
  }
  return OkStatus();
}

}  // namespace

InferBody BuildInferBody(const RequestInputs& inputs, bool binary) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("inputs");
  w.StartArray();
  for (const InputTensor& t : inputs) {
    w.StartObject();
    w.Key("name");
    w.String(t.name.c_str());
    w.Key("shape");
    w.StartArray();
    for (int64_t d : t.shape) w.Int64(d);
    w.EndArray();
    w.Key("datatype");
    w.String(t.datatype.c_str());
    if (binary) {
      w.Key("parameters");
      w.StartObject();
      w.Key("binary_data_size");
      w.Uint64(t.bytes.size());
      w.EndObject();
    } else {
      w.Key("data");
      WriteData(&w, t);
    }
    w.EndObject();
  }
  w.EndArray();
  if (binary) {
    w.Key("parameters");
    w.StartObject();
    w.Key("binary_data_output");
    w.Bool(true);
    w.EndObject();
  }
  w.EndObject();
  InferBody out;
  out.body.assign(sb.GetString(), sb.GetSize());
  if (binary) {
    out.header_length = out.body.size();
    for (const InputTensor& t : inputs) out.body += t.bytes;
  }
  return out;
}

StatusOr<ModelInfo> ParseModelMetadata(std::string_view json) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(ParseDocument(json, "model metadata", &doc));
  ModelInfo info;
  if (doc.HasMember("name") && doc["name"].IsString()) info.name = doc["name"].GetString();
  if (doc.HasMember("platform") && doc["platform"].IsString()) {
    info.platform = doc["platform"].GetString();
  }
  if (doc.HasMember("versions") && doc["versions"].IsArray()) {
    for (const auto& v : doc["versions"].GetArray()) {
      if (v.IsString()) info.versions.push_back(v.GetString());
    }
  }
  RETURN_IF_ERROR(ParseTensors(doc, "inputs", &info.inputs));
  RETURN_IF_ERROR(ParseTensors(doc, "outputs", &info.outputs));
  return info;
}

StatusOr<int64_t> ParseMaxBatchSize(std::string_view json) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(ParseDocument(json, "model configuration", &doc));
  // Triton wraps nothing; some servers answer {"config": {...}}.
  const rapidjson::Value* config = &doc;
  if (doc.HasMember("config") && doc["config"].IsObject()) config = &doc["config"];
  auto it = config->FindMember("max_batch_size");
  if (it == config->MemberEnd()) return int64_t{0};
  int64_t v = 0;
  if (!GetInt64(it->value, &v)) {
    return InvalidArgument("model configuration: max_batch_size is not an integer");
  }
  return v;
}

StatusOr<ServerStats> ParseModelStatistics(std::string_view json) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(ParseDocument(json, "model statistics", &doc));
  const rapidjson::Value& root = doc;  // const iterators: clang's C++20 == is ambiguous otherwise
  auto it = root.FindMember("model_stats");
  if (it == root.MemberEnd() || !it->value.IsArray()) {
    return InvalidArgument("model statistics: no 'model_stats' list");
  }
  ServerStats s;
  for (const auto& m : it->value.GetArray()) {
    if (!m.IsObject()) continue;
    s.inference_count += MemberUint64(m, "inference_count");
    s.execution_count += MemberUint64(m, "execution_count");
    auto is = m.FindMember("inference_stats");
    if (is == m.MemberEnd()) continue;
    AddDuration(is->value, "success", &s.success);
    AddDuration(is->value, "queue", &s.queue);
    AddDuration(is->value, "compute_input", &s.compute_input);
    AddDuration(is->value, "compute_infer", &s.compute_infer);
    AddDuration(is->value, "compute_output", &s.compute_output);
  }
  return s;
}

std::string ErrorText(std::string_view body) {
  rapidjson::Document doc;
  if (json::ParseJson(body, &doc).ok() && doc.IsObject() && doc.HasMember("error") &&
      doc["error"].IsString()) {
    return doc["error"].GetString();
  }
  std::string text(body.substr(0, 300));
  if (body.size() > 300) text += "...";
  return text.empty() ? "(empty body)" : text;
}

}  // namespace dais::perf
