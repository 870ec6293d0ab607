#include "frontends/http/infer_codec.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "common/json.h"
#include "common/logging.h"
#include "common/utf8.h"
#include "frontends/http/json_view.h"
#include "tensor/half.h"

namespace dais::frontends::http {
namespace {

static_assert(std::endian::native == std::endian::little,
              "tensor bytes are little-endian on the wire and in memory");

// rapidjson (for the bodies simdjson refuses): full precision, so FP64 values round-trip exactly
// (json::ParseJson converts the numbers itself: rapidjson's own conversion has a bug). NaN and
// Infinity are refused, as by simdjson (kParseNanAndInfFlag is not set), and so is a number
// beyond the largest double. Iterative: deeply nested input cannot overflow the stack.
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

template <typename V>
const char* JsonTypeName(V value) {
  if (value.IsNull()) return "null";
  if (value.IsBool()) return "a boolean";
  if (value.IsObject()) return "an object";
  if (value.IsArray()) return "an array";
  if (value.IsString()) return "a string";
  return "a number";
}

// Shortest text that reads back as the same value ("0.1", "1e+20", "3").
std::string DoubleText(double value) {
  char buffer[32];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

// A JSON value as it should appear in an error message.
template <typename V>
std::string ValueText(V value) {
  if (value.IsInt64()) return std::to_string(value.GetInt64());
  if (value.IsUint64()) return std::to_string(value.GetUint64());
  if (value.IsNumber()) return DoubleText(value.GetDouble());
  if (value.IsBool()) return value.GetBool() ? "true" : "false";
  return JsonTypeName(value);
}

// Calls `visit(leaf)` for every non-array value under `root` in row-major order (a non-array root
// is its own single leaf), checking on the way that nested data is rectangular, as a tensor is:
// every leaf at the same depth and every array at one depth of the same length. Flat data is
// trivially so; `[[[1]],2,[3,[4]]]` is refused. Iterative, so nesting depth costs heap, not stack.
template <typename V, typename Visit>
Status ForEachLeaf(V root, const std::string& where, Visit&& visit) {
  if (!root.IsArray()) {
    visit(root);
    return OkStatus();
  }
  using Range = decltype(root.Elements());
  std::vector<Range> stack;    // the arrays being walked; an element's depth is stack.size()
  std::vector<int64_t> sizes;  // the length of the arrays at each depth, as first seen
  size_t leaf_depth = 0;       // 0: no leaf seen yet
  auto enter = [&](V array) -> Status {
    const size_t depth = stack.size();
    const int64_t n = array.Size();
    if (depth == sizes.size()) {
      if (leaf_depth > 0 && depth >= leaf_depth) {
        return InvalidArgument(where + ": 'data' is ragged (an array at nesting depth " +
                               std::to_string(depth) + " where values were found)");
      }
      sizes.push_back(n);
    } else if (sizes[depth] != n) {
      return InvalidArgument(where + ": 'data' is ragged (arrays of " +
                             std::to_string(sizes[depth]) + " and " + std::to_string(n) +
                             " elements at nesting depth " + std::to_string(depth) + ")");
    }
    stack.push_back(array.Elements());
    return OkStatus();
  };
  RETURN_IF_ERROR(enter(root));
  while (!stack.empty()) {
    Range& range = stack.back();
    if (range.first == range.last) {
      stack.pop_back();
      continue;
    }
    V element = *range.first;
    ++range.first;
    if (element.IsArray()) {
      RETURN_IF_ERROR(enter(element));
      continue;
    }
    const size_t depth = stack.size();
    if (leaf_depth == 0) leaf_depth = depth;
    if (leaf_depth != depth || depth < sizes.size()) {
      return InvalidArgument(where + ": 'data' is ragged (a value at nesting depth " +
                             std::to_string(depth) + " beside arrays or values at another " +
                             "depth); nest it as the tensor's shape or send it flat");
    }
    visit(element);
  }
  return OkStatus();
}

template <typename V>
Status ParseRequestParameter(std::string_view key, V value, runtime::InferenceRequest* request) {
  {
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
      for (V id : value.Elements()) {
        if (id.IsString()) {
          request->entity_ids.emplace_back(id.GetString());
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

template <typename V>
Status ParseRequestParameters(V parameters, runtime::InferenceRequest* request) {
  if (!parameters.IsObject()) {
    return InvalidArgument(std::string("request 'parameters' must be an object, got ") +
                           JsonTypeName(parameters));
  }
  Status status;
  parameters.ForEachMember([&](std::string_view key, V value) {
    status = ParseRequestParameter(key, value, request);
    return status.ok();
  });
  return status;
}

template <typename V>
Status ParseShape(V input, const std::string& where, std::vector<int64_t>* shape) {
  std::optional<V> json = input.Find("shape");
  if (!json) return InvalidArgument("missing field 'shape' for " + where);
  if (!json->IsArray()) {
    return InvalidArgument(where + ": 'shape' must be an array of integers, got " +
                           JsonTypeName(*json));
  }
  for (V dim : json->Elements()) {
    if (!dim.IsInt64()) {
      return InvalidArgument(where + ": shape dimension " + std::to_string(shape->size()) +
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
template <typename V>
class ElementConverter {
 public:
  ElementConverter(const std::string& where, DataType dtype) : where_(where), dtype_(dtype) {}

  Status Convert(V value, size_t index, char* out) const {
    using IntegerConverter = Status (ElementConverter::*)(V, size_t, char*) const;
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
  Status Integer(V value, size_t index, char* out) const {
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

  Status TypeError(V value, size_t index, const char* expected) const {
    return InvalidArgument(where_ + ": element at index " + std::to_string(index) + " must be " +
                           expected + " for datatype " + std::string(DataTypeName(dtype_)) +
                           ", got " + JsonTypeName(value));
  }
  Status RangeError(V value, size_t index) const {
    return InvalidArgument(where_ + ": value " + ValueText(value) + " at index " +
                           std::to_string(index) + " is out of range for " +
                           std::string(DataTypeName(dtype_)));
  }

  const std::string& where_;
  DataType dtype_;
};

// Converts the JSON "data" of an input into owned bytes, in one walk. Of several problems the
// client hears the first of: ragged data, a BYTES element that is not a string, an element count
// that does not match the shape, an element that does not convert. `json_bytes` bounds what a
// shape can make it allocate (an element takes at least two bytes of JSON).
template <typename V>
Status ConvertJsonData(V data, const std::string& where, int64_t element_count, size_t json_bytes,
                       Tensor* tensor) {
  const bool bytes = tensor->dtype == DataType::kBytes;
  const size_t size = bytes ? 0 : DataTypeSize(tensor->dtype);
  const uint64_t expected = std::min<uint64_t>(element_count, json_bytes / 2 + 1);
  std::vector<char> out(bytes ? 0 : expected * size);
  if (bytes) out.reserve(expected * (kBytesPrefix + 8));
  ElementConverter<V> converter(where, tensor->dtype);
  Status type_error;  // BYTES: the first element that is not a string
  Status convert_error;
  uint64_t count = 0;
  RETURN_IF_ERROR(ForEachLeaf(data, where, [&](V leaf) {
    const uint64_t index = count++;
    if (bytes && type_error.ok() && !leaf.IsString()) {
      type_error =
          InvalidArgument(where + ": element at index " + std::to_string(index) +
                          " must be a string for datatype BYTES, got " + JsonTypeName(leaf));
    }
    if (index >= expected || !type_error.ok() || !convert_error.ok()) return;
    if (!bytes) {
      convert_error = converter.Convert(leaf, index, out.data() + index * size);
    } else {
      const std::string_view text = leaf.GetString();
      const auto length = static_cast<uint32_t>(text.size());
      const char* prefix = reinterpret_cast<const char*>(&length);
      out.insert(out.end(), prefix, prefix + kBytesPrefix);
      out.insert(out.end(), text.begin(), text.end());
    }
  }));
  RETURN_IF_ERROR(type_error);
  if (count != static_cast<uint64_t>(element_count)) {
    return InvalidArgument(where + ": shape " + ShapeToString(tensor->shape) + " has " +
                           std::to_string(element_count) + " elements but data has " +
                           std::to_string(count));
  }
  RETURN_IF_ERROR(convert_error);
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

template <typename V>
Status ParseInput(V input, size_t position, std::string_view binary, size_t json_bytes,
                  size_t* used, Tensor* tensor) {
  std::string where = "input " + std::to_string(position);
  if (!input.IsObject()) {
    return InvalidArgument(where + " must be an object, got " + JsonTypeName(input));
  }
  std::optional<V> name = input.Find("name");
  if (!name) return InvalidArgument("missing field 'name' for " + where);
  if (!name->IsString()) {
    return InvalidArgument(where + ": 'name' must be a string, got " + JsonTypeName(*name));
  }
  tensor->name = std::string(name->GetString());
  where = "input " + Quoted(tensor->name);

  RETURN_IF_ERROR(ParseShape(input, where, &tensor->shape));
  const int64_t element_count = ElementCount(tensor->shape);

  std::optional<V> datatype = input.Find("datatype");
  if (!datatype) return InvalidArgument("missing field 'datatype' for " + where);
  if (!datatype->IsString()) {
    return InvalidArgument(where + ": 'datatype' must be a string, got " + JsonTypeName(*datatype));
  }
  tensor->dtype = DataTypeFromName(datatype->GetString());
  if (tensor->dtype == DataType::kInvalid) {
    return InvalidArgument("unknown datatype " + Quoted(datatype->GetString()) + " for " + where);
  }

  std::optional<V> binary_size;
  if (std::optional<V> parameters = input.Find("parameters")) {
    if (!parameters->IsObject()) {
      return InvalidArgument(where + ": 'parameters' must be an object, got " +
                             JsonTypeName(*parameters));
    }
    binary_size = parameters->Find("binary_data_size");
    if (binary_size && !binary_size->IsUint64()) {
      return InvalidArgument(where +
                             ": parameter 'binary_data_size' must be a non-negative "
                             "integer, got " +
                             ValueText(*binary_size));
    }
  }
  std::optional<V> data = input.Find("data");
  if (data && binary_size) {
    return InvalidArgument(where + " has both 'data' and parameters.binary_data_size");
  }
  if (!data && !binary_size) {
    return InvalidArgument(where + " has neither 'data' nor parameters.binary_data_size");
  }
  if (data) return ConvertJsonData(*data, where, element_count, json_bytes, tensor);
  return TakeBinaryData(binary, used, binary_size->GetUint64(), tensor->name, where, element_count,
                        tensor);
}

template <typename V>
Status ParseRequestedOutput(V output, size_t position, bool binary_default,
                            runtime::RequestedOutput* requested) {
  std::string where = "output " + std::to_string(position);
  if (!output.IsObject()) {
    return InvalidArgument("requested " + where + " must be an object, got " +
                           JsonTypeName(output));
  }
  std::optional<V> name = output.Find("name");
  if (!name) return InvalidArgument("missing field 'name' for requested " + where);
  if (!name->IsString()) {
    return InvalidArgument("requested " + where + ": 'name' must be a string, got " +
                           JsonTypeName(*name));
  }
  requested->name = std::string(name->GetString());
  where = "output " + Quoted(requested->name);
  requested->binary = binary_default;
  std::optional<V> parameters = output.Find("parameters");
  if (!parameters) return OkStatus();
  if (!parameters->IsObject()) {
    return InvalidArgument(where + ": 'parameters' must be an object, got " +
                           JsonTypeName(*parameters));
  }
  if (parameters->Find("classification")) {
    return Unimplemented(where + ": the classification extension is not supported by dais");
  }
  if (std::optional<V> binary = parameters->Find("binary_data")) {
    if (!binary->IsBool()) {
      return InvalidArgument(where + ": parameter 'binary_data' must be a boolean, got " +
                             ValueText(*binary));
    }
    requested->binary = binary->GetBool();
  }
  return OkStatus();
}

template <typename V>
Status ParseDocument(V root, std::string_view binary, runtime::InferenceRequest* request) {
  if (!root.IsObject()) {
    return InvalidArgument(std::string("request body must be a JSON object, got ") +
                           JsonTypeName(root));
  }
  if (std::optional<V> id = root.Find("id")) {
    if (!id->IsString()) {
      return InvalidArgument(std::string("'id' must be a string, got ") + JsonTypeName(*id));
    }
    request->id = std::string(id->GetString());
  }
  // Parameters before outputs: binary_data_output is the default for every output.
  if (std::optional<V> parameters = root.Find("parameters")) {
    RETURN_IF_ERROR(ParseRequestParameters(*parameters, request));
  }

  std::optional<V> inputs = root.Find("inputs");
  if (!inputs) return InvalidArgument("missing field 'inputs'");
  if (!inputs->IsArray()) {
    return InvalidArgument(std::string("'inputs' must be an array, got ") + JsonTypeName(*inputs));
  }
  size_t used = 0;
  std::set<std::string_view> names;
  for (V input : inputs->Elements()) {
    Tensor tensor;
    RETURN_IF_ERROR(
        ParseInput(input, request->inputs.size(), binary, request->body.size(), &used, &tensor));
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

  if (std::optional<V> outputs = root.Find("outputs")) {
    if (!outputs->IsArray()) {
      return InvalidArgument(std::string("'outputs' must be an array, got ") +
                             JsonTypeName(*outputs));
    }
    names.clear();
    for (V output : outputs->Elements()) {
      runtime::RequestedOutput& requested = request->outputs.emplace_back();
      RETURN_IF_ERROR(ParseRequestedOutput(output, request->outputs.size() - 1,
                                           request->binary_output_default, &requested));
    }
    for (const runtime::RequestedOutput& output : request->outputs) {
      if (!names.insert(output.name).second) {
        return InvalidArgument("duplicate requested output " + Quoted(output.name));
      }
    }
  }
  return OkStatus();
}

// Bodies up to this size are parsed by a parser kept per thread (simdjson's parser keeps its
// buffers, about 16 bytes per byte of JSON); larger ones by a parser of their own, freed after.
constexpr size_t kKeptParserBytes = 256 << 10;

// Parses `json` with simdjson into `*root`, valid until the next call on this thread or while
// `*own` lives. False when simdjson refuses it, for any reason: the caller asks rapidjson.
bool ParseWithSimdjson(std::string_view json, bool copy, int max_depth,
                       std::optional<simdjson::dom::parser>* own, simdjson::dom::element* root) {
  // simdjson's limit of max_depth refuses max_depth nested containers around a value (it
  // counts the value as a level; rapidjson, the authority, does not): those rare bodies go to
  // rapidjson, which accepts them, and simdjson accepts nothing that rapidjson refuses.
  const auto depth = static_cast<size_t>(max_depth);
  thread_local simdjson::dom::parser kept;
  simdjson::dom::parser* parser = &kept;
  if (json.size() > kKeptParserBytes) {
    parser = &own->emplace();
    if (parser->allocate(json.size(), depth)) return false;
  } else if (kept.max_depth() != depth || kept.capacity() < json.size()) {
    if (kept.allocate(std::max(kept.capacity(), json.size()), depth)) return false;
  }
  return !parser->parse(json.data(), json.size(), copy).get(*root);
}

// Moves `body` into the request and splits it into its JSON and binary parts.
Status SplitBody(std::string body, size_t header_length, runtime::InferenceRequest* request,
                 std::string_view* json, std::string_view* binary) {
  request->body = std::move(body);
  const std::string_view whole(request->body);
  if (header_length > whole.size()) {
    return InvalidArgument("Inference-Header-Content-Length " + std::to_string(header_length) +
                           " is larger than the body (" + std::to_string(whole.size()) + " bytes)");
  }
  *json = header_length > 0 ? whole.substr(0, header_length) : whole;
  *binary = header_length > 0 ? whole.substr(header_length) : std::string_view();
  return OkStatus();
}

Status ParseWithRapidjson(std::string_view json, std::string_view binary, int max_json_depth,
                          runtime::InferenceRequest* request) {
  rapidjson::Document document;
  RETURN_IF_ERROR(json::ParseJson<kParseFlags>(json, &document, max_json_depth));
  return ParseDocument(RapidJsonView(document), binary, request);
}

}  // namespace

Status ParseInferRequestWithRapidjson(std::string body, size_t header_length,
                                      runtime::InferenceRequest* request, int max_json_depth) {
  std::string_view json, binary;
  RETURN_IF_ERROR(SplitBody(std::move(body), header_length, request, &json, &binary));
  return ParseWithRapidjson(json, binary, max_json_depth, request);
}

Status ParseInferRequest(std::string body, size_t header_length, runtime::InferenceRequest* request,
                         int max_json_depth) {
  std::string_view json, binary;
  RETURN_IF_ERROR(SplitBody(std::move(body), header_length, request, &json, &binary));
  // simdjson reads up to SIMDJSON_PADDING bytes past the JSON (never using them): the body's
  // binary section and spare capacity count; a body without them is copied.
  const size_t readable = request->body.capacity() - json.size();
  std::optional<simdjson::dom::parser> own;  // for a body too large to keep a parser for
  simdjson::dom::element root;
  if (ParseWithSimdjson(json, readable < simdjson::SIMDJSON_PADDING, max_json_depth, &own, &root)) {
    return ParseDocument(SimdJsonView(root), binary, request);
  }
  // Refused by simdjson: rapidjson says why (with the offset), or reads what simdjson does not.
  return ParseWithRapidjson(json, binary, max_json_depth, request);
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
