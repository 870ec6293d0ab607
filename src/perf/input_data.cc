#include "perf/input_data.h"

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "common/json.h"
#include "dais/tensor.h"
#include "tensor/half.h"

namespace dais::perf {
namespace {

template <typename T>
void AppendRaw(std::string* out, T value) {
  char buf[sizeof(T)];
  std::memcpy(buf, &value, sizeof(T));  // little-endian hosts only (x86-64, aarch64)
  out->append(buf, sizeof(T));
}

void AppendBytesElement(std::string* out, std::string_view element) {
  AppendRaw<uint32_t>(out, static_cast<uint32_t>(element.size()));
  out->append(element);
}

// Appends `value` converted to `type` (not BYTES). The caller has range-checked integers.
void AppendNumber(std::string* out, DataType type, double value) {
  switch (type) {
    case DataType::kBool:
      return AppendRaw<uint8_t>(out, value != 0 ? 1 : 0);
    case DataType::kUint8:
      return AppendRaw<uint8_t>(out, static_cast<uint8_t>(value));
    case DataType::kUint16:
      return AppendRaw<uint16_t>(out, static_cast<uint16_t>(value));
    case DataType::kUint32:
      return AppendRaw<uint32_t>(out, static_cast<uint32_t>(value));
    case DataType::kUint64:
      return AppendRaw<uint64_t>(out, static_cast<uint64_t>(value));
    case DataType::kInt8:
      return AppendRaw<int8_t>(out, static_cast<int8_t>(value));
    case DataType::kInt16:
      return AppendRaw<int16_t>(out, static_cast<int16_t>(value));
    case DataType::kInt32:
      return AppendRaw<int32_t>(out, static_cast<int32_t>(value));
    case DataType::kInt64:
      return AppendRaw<int64_t>(out, static_cast<int64_t>(value));
    case DataType::kFp16:
      return AppendRaw<uint16_t>(out, internal::DoubleToHalf(value));
    case DataType::kBf16:
      return AppendRaw<uint16_t>(out, internal::DoubleToBf16(value));
    case DataType::kFp32:
      return AppendRaw<float>(out, static_cast<float>(value));
    case DataType::kFp64:
      return AppendRaw<double>(out, value);
    case DataType::kBytes:
    case DataType::kInvalid:
      return;
  }
}

bool IsInteger(DataType t) {
  switch (t) {
    case DataType::kUint8:
    case DataType::kUint16:
    case DataType::kUint32:
    case DataType::kUint64:
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
      return true;
    default:
      return false;
  }
}

// Smallest and largest value of an integer type, as doubles (exact up to 2^53; the 64-bit
// bounds are only used to reject values far out of range).
std::pair<double, double> IntegerRange(DataType t) {
  switch (t) {
    case DataType::kUint8:
      return {0, 255};
    case DataType::kUint16:
      return {0, 65535};
    case DataType::kUint32:
      return {0, 4294967295.0};
    case DataType::kUint64:
      return {0, 18446744073709551615.0};
    case DataType::kInt8:
      return {-128, 127};
    case DataType::kInt16:
      return {-32768, 32767};
    case DataType::kInt32:
      return {-2147483648.0, 2147483647.0};
    default:
      return {-9223372036854775808.0, 9223372036854775807.0};
  }
}

// Appends one JSON element of an input file. `where` names the entry and input for errors.
Status AppendJsonElement(const rapidjson::Value& v, DataType type, std::string* out,
                         const std::string& where) {
  if (type == DataType::kBytes) {
    if (!v.IsString()) return InvalidArgument(where + ": BYTES values must be strings");
    AppendBytesElement(out, std::string_view(v.GetString(), v.GetStringLength()));
    return OkStatus();
  }
  if (type == DataType::kBool) {
    if (v.IsBool()) {
      AppendRaw<uint8_t>(out, v.GetBool() ? 1 : 0);
      return OkStatus();
    }
    if (v.IsNumber() && (v.GetDouble() == 0 || v.GetDouble() == 1)) {
      AppendRaw<uint8_t>(out, v.GetDouble() != 0 ? 1 : 0);
      return OkStatus();
    }
    return InvalidArgument(where + ": BOOL values must be true/false or 0/1");
  }
  if (!v.IsNumber()) {
    return InvalidArgument(fmt::format("{}: {} values must be numbers", where, DataTypeName(type)));
  }
  if (IsInteger(type)) {
    // 64-bit values are taken exactly when rapidjson parsed them as integers.
    if (type == DataType::kInt64 && v.IsInt64()) {
      AppendRaw<int64_t>(out, v.GetInt64());
      return OkStatus();
    }
    if (type == DataType::kUint64 && v.IsUint64()) {
      AppendRaw<uint64_t>(out, v.GetUint64());
      return OkStatus();
    }
    double d = v.GetDouble();
    auto [lo, hi] = IntegerRange(type);
    if (d != std::floor(d) || d < lo || d > hi) {
      return InvalidArgument(
          fmt::format("{}: {} is not a valid {} value", where, d, DataTypeName(type)));
    }
    AppendNumber(out, type, d);
    return OkStatus();
  }
  AppendNumber(out, type, v.GetDouble());
  return OkStatus();
}

// Appends every element of a possibly nested list (or a single scalar) in row-major order.
Status AppendJsonValues(const rapidjson::Value& v, DataType type, std::string* out, int64_t* count,
                        const std::string& where) {
  if (v.IsArray()) {
    for (const auto& e : v.GetArray()) {
      RETURN_IF_ERROR(AppendJsonValues(e, type, out, count, where));
    }
    return OkStatus();
  }
  RETURN_IF_ERROR(AppendJsonElement(v, type, out, where));
  ++*count;
  return OkStatus();
}

std::string RepeatBytes(const std::string& one, int64_t times) {
  std::string out;
  out.reserve(one.size() * static_cast<size_t>(times));
  for (int64_t i = 0; i < times; ++i) out += one;
  return out;
}

}  // namespace

StatusOr<std::vector<ResolvedInput>> ResolveInputs(const ModelInfo& model, int64_t batch_size) {
  if (model.inputs.empty()) {
    return InvalidArgument(fmt::format("model '{}' declares no inputs", model.name));
  }
  bool batching = model.max_batch_size > 0;
  if (model.max_batch_size < 0) {  // no configuration: infer from the shapes
    batching = true;
    for (const TensorSpec& in : model.inputs) {
      if (in.shape.empty() || in.shape[0] != -1) batching = false;
    }
  }
  if (!batching && batch_size > 1) {
    return InvalidArgument(
        fmt::format("model '{}' does not batch (max_batch_size 0): use -b 1", model.name));
  }
  if (model.max_batch_size > 0 && batch_size > model.max_batch_size) {
    return InvalidArgument(fmt::format("-b {} is over the model's max_batch_size {}", batch_size,
                                       model.max_batch_size));
  }
  std::vector<ResolvedInput> out;
  for (const TensorSpec& in : model.inputs) {
    if (in.dtype == DataType::kInvalid) {
      return InvalidArgument(
          fmt::format("input '{}': unsupported datatype '{}'", in.name, in.datatype));
    }
    ResolvedInput r;
    r.spec = in;
    r.shape = in.shape;
    if (batching) {
      if (r.shape.empty() || r.shape[0] != -1) {
        return InvalidArgument(
            fmt::format("input '{}': shape {} of a batching model should start with -1", in.name,
                        ShapeToString(in.shape)));
      }
      r.shape[0] = batch_size;
      r.batched = true;
    }
    for (size_t i = r.batched ? 1 : 0; i < r.shape.size(); ++i) {
      if (r.shape[i] < 0) r.shape[i] = 1;
    }
    out.push_back(std::move(r));
  }
  return out;
}

RequestInputs GenerateInputs(const std::vector<ResolvedInput>& inputs, DataMode mode, uint64_t seed,
                             int64_t string_length) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> real(0.0, 1.0);
  std::uniform_int_distribution<int> integer(0, 127);
  std::uniform_int_distribution<int> letter('a', 'z');
  RequestInputs out;
  for (const ResolvedInput& in : inputs) {
    InputTensor t;
    t.name = in.spec.name;
    t.datatype = in.spec.datatype;
    t.dtype = in.spec.dtype;
    t.shape = in.shape;
    const int64_t n = ElementCount(in.shape);
    const DataType type = in.spec.dtype;
    if (type == DataType::kBytes) {
      t.bytes.reserve(static_cast<size_t>(n * (4 + string_length)));
      std::string s(static_cast<size_t>(string_length), '0');
      for (int64_t i = 0; i < n; ++i) {
        if (mode == DataMode::kRandom) {
          for (char& c : s) c = static_cast<char>(letter(rng));
        }
        AppendBytesElement(&t.bytes, s);
      }
    } else {
      t.bytes.reserve(static_cast<size_t>(n) * DataTypeSize(type));
      for (int64_t i = 0; i < n; ++i) {
        double v = 0;
        if (mode == DataMode::kRandom) {
          if (type == DataType::kBool) {
            v = integer(rng) & 1;
          } else if (IsInteger(type)) {
            v = integer(rng);
          } else {
            v = real(rng);
          }
        }
        AppendNumber(&t.bytes, type, v);
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

StatusOr<std::vector<RequestInputs>> ParseInputDataJson(std::string_view json,
                                                        const std::vector<ResolvedInput>& inputs) {
  rapidjson::Document doc;
  if (Status s = json::ParseJson(json, &doc); !s.ok()) {
    return InvalidArgument("input data: " + s.message());
  }
  if (!doc.IsObject() || !doc.HasMember("data") || !doc["data"].IsArray() || doc["data"].Empty()) {
    return InvalidArgument("input data: expected {\"data\": [{\"INPUT\": [values...]}, ...]}");
  }
  std::vector<RequestInputs> requests;
  size_t index = 0;
  for (const auto& entry : doc["data"].GetArray()) {
    if (!entry.IsObject()) {
      return InvalidArgument(fmt::format("input data: data[{}] is not an object", index));
    }
    RequestInputs request;
    for (const ResolvedInput& in : inputs) {
      const std::string where = fmt::format("input data: data[{}].{}", index, in.spec.name);
      auto it = entry.FindMember(in.spec.name.c_str());
      if (it == entry.MemberEnd()) return InvalidArgument(where + ": missing");
      const rapidjson::Value* values = &it->value;
      // The shape of one batch element (the whole request for a non-batching model).
      std::vector<int64_t> element_shape(in.shape.begin() + (in.batched ? 1 : 0), in.shape.end());
      if (values->IsObject()) {
        if (!values->HasMember("content")) {
          return InvalidArgument(where +
                                 ": an object needs \"content\" (and optionally "
                                 "\"shape\"); \"b64\" is not supported");
        }
        if (values->HasMember("shape")) {
          const auto& shape = (*values)["shape"];
          if (!shape.IsArray()) return InvalidArgument(where + ": \"shape\" must be a list");
          element_shape.clear();
          for (const auto& d : shape.GetArray()) {
            if (!d.IsInt64() || d.GetInt64() < 0) {
              return InvalidArgument(where + ": \"shape\" must hold non-negative integers");
            }
            element_shape.push_back(d.GetInt64());
          }
        }
        values = &(*values)["content"];
      }
      std::string one;
      int64_t count = 0;
      RETURN_IF_ERROR(AppendJsonValues(*values, in.spec.dtype, &one, &count, where));
      const int64_t want = ElementCount(element_shape);
      if (count != want) {
        return InvalidArgument(fmt::format("{}: {} values given, shape {} needs {}", where, count,
                                           ShapeToString(element_shape), want));
      }
      InputTensor t;
      t.name = in.spec.name;
      t.datatype = in.spec.datatype;
      t.dtype = in.spec.dtype;
      t.shape = element_shape;
      if (in.batched) {
        t.shape.insert(t.shape.begin(), in.shape[0]);
        t.bytes = RepeatBytes(one, in.shape[0]);
      } else {
        t.bytes = std::move(one);
      }
      request.push_back(std::move(t));
    }
    requests.push_back(std::move(request));
    ++index;
  }
  return requests;
}

StatusOr<std::vector<RequestInputs>> LoadInputDataFile(const std::string& path,
                                                       const std::vector<ResolvedInput>& inputs) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound(fmt::format("--input-data: cannot read '{}'", path));
  std::stringstream ss;
  ss << f.rdbuf();
  auto parsed = ParseInputDataJson(ss.str(), inputs);
  if (!parsed.ok()) return parsed.status().WithPrefix(path);
  return parsed;
}

}  // namespace dais::perf
