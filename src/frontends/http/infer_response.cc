// The response half of infer_codec.h: KServe v2 JSON responses, with the binary tensor data
// extension, and error bodies.
#include <rapidjson/writer.h>

#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>

#include "common/logging.h"
#include "common/utf8.h"
#include "frontends/http/infer_codec.h"
#include "tensor/half.h"

namespace dais::frontends::http {
namespace {

using rapidjson::SizeType;

// Bytes per length prefix of a BYTES element.
constexpr size_t kBytesPrefix = 4;

// rapidjson output stream that appends to a std::string (no intermediate buffer).
class StringOutput {
 public:
  using Ch = char;
  explicit StringOutput(std::string* out) : out_(out) {}
  void Put(char c) { out_->push_back(c); }
  void Flush() {}

 private:
  std::string* out_;
};

using JsonWriter = rapidjson::Writer<StringOutput>;

// Floating-point numbers as their shortest round-trip text. NaN and the infinities are not JSON;
// they are written as NaN, Infinity and -Infinity, which Python's json module and rapidjson
// (kParseNanAndInfFlag) read back.
template <typename T>
void WriteFloat(T value, JsonWriter* writer) {
  if (std::isnan(value)) {
    writer->RawValue("NaN", 3, rapidjson::kNumberType);
  } else if (std::isinf(value)) {
    if (value > 0) {
      writer->RawValue("Infinity", 8, rapidjson::kNumberType);
    } else {
      writer->RawValue("-Infinity", 9, rapidjson::kNumberType);
    }
  } else {
    char buffer[32];
    auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
    writer->RawValue(buffer, static_cast<size_t>(result.ptr - buffer), rapidjson::kNumberType);
  }
}

template <typename T>
T Load(const char* bytes) {
  T value;
  std::memcpy(&value, bytes, sizeof(T));
  return value;
}

void WriteElement(DataType dtype, const char* bytes, JsonWriter* writer) {
  switch (dtype) {
    case DataType::kBool:
      writer->Bool(Load<uint8_t>(bytes) != 0);
      return;
    case DataType::kUint8:
      writer->Uint(Load<uint8_t>(bytes));
      return;
    case DataType::kUint16:
      writer->Uint(Load<uint16_t>(bytes));
      return;
    case DataType::kUint32:
      writer->Uint(Load<uint32_t>(bytes));
      return;
    case DataType::kUint64:
      writer->Uint64(Load<uint64_t>(bytes));
      return;
    case DataType::kInt8:
      writer->Int(Load<int8_t>(bytes));
      return;
    case DataType::kInt16:
      writer->Int(Load<int16_t>(bytes));
      return;
    case DataType::kInt32:
      writer->Int(Load<int32_t>(bytes));
      return;
    case DataType::kInt64:
      writer->Int64(Load<int64_t>(bytes));
      return;
    case DataType::kFp16:
      WriteFloat(internal::HalfToDouble(Load<uint16_t>(bytes)), writer);
      return;
    case DataType::kBf16:
      WriteFloat(internal::Bf16ToDouble(Load<uint16_t>(bytes)), writer);
      return;
    case DataType::kFp32:
      WriteFloat(Load<float>(bytes), writer);
      return;
    case DataType::kFp64:
      WriteFloat(Load<double>(bytes), writer);
      return;
    case DataType::kBytes:
    case DataType::kInvalid:
      return;
  }
}

void WriteData(const Tensor& tensor, JsonWriter* writer) {
  writer->StartArray();
  std::string_view data = tensor.data;
  if (tensor.dtype == DataType::kBytes) {
    size_t offset = 0;
    while (offset < data.size()) {
      uint32_t length = 0;
      if (data.size() - offset >= kBytesPrefix) {
        std::memcpy(&length, data.data() + offset, kBytesPrefix);
      }
      if (data.size() - offset < kBytesPrefix || length > data.size() - offset - kBytesPrefix) {
        DAIS_BUG("output '{}': malformed BYTES data at offset {} of {}", tensor.name, offset,
                 data.size());
        break;
      }
      writer->String(data.data() + offset + kBytesPrefix, length);
      offset += kBytesPrefix + length;
    }
  } else if (size_t size = DataTypeSize(tensor.dtype); size > 0) {
    if (data.size() % size != 0) {
      DAIS_BUG("output '{}': {} bytes is not a whole number of {} elements", tensor.name,
               data.size(), DataTypeName(tensor.dtype));
    }
    for (size_t offset = 0; offset + size <= data.size(); offset += size) {
      WriteElement(tensor.dtype, data.data() + offset, writer);
    }
  } else {
    DAIS_BUG("output '{}' has datatype {}", tensor.name, DataTypeName(tensor.dtype));
  }
  writer->EndArray();
}

void WriteString(std::string_view text, JsonWriter* writer) {
  writer->String(text.data(), static_cast<SizeType>(text.size()));
}

}  // namespace

EncodedResponse SerializeInferResponse(const runtime::InferenceResponse& response) {
  EncodedResponse encoded;
  std::string& body = encoded.body;
  StringOutput stream(&body);
  JsonWriter writer(stream);
  writer.StartObject();
  writer.Key("model_name");
  WriteString(response.model_name, &writer);
  writer.Key("model_version");
  WriteString(response.model_version, &writer);
  if (!response.id.empty()) {
    writer.Key("id");
    WriteString(response.id, &writer);
  }
  if (!response.parameters.empty()) {
    writer.Key("parameters");
    writer.StartObject();
    for (const auto& [k, v] : response.parameters) {
      writer.Key(k.data(), static_cast<rapidjson::SizeType>(k.size()));
      WriteString(v, &writer);
    }
    writer.EndObject();
  }
  writer.Key("outputs");
  writer.StartArray();
  bool any_binary = false;
  for (size_t i = 0; i < response.outputs.size(); ++i) {
    const Tensor& output = response.outputs[i];
    const bool binary = i < response.output_binary.size() && response.output_binary[i];
    writer.StartObject();
    writer.Key("name");
    WriteString(output.name, &writer);
    writer.Key("datatype");
    WriteString(DataTypeName(output.dtype), &writer);
    writer.Key("shape");
    writer.StartArray();
    for (int64_t dim : output.shape) writer.Int64(dim);
    writer.EndArray();
    if (binary) {
      any_binary = true;
      writer.Key("parameters");
      writer.StartObject();
      writer.Key("binary_data_size");
      writer.Uint64(output.data.size());
      writer.EndObject();
    } else {
      writer.Key("data");
      WriteData(output, &writer);
    }
    writer.EndObject();
  }
  writer.EndArray();
  writer.EndObject();

  if (any_binary) {
    encoded.header_length = body.size();
    size_t total = body.size();
    for (size_t i = 0; i < response.outputs.size(); ++i) {
      if (i < response.output_binary.size() && response.output_binary[i]) {
        total += response.outputs[i].data.size();
      }
    }
    body.reserve(total);
    for (size_t i = 0; i < response.outputs.size(); ++i) {
      if (i < response.output_binary.size() && response.output_binary[i]) {
        body.append(response.outputs[i].data);
      }
    }
  }
  return encoded;
}

std::string ErrorJson(const std::string& message) {
  std::string out;
  StringOutput stream(&out);
  JsonWriter writer(stream);
  writer.StartObject();
  writer.Key("error");
  // The message may quote what a client sent; the body stays valid UTF-8 whatever that was.
  WriteString(EscapeInvalidUtf8(message), &writer);
  writer.EndObject();
  return out;
}

}  // namespace dais::frontends::http
