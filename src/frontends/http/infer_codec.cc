#include "frontends/http/infer_codec.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/writer.h>

#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "common/json.h"
#include "common/logging.h"
#include "common/utf8.h"
#include "tensor/half.h"

namespace dais::frontends::http {
namespace {

static_assert(std::endian::native == std::endian::little,
              "tensor bytes are little-endian on the wire and in memory");

using rapidjson::SizeType;
using rapidjson::Value;

// Full precision: FP64 values round-trip exactly. Iterative: deeply nested input cannot overflow
// the stack. NaN and Infinity are rejected (kParseNanAndInfFlag is not set; a number beyond the
// largest double, which rapidjson reads as NaN, is a range error below). Numbers as text
// converted with std::from_chars were tried (issue 18) and measured no faster on this machine.
constexpr unsigned kParseFlags =
    rapidjson::kParseFullPrecisionFlag | rapidjson::kParseIterativeFlag;

// Bytes per length prefix of a BYTES element.
constexpr size_t kBytesPrefix = 4;

std::string Quoted(std::string_view name) {
  std::string out = "'";
  out += name;
  out += '\'';
  return out;
}

const char* JsonTypeName(const Value& value) {
  switch (value.GetType()) {
    case rapidjson::kNullType:
      return "null";
    case rapidjson::kFalseType:
    case rapidjson::kTrueType:
      return "a boolean";
    case rapidjson::kObjectType:
      return "an object";
    case rapidjson::kArrayType:
      return "an array";
    case rapidjson::kStringType:
      return "a string";
    case rapidjson::kNumberType:
      return "a number";
  }
  return "unknown";
}

// Shortest text that reads back as the same value ("0.1", "1e+20", "3").
std::string DoubleText(double value) {
  char buffer[32];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

// A JSON value as it should appear in an error message.
std::string ValueText(const Value& value) {
  if (value.IsInt64()) return std::to_string(value.GetInt64());
  if (value.IsUint64()) return std::to_string(value.GetUint64());
  if (value.IsNumber()) return DoubleText(value.GetDouble());
  if (value.IsBool()) return value.GetBool() ? "true" : "false";
  return JsonTypeName(value);
}

const Value* FindMember(const Value& object, const char* name) {
  auto it = object.FindMember(name);
  return it == object.MemberEnd() ? nullptr : &it->value;
}

std::string_view StringOf(const Value& value) {
  return std::string_view(value.GetString(), value.GetStringLength());
}

// Calls `visit(leaf)` for every non-array value under `root` in row-major order (a non-array root
// is its own single leaf). Iterative, so nesting depth costs heap, not stack.
template <typename Visit>
Status ForEachLeaf(const Value& root, Visit&& visit) {
  if (!root.IsArray()) return visit(root);
  std::vector<std::pair<const Value*, SizeType>> stack;
  stack.emplace_back(&root, 0);
  while (!stack.empty()) {
    const Value* array = stack.back().first;
    SizeType next = stack.back().second;
    if (next == array->Size()) {
      stack.pop_back();
      continue;
    }
    stack.back().second = next + 1;
    const Value& element = (*array)[next];
    if (element.IsArray()) {
      stack.emplace_back(&element, 0);
    } else {
      RETURN_IF_ERROR(visit(element));
    }
  }
  return OkStatus();
}

// Nested "data" must be rectangular, as a tensor is: every leaf at the same depth and every array
// at one depth of the same length. Flat data is trivially so. `[[[1]],2,[3,[4]]]` is refused
// (ForEachLeaf alone would read it as four elements). Iterative, like ForEachLeaf.
Status CheckRectangular(const Value& root, const std::string& where) {
  if (!root.IsArray()) return OkStatus();
  std::vector<int64_t> sizes;  // the length of the arrays at each depth, as first seen
  int64_t leaf_depth = -1;
  std::vector<std::pair<const Value*, size_t>> stack{{&root, 0}};  // (value, depth)
  while (!stack.empty()) {
    auto [value, depth] = stack.back();
    stack.pop_back();
    if (!value->IsArray()) {
      if (leaf_depth < 0) leaf_depth = static_cast<int64_t>(depth);
      if (leaf_depth != static_cast<int64_t>(depth) || depth < sizes.size()) {
        return InvalidArgument(where + ": 'data' is ragged (a value at nesting depth " +
                               std::to_string(depth) + " beside arrays or values at another " +
                               "depth); nest it as the tensor's shape or send it flat");
      }
      continue;
    }
    const int64_t n = value->Size();
    if (depth == sizes.size()) {
      if (leaf_depth >= 0 && static_cast<int64_t>(depth) >= leaf_depth) {
        return InvalidArgument(where + ": 'data' is ragged (an array at nesting depth " +
                               std::to_string(depth) + " where values were found)");
      }
      sizes.push_back(n);
    } else if (sizes[depth] != n) {
      return InvalidArgument(where + ": 'data' is ragged (arrays of " +
                             std::to_string(sizes[depth]) + " and " + std::to_string(n) +
                             " elements at nesting depth " + std::to_string(depth) + ")");
    }
    for (SizeType i = value->Size(); i > 0; --i) stack.emplace_back(&(*value)[i - 1], depth + 1);
  }
  return OkStatus();
}

Status ParseRequestParameters(const Value& parameters, runtime::InferenceRequest* request) {
  if (!parameters.IsObject()) {
    return InvalidArgument(std::string("request 'parameters' must be an object, got ") +
                           JsonTypeName(parameters));
  }
  for (auto it = parameters.MemberBegin(); it != parameters.MemberEnd(); ++it) {
    std::string_view key = StringOf(it->name);
    const Value& value = it->value;
    if (key == "binary_data_output") {
      if (!value.IsBool()) {
        return InvalidArgument(
            std::string("parameter 'binary_data_output' must be a boolean, got ") +
            ValueText(value));
      }
      request->binary_output_default = value.GetBool();
    } else if (key == "timeout") {
      if (!value.IsUint64()) {
        return InvalidArgument(
            "parameter 'timeout' must be a non-negative integer (microseconds), got " +
            ValueText(value));
      }
      request->timeout_us = value.GetUint64();
    } else if (key == "priority") {
      if (!value.IsUint64() || value.GetUint64() > std::numeric_limits<uint32_t>::max()) {
        return InvalidArgument("parameter 'priority' must be an integer in [0, 4294967295], got " +
                               ValueText(value));
      }
      request->priority = static_cast<uint32_t>(value.GetUint64());
    } else if (key == "entity_ids") {
      if (!value.IsArray()) {
        return InvalidArgument("parameter 'entity_ids' must be an array of ids, got " +
                               ValueText(value));
      }
      for (const Value& id : value.GetArray()) {
        if (id.IsString()) {
          request->entity_ids.emplace_back(StringOf(id));
        } else if (id.IsInt64()) {
          request->entity_ids.push_back(std::to_string(id.GetInt64()));
        } else {
          return InvalidArgument(
              "parameter 'entity_ids': every id must be a string or an "
              "integer, got " +
              ValueText(id));
        }
      }
    } else if (key == "sequence_id" || key == "sequence_start" || key == "sequence_end") {
      return InvalidArgument("parameter " + Quoted(key) +
                             ": sequence batching is not supported by dais");
    }
    // Other parameters are extensions we do not know; KServe v2 says to ignore them.
  }
  return OkStatus();
}

Status ParseShape(const Value& input, const std::string& where, std::vector<int64_t>* shape) {
  const Value* json = FindMember(input, "shape");
  if (json == nullptr) return InvalidArgument("missing field 'shape' for " + where);
  if (!json->IsArray()) {
    return InvalidArgument(where + ": 'shape' must be an array of integers, got " +
                           JsonTypeName(*json));
  }
  shape->reserve(json->Size());
  for (SizeType i = 0; i < json->Size(); ++i) {
    const Value& dim = (*json)[i];
    if (!dim.IsInt64()) {
      return InvalidArgument(where + ": shape dimension " + std::to_string(i) +
                             " must be an integer, got " + ValueText(dim));
    }
    shape->push_back(dim.GetInt64());
  }
  for (size_t i = 0; i < shape->size(); ++i) {
    if ((*shape)[i] < 0) {
      return InvalidArgument(where + ": shape " + ShapeToString(*shape) +
                             " has negative dimension " + std::to_string(i));
    }
  }
  if (ElementCount(*shape) < 0) {
    return InvalidArgument(where + ": shape " + ShapeToString(*shape) + " has too many elements");
  }
  return OkStatus();
}

// Converts one JSON element of a fixed-size type into `out` (DataTypeSize(dtype) bytes).
class ElementConverter {
 public:
  ElementConverter(const std::string& where, DataType dtype) : where_(where), dtype_(dtype) {}

  Status Convert(const Value& value, size_t index, char* out) const {
    using IntegerConverter = Status (ElementConverter::*)(const Value&, size_t, char*) const;
    static constexpr std::pair<DataType, IntegerConverter> kIntegers[] = {
        {DataType::kUint8, &ElementConverter::Integer<uint8_t>},
        {DataType::kUint16, &ElementConverter::Integer<uint16_t>},
        {DataType::kUint32, &ElementConverter::Integer<uint32_t>},
        {DataType::kUint64, &ElementConverter::Integer<uint64_t>},
        {DataType::kInt8, &ElementConverter::Integer<int8_t>},
        {DataType::kInt16, &ElementConverter::Integer<int16_t>},
        {DataType::kInt32, &ElementConverter::Integer<int32_t>},
        {DataType::kInt64, &ElementConverter::Integer<int64_t>},
    };
    for (const auto& [type, convert] : kIntegers) {
      if (type == dtype_) return (this->*convert)(value, index, out);
    }
    switch (dtype_) {
      case DataType::kBool: {
        if (!value.IsBool()) return TypeError(value, index, "a boolean");
        uint8_t byte = value.GetBool() ? 1 : 0;
        std::memcpy(out, &byte, 1);
        return OkStatus();
      }
      case DataType::kFp32: {
        if (!value.IsNumber()) return TypeError(value, index, "a number");
        double number = value.GetDouble();
        // Below FLT_MAX + half an ulp the conversion rounds to a finite float.
        if (!(std::fabs(number) < 0x1.ffffffp+127)) return RangeError(value, index);
        float single = static_cast<float>(number);
        std::memcpy(out, &single, sizeof(single));
        return OkStatus();
      }
      case DataType::kFp64: {
        if (!value.IsNumber()) return TypeError(value, index, "a number");
        double number = value.GetDouble();
        if (!std::isfinite(number)) return RangeError(value, index);
        std::memcpy(out, &number, sizeof(number));
        return OkStatus();
      }
      case DataType::kFp16:
      case DataType::kBf16: {
        if (!value.IsNumber()) return TypeError(value, index, "a number");
        if (!std::isfinite(value.GetDouble())) return RangeError(value, index);
        bool half = dtype_ == DataType::kFp16;
        uint16_t bits = half ? internal::DoubleToHalf(value.GetDouble())
                             : internal::DoubleToBf16(value.GetDouble());
        uint16_t infinity = half ? 0x7c00 : 0x7f80;
        if ((bits & 0x7fff) == infinity) return RangeError(value, index);
        std::memcpy(out, &bits, sizeof(bits));
        return OkStatus();
      }
      default:  // BYTES is not fixed-size; the integers are in kIntegers
        break;
    }
    return Internal(where_ + ": no JSON conversion for " + std::string(DataTypeName(dtype_)));
  }

 private:
  template <typename T>
  Status Integer(const Value& value, size_t index, char* out) const {
    if (!value.IsNumber()) return TypeError(value, index, "an integer");
    T result;
    if (value.IsInt64()) {
      int64_t number = value.GetInt64();
      if (!std::in_range<T>(number)) return RangeError(value, index);
      result = static_cast<T>(number);
    } else if (value.IsUint64()) {
      uint64_t number = value.GetUint64();
      if (!std::in_range<T>(number)) return RangeError(value, index);
      result = static_cast<T>(number);
    } else {
      // A double: accepted when integral ("1.0", "1e2") and exactly in range.
      double number = value.GetDouble();
      if (std::trunc(number) != number) {
        return InvalidArgument(where_ + ": value " + ValueText(value) + " at index " +
                               std::to_string(index) + " is not an integer (datatype " +
                               std::string(DataTypeName(dtype_)) + ")");
      }
      if (number >= -0x1p63 && number < 0x1p63) {
        int64_t integer = static_cast<int64_t>(number);
        if (!std::in_range<T>(integer)) return RangeError(value, index);
        result = static_cast<T>(integer);
      } else if (number >= 0 && number < 0x1p64) {
        uint64_t integer = static_cast<uint64_t>(number);
        if (!std::in_range<T>(integer)) return RangeError(value, index);
        result = static_cast<T>(integer);
      } else {
        return RangeError(value, index);
      }
    }
    std::memcpy(out, &result, sizeof(result));
    return OkStatus();
  }

  Status TypeError(const Value& value, size_t index, const char* expected) const {
    return InvalidArgument(where_ + ": element at index " + std::to_string(index) + " must be " +
                           expected + " for datatype " + std::string(DataTypeName(dtype_)) +
                           ", got " + JsonTypeName(value));
  }
  Status RangeError(const Value& value, size_t index) const {
    // A number beyond the largest double reaches here as NaN or infinity (rapidjson's full
    // precision parse): its text is gone, so it is described instead.
    const std::string text =
        value.IsNumber() && !std::isfinite(value.GetDouble()) ? "beyond 1.8e308" : ValueText(value);
    return InvalidArgument(where_ + ": value " + text + " at index " + std::to_string(index) +
                           " is out of range for " + std::string(DataTypeName(dtype_)));
  }

  const std::string& where_;
  DataType dtype_;
};

// Converts the JSON "data" of an input into owned bytes.
Status ConvertJsonData(const Value& data, const std::string& where, int64_t element_count,
                       Tensor* tensor) {
  // First pass: count the elements (and, for BYTES, check they are strings and size them).
  size_t count = 0;
  size_t string_bytes = 0;
  const bool bytes = tensor->dtype == DataType::kBytes;
  RETURN_IF_ERROR(CheckRectangular(data, where));
  RETURN_IF_ERROR(ForEachLeaf(data, [&](const Value& leaf) -> Status {
    if (bytes) {
      if (!leaf.IsString()) {
        return InvalidArgument(where + ": element at index " + std::to_string(count) +
                               " must be a string for datatype BYTES, got " + JsonTypeName(leaf));
      }
      string_bytes += leaf.GetStringLength();
    }
    ++count;
    return OkStatus();
  }));
  if (count != static_cast<uint64_t>(element_count)) {
    return InvalidArgument(where + ": shape " + ShapeToString(tensor->shape) + " has " +
                           std::to_string(element_count) + " elements but data has " +
                           std::to_string(count));
  }

  std::vector<char> out;
  size_t index = 0;
  if (bytes) {
    out.resize(count * kBytesPrefix + string_bytes);
    char* cursor = out.data();
    RETURN_IF_ERROR(ForEachLeaf(data, [&](const Value& leaf) -> Status {
      uint32_t length = leaf.GetStringLength();
      std::memcpy(cursor, &length, kBytesPrefix);
      if (length > 0) std::memcpy(cursor + kBytesPrefix, leaf.GetString(), length);
      cursor += kBytesPrefix + length;
      return OkStatus();
    }));
  } else {
    const size_t size = DataTypeSize(tensor->dtype);
    out.resize(count * size);
    ElementConverter converter(where, tensor->dtype);
    RETURN_IF_ERROR(ForEachLeaf(data, [&](const Value& leaf) -> Status {
      RETURN_IF_ERROR(converter.Convert(leaf, index, out.data() + index * size));
      ++index;
      return OkStatus();
    }));
  }
  tensor->Own(std::move(out));
  return OkStatus();
}

// Checks that `bytes` holds exactly `element_count` length-prefixed BYTES elements.
Status CheckSerializedBytes(std::string_view bytes, const std::string& where,
                            const std::vector<int64_t>& shape, int64_t element_count) {
  uint64_t count = 0;
  size_t offset = 0;
  while (offset < bytes.size()) {
    if (bytes.size() - offset < kBytesPrefix) {
      return InvalidArgument(where + ": BYTES element " + std::to_string(count) + " at offset " +
                             std::to_string(offset) + " has a truncated 4-byte length prefix");
    }
    uint32_t length;
    std::memcpy(&length, bytes.data() + offset, kBytesPrefix);
    offset += kBytesPrefix;
    if (length > bytes.size() - offset) {
      return InvalidArgument(where + ": BYTES element " + std::to_string(count) + " has length " +
                             std::to_string(length) + " but only " +
                             std::to_string(bytes.size() - offset) + " bytes remain");
    }
    offset += length;
    ++count;
  }
  if (count != static_cast<uint64_t>(element_count)) {
    return InvalidArgument(where + ": shape " + ShapeToString(shape) + " has " +
                           std::to_string(element_count) + " elements but binary data has " +
                           std::to_string(count) + " BYTES elements");
  }
  return OkStatus();
}

// Takes the next `size` bytes of the binary section for `tensor` (borrowed, not copied).
Status TakeBinaryData(std::string_view binary, size_t* used, uint64_t size, const std::string& name,
                      const std::string& where, int64_t element_count, Tensor* tensor) {
  const size_t remain = binary.size() - *used;
  if (size > remain) {
    return InvalidArgument("truncated binary data for input " + Quoted(name) + ": expected " +
                           std::to_string(size) + " bytes, " + std::to_string(remain) + " remain");
  }
  std::string_view slice = binary.substr(*used, size);
  *used += size;
  if (tensor->dtype == DataType::kBytes) {
    RETURN_IF_ERROR(CheckSerializedBytes(slice, where, tensor->shape, element_count));
  } else {
    const uint64_t element_size = DataTypeSize(tensor->dtype);
    const uint64_t count = static_cast<uint64_t>(element_count);
    if (count > std::numeric_limits<uint64_t>::max() / element_size ||
        count * element_size != size) {
      return InvalidArgument(
          where + ": binary_data_size " + std::to_string(size) + " does not match shape " +
          ShapeToString(tensor->shape) + " of " + std::string(DataTypeName(tensor->dtype)) + " (" +
          std::to_string(count) + " elements of " + std::to_string(element_size) + " bytes)");
    }
  }
  tensor->data = slice;
  return OkStatus();
}

Status ParseInput(const Value& input, size_t position, std::string_view binary, size_t* used,
                  Tensor* tensor) {
  std::string where = "input " + std::to_string(position);
  if (!input.IsObject()) {
    return InvalidArgument(where + " must be an object, got " + JsonTypeName(input));
  }
  const Value* name = FindMember(input, "name");
  if (name == nullptr) return InvalidArgument("missing field 'name' for " + where);
  if (!name->IsString()) {
    return InvalidArgument(where + ": 'name' must be a string, got " + JsonTypeName(*name));
  }
  tensor->name = std::string(StringOf(*name));
  where = "input " + Quoted(tensor->name);

  RETURN_IF_ERROR(ParseShape(input, where, &tensor->shape));
  const int64_t element_count = ElementCount(tensor->shape);

  const Value* datatype = FindMember(input, "datatype");
  if (datatype == nullptr) return InvalidArgument("missing field 'datatype' for " + where);
  if (!datatype->IsString()) {
    return InvalidArgument(where + ": 'datatype' must be a string, got " + JsonTypeName(*datatype));
  }
  tensor->dtype = DataTypeFromName(StringOf(*datatype));
  if (tensor->dtype == DataType::kInvalid) {
    return InvalidArgument("unknown datatype " + Quoted(StringOf(*datatype)) + " for " + where);
  }

  const Value* binary_size = nullptr;
  if (const Value* parameters = FindMember(input, "parameters"); parameters != nullptr) {
    if (!parameters->IsObject()) {
      return InvalidArgument(where + ": 'parameters' must be an object, got " +
                             JsonTypeName(*parameters));
    }
    binary_size = FindMember(*parameters, "binary_data_size");
    if (binary_size != nullptr && !binary_size->IsUint64()) {
      return InvalidArgument(where +
                             ": parameter 'binary_data_size' must be a non-negative "
                             "integer, got " +
                             ValueText(*binary_size));
    }
  }
  const Value* data = FindMember(input, "data");
  if (data != nullptr && binary_size != nullptr) {
    return InvalidArgument(where + " has both 'data' and parameters.binary_data_size");
  }
  if (data == nullptr && binary_size == nullptr) {
    return InvalidArgument(where + " has neither 'data' nor parameters.binary_data_size");
  }
  if (data != nullptr) return ConvertJsonData(*data, where, element_count, tensor);
  return TakeBinaryData(binary, used, binary_size->GetUint64(), tensor->name, where, element_count,
                        tensor);
}

Status ParseRequestedOutput(const Value& output, size_t position, bool binary_default,
                            runtime::RequestedOutput* requested) {
  std::string where = "output " + std::to_string(position);
  if (!output.IsObject()) {
    return InvalidArgument("requested " + where + " must be an object, got " +
                           JsonTypeName(output));
  }
  const Value* name = FindMember(output, "name");
  if (name == nullptr) return InvalidArgument("missing field 'name' for requested " + where);
  if (!name->IsString()) {
    return InvalidArgument("requested " + where + ": 'name' must be a string, got " +
                           JsonTypeName(*name));
  }
  requested->name = std::string(StringOf(*name));
  where = "output " + Quoted(requested->name);
  requested->binary = binary_default;
  const Value* parameters = FindMember(output, "parameters");
  if (parameters == nullptr) return OkStatus();
  if (!parameters->IsObject()) {
    return InvalidArgument(where + ": 'parameters' must be an object, got " +
                           JsonTypeName(*parameters));
  }
  if (FindMember(*parameters, "classification") != nullptr) {
    return Unimplemented(where + ": the classification extension is not supported by dais");
  }
  if (const Value* binary = FindMember(*parameters, "binary_data"); binary != nullptr) {
    if (!binary->IsBool()) {
      return InvalidArgument(where + ": parameter 'binary_data' must be a boolean, got " +
                             ValueText(*binary));
    }
    requested->binary = binary->GetBool();
  }
  return OkStatus();
}

Status ParseDocument(const Value& root, std::string_view binary,
                     runtime::InferenceRequest* request) {
  if (!root.IsObject()) {
    return InvalidArgument(std::string("request body must be a JSON object, got ") +
                           JsonTypeName(root));
  }
  if (const Value* id = FindMember(root, "id"); id != nullptr) {
    if (!id->IsString()) {
      return InvalidArgument(std::string("'id' must be a string, got ") + JsonTypeName(*id));
    }
    request->id = std::string(StringOf(*id));
  }
  // Parameters before outputs: binary_data_output is the default for every output.
  if (const Value* parameters = FindMember(root, "parameters"); parameters != nullptr) {
    RETURN_IF_ERROR(ParseRequestParameters(*parameters, request));
  }

  const Value* inputs = FindMember(root, "inputs");
  if (inputs == nullptr) return InvalidArgument("missing field 'inputs'");
  if (!inputs->IsArray()) {
    return InvalidArgument(std::string("'inputs' must be an array, got ") + JsonTypeName(*inputs));
  }
  size_t used = 0;
  std::set<std::string_view> names;
  request->inputs.reserve(inputs->Size());
  for (SizeType i = 0; i < inputs->Size(); ++i) {
    Tensor tensor;
    RETURN_IF_ERROR(ParseInput((*inputs)[i], i, binary, &used, &tensor));
    request->inputs.push_back(std::move(tensor));
  }
  for (const Tensor& tensor : request->inputs) {
    if (!names.insert(tensor.name).second) {
      return InvalidArgument("duplicate input " + Quoted(tensor.name));
    }
  }
  if (used != binary.size()) {
    return InvalidArgument("binary data section has " + std::to_string(binary.size()) +
                           " bytes but the inputs' binary_data_size add up to " +
                           std::to_string(used));
  }

  if (const Value* outputs = FindMember(root, "outputs"); outputs != nullptr) {
    if (!outputs->IsArray()) {
      return InvalidArgument(std::string("'outputs' must be an array, got ") +
                             JsonTypeName(*outputs));
    }
    names.clear();
    request->outputs.resize(outputs->Size());
    for (SizeType i = 0; i < outputs->Size(); ++i) {
      RETURN_IF_ERROR(ParseRequestedOutput((*outputs)[i], i, request->binary_output_default,
                                           &request->outputs[i]));
    }
    for (const runtime::RequestedOutput& output : request->outputs) {
      if (!names.insert(output.name).second) {
        return InvalidArgument("duplicate requested output " + Quoted(output.name));
      }
    }
  }
  return OkStatus();
}

}  // namespace

Status ParseInferRequest(std::string body, size_t header_length, runtime::InferenceRequest* request,
                         int max_json_depth) {
  request->body = std::move(body);
  const std::string_view whole(request->body);
  if (header_length > whole.size()) {
    return InvalidArgument("Inference-Header-Content-Length " + std::to_string(header_length) +
                           " is larger than the body (" + std::to_string(whole.size()) + " bytes)");
  }
  const std::string_view json = header_length > 0 ? whole.substr(0, header_length) : whole;
  const std::string_view binary =
      header_length > 0 ? whole.substr(header_length) : std::string_view();
  rapidjson::Document document;
  RETURN_IF_ERROR(json::ParseJson<kParseFlags>(json, &document, max_json_depth));
  return ParseDocument(document, binary, request);
}

Status ParseRawInferRequest(std::string body, const std::string& name, DataType dtype,
                            std::vector<int64_t> shape, runtime::InferenceRequest* request) {
  request->body = std::move(body);
  request->binary_output_default = true;
  const std::string where = "raw binary request: input " + Quoted(name) + " " +
                            std::string(DataTypeName(dtype)) + " " + ShapeToString(shape);
  Tensor t;
  t.name = name;
  t.dtype = dtype;
  const std::string_view bytes(request->body);
  if (dtype == DataType::kBytes) {
    for (int64_t& d : shape) {
      if (d != 1 && d != -1) {
        return InvalidArgument(where +
                               ": a raw body is one BYTES element, so the model's input "
                               "must have shape [1]; send a JSON inference header");
      }
      d = 1;
    }
    if (bytes.size() > std::numeric_limits<uint32_t>::max()) {
      return InvalidArgument(where + ": a BYTES element is at most 4 GiB");
    }
    // Triton's serialized form: a 4-byte little-endian length, then the element's bytes.
    std::vector<char> serialized(4 + bytes.size());
    const auto n = static_cast<uint32_t>(bytes.size());
    for (int i = 0; i < 4; ++i) serialized[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    std::copy(bytes.begin(), bytes.end(), serialized.begin() + 4);
    t.Own(std::move(serialized));
  } else {
    int64_t* variable = nullptr;
    uint64_t fixed = DataTypeSize(dtype);  // bytes per row of the fixed dimensions
    for (int64_t& d : shape) {
      if (d >= 0) {
        fixed *= static_cast<uint64_t>(d);
        continue;
      }
      if (variable != nullptr) {
        return InvalidArgument(where +
                               ": more than one variable dimension cannot be deduced "
                               "from the body's size; send a JSON inference header");
      }
      variable = &d;
    }
    if (variable != nullptr && fixed > 0) {
      if (bytes.size() % fixed != 0) {
        return InvalidArgument(where + ": the body's " + std::to_string(bytes.size()) +
                               " bytes are not a whole number of " + std::to_string(fixed) +
                               "-byte rows");
      }
      *variable = static_cast<int64_t>(bytes.size() / fixed);
    } else if (variable != nullptr) {
      *variable = 0;
    }
    const uint64_t want = static_cast<uint64_t>(ElementCount(shape)) * DataTypeSize(dtype);
    if (bytes.size() != want) {
      return InvalidArgument(where + " takes " + std::to_string(want) + " bytes, the body has " +
                             std::to_string(bytes.size()));
    }
    t.data = bytes;
  }
  t.shape = std::move(shape);
  request->inputs.push_back(std::move(t));
  return OkStatus();
}

}  // namespace dais::frontends::http
