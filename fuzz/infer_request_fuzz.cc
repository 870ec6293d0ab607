// Fuzzes the KServe v2 HTTP request parser and the response serializer.
//
// Both JSON readers of the codec (simdjson and rapidjson) must agree on every input.
//
// Input: the first 2 bytes (little-endian) modulo (remaining size + 1) give the
// Inference-Header-Content-Length; the remaining bytes are the body. On a successful parse the
// inputs are echoed back as outputs (every other one binary) and serialized.
#include <rapidjson/document.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "frontends/http/infer_codec.h"

namespace {

// A failed invariant is a finding: abort so libFuzzer records the input.
void Require(bool condition) {
  if (!condition) std::abort();
}

// Checks what ParseInferRequest promises about a parsed input.
void CheckInput(const dais::runtime::InferenceRequest& request, const dais::Tensor& tensor) {
  const int64_t count = dais::ElementCount(tensor.shape);
  Require(count >= 0);
  Require(tensor.dtype != dais::DataType::kInvalid);
  if (tensor.dtype == dais::DataType::kBytes) {
    size_t offset = 0;
    int64_t elements = 0;
    while (offset < tensor.data.size()) {
      Require(tensor.data.size() - offset >= 4);
      uint32_t length;
      std::memcpy(&length, tensor.data.data() + offset, 4);
      offset += 4;
      Require(length <= tensor.data.size() - offset);
      offset += length;
      ++elements;
    }
    Require(elements == count);
  } else {
    Require(tensor.data.size() == static_cast<uint64_t>(count) * dais::DataTypeSize(tensor.dtype));
  }
  // Bytes are owned by the tensor or borrowed from the body, nothing else.
  const char* begin = tensor.data.data();
  const bool owned = !tensor.storage.empty() && begin == tensor.storage.data() &&
                     tensor.data.size() == tensor.storage.size();
  const bool borrowed = begin >= request.body.data() &&
                        begin + tensor.data.size() <= request.body.data() + request.body.size();
  Require(tensor.data.empty() || owned || borrowed);
}

// The codec's two JSON readers (simdjson, and rapidjson for what simdjson refuses) must read a
// body alike: same error, or the same request.
void CheckBothReadersAgree(const std::string& body, size_t header_length, dais::Status status,
                           const dais::runtime::InferenceRequest& request) {
  auto other = std::make_unique<dais::runtime::InferenceRequest>();
  dais::Status rapid =
      dais::frontends::http::ParseInferRequestWithRapidjson(body, header_length, other.get());
  Require(rapid.code() == status.code() && rapid.message() == status.message());
  if (!status.ok()) return;
  Require(request.id == other->id && request.entity_ids == other->entity_ids);
  Require(request.binary_output_default == other->binary_output_default);
  Require(request.timeout_us == other->timeout_us && request.priority == other->priority);
  Require(request.inputs.size() == other->inputs.size());
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    const dais::Tensor& a = request.inputs[i];
    const dais::Tensor& b = other->inputs[i];
    Require(a.name == b.name && a.dtype == b.dtype && a.shape == b.shape && a.data == b.data);
  }
  Require(request.outputs.size() == other->outputs.size());
  for (size_t i = 0; i < request.outputs.size(); ++i) {
    Require(request.outputs[i].name == other->outputs[i].name &&
            request.outputs[i].binary == other->outputs[i].binary);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t selector = static_cast<size_t>(data[0]) | (static_cast<size_t>(data[1]) << 8);
  const size_t body_size = size - 2;
  const size_t header_length = selector % (body_size + 1);

  auto request = std::make_unique<dais::runtime::InferenceRequest>();
  const std::string body(reinterpret_cast<const char*>(data + 2), body_size);
  dais::Status status =
      dais::frontends::http::ParseInferRequest(body, header_length, request.get());
  Require(request->body.size() == body_size);
  CheckBothReadersAgree(body, header_length, status, *request);
  if (!status.ok()) {
    Require(!status.message().empty());
    std::string error = dais::frontends::http::ErrorJson(status.message());
    rapidjson::Document document;
    document.Parse(error.data(), error.size());
    Require(!document.HasParseError() && document.IsObject());
    return 0;
  }

  dais::runtime::InferenceResponse response;
  response.model_name = "fuzz";
  response.model_version = "1";
  response.id = request->id;
  for (size_t i = 0; i < request->inputs.size(); ++i) {
    const dais::Tensor& input = request->inputs[i];
    CheckInput(*request, input);
    dais::Tensor output;
    output.name = input.name;
    output.dtype = input.dtype;
    output.shape = input.shape;
    if (i % 3 == 0) {
      output.Own(std::vector<char>(input.data.begin(), input.data.end()));
    } else {
      output.data = input.data;  // borrowed, as a backend's zero-copy output would be
    }
    response.outputs.push_back(std::move(output));
    const bool requested_binary = i < request->outputs.size() && request->outputs[i].binary;
    response.output_binary.push_back(requested_binary || i % 2 == 1);
  }

  dais::frontends::http::EncodedResponse encoded =
      dais::frontends::http::SerializeInferResponse(response);
  Require(encoded.header_length <= encoded.body.size());
  const size_t json_size = encoded.header_length > 0 ? encoded.header_length : encoded.body.size();
  size_t binary_size = 0;
  for (size_t i = 0; i < response.outputs.size(); ++i) {
    if (response.output_binary[i]) binary_size += response.outputs[i].data.size();
  }
  Require(encoded.body.size() == json_size + binary_size);
  // The header must be JSON (NaN/Infinity are written for non-finite floats).
  rapidjson::Document document;
  document.Parse<rapidjson::kParseNanAndInfFlag>(encoded.body.data(), json_size);
  Require(!document.HasParseError() && document.IsObject());
  Require(document.HasMember("outputs") && document["outputs"].IsArray() &&
          document["outputs"].Size() == response.outputs.size());
  return 0;
}
