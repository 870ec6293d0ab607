#include "frontends/grpc/grpc_codec.h"

#include <charconv>
#include <cstring>
#include <limits>

#include "dais/datatype.h"
#include "dais/tensor.h"

namespace dais::frontends::grpc {
namespace {

std::string Quote(const std::string& s) { return "'" + s + "'"; }

// Appends `values` converted to T, checking the range of each.
template <typename T, typename Src>
Status AppendTyped(const Src& values, const std::string& input, std::vector<char>* out) {
  out->resize(values.size() * sizeof(T));
  char* p = out->data();
  for (int i = 0; i < values.size(); ++i) {
    auto v = values.Get(i);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
      Wide w = static_cast<Wide>(v);
      if (w < static_cast<Wide>(std::numeric_limits<T>::min()) ||
          w > static_cast<Wide>(std::numeric_limits<T>::max())) {
        return InvalidArgument("input " + Quote(input) + ": value " + std::to_string(v) +
                               " at index " + std::to_string(i) + " is out of range");
      }
    }
    T t = static_cast<T>(v);
    std::memcpy(p + i * sizeof(T), &t, sizeof(T));
  }
  return OkStatus();
}

Status TypedContents(const inference::InferTensorContents& c, DataType type,
                     const std::string& input, int64_t elements, Tensor* t) {
  std::vector<char> bytes;
  int count = -1;
  Status s;
  switch (type) {
    case DataType::kBool:
      count = c.bool_contents_size();
      s = AppendTyped<bool>(c.bool_contents(), input, &bytes);
      break;
    case DataType::kInt8:
      count = c.int_contents_size();
      s = AppendTyped<int8_t>(c.int_contents(), input, &bytes);
      break;
    case DataType::kInt16:
      count = c.int_contents_size();
      s = AppendTyped<int16_t>(c.int_contents(), input, &bytes);
      break;
    case DataType::kInt32:
      count = c.int_contents_size();
      s = AppendTyped<int32_t>(c.int_contents(), input, &bytes);
      break;
    case DataType::kInt64:
      count = c.int64_contents_size();
      s = AppendTyped<int64_t>(c.int64_contents(), input, &bytes);
      break;
    case DataType::kUint8:
      count = c.uint_contents_size();
      s = AppendTyped<uint8_t>(c.uint_contents(), input, &bytes);
      break;
    case DataType::kUint16:
      count = c.uint_contents_size();
      s = AppendTyped<uint16_t>(c.uint_contents(), input, &bytes);
      break;
    case DataType::kUint32:
      count = c.uint_contents_size();
      s = AppendTyped<uint32_t>(c.uint_contents(), input, &bytes);
      break;
    case DataType::kUint64:
      count = c.uint64_contents_size();
      s = AppendTyped<uint64_t>(c.uint64_contents(), input, &bytes);
      break;
    case DataType::kFp32:
      count = c.fp32_contents_size();
      s = AppendTyped<float>(c.fp32_contents(), input, &bytes);
      break;
    case DataType::kFp64:
      count = c.fp64_contents_size();
      s = AppendTyped<double>(c.fp64_contents(), input, &bytes);
      break;
    case DataType::kBytes: {
      count = c.bytes_contents_size();
      for (const std::string& e : c.bytes_contents()) {
        uint32_t len = static_cast<uint32_t>(e.size());
        const char* lp = reinterpret_cast<const char*>(&len);
        bytes.insert(bytes.end(), lp, lp + 4);
        bytes.insert(bytes.end(), e.begin(), e.end());
      }
      break;
    }
    default:
      return InvalidArgument("input " + Quote(input) + ": datatype " +
                             std::string(DataTypeName(type)) +
                             " has no typed contents field; send it in raw_input_contents");
  }
  RETURN_IF_ERROR(s);
  if (count != elements) {
    return InvalidArgument("input " + Quote(input) + ": shape " + ShapeToString(t->shape) +
                           " has " + std::to_string(elements) + " elements but contents has " +
                           std::to_string(count));
  }
  t->Own(std::move(bytes));
  return OkStatus();
}

Status CheckRawSize(const Tensor& t, int64_t elements) {
  if (t.dtype != DataType::kBytes) {
    size_t want = static_cast<size_t>(elements) * DataTypeSize(t.dtype);
    if (t.data.size() != want) {
      return InvalidArgument("input " + Quote(t.name) + ": raw_input_contents holds " +
                             std::to_string(t.data.size()) + " bytes, shape " +
                             ShapeToString(t.shape) + " of " + std::string(DataTypeName(t.dtype)) +
                             " needs " + std::to_string(want));
    }
    return OkStatus();
  }
  size_t pos = 0;
  int64_t n = 0;
  while (pos < t.data.size()) {
    if (t.data.size() - pos < 4) break;
    uint32_t len;
    std::memcpy(&len, t.data.data() + pos, 4);
    if (t.data.size() - pos - 4 < len) break;
    pos += 4 + len;
    ++n;
  }
  if (pos != t.data.size() || n != elements) {
    return InvalidArgument("input " + Quote(t.name) + ": raw BYTES contents are not " +
                           std::to_string(elements) +
                           " elements of 4-byte little-endian length + bytes");
  }
  return OkStatus();
}

}  // namespace

::grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return ::grpc::Status::OK;
  return ::grpc::Status(static_cast<::grpc::StatusCode>(status.code()), status.message());
}

Status FromInferRequest(const inference::ModelInferRequest& msg, runtime::InferenceRequest* r) {
  r->model_name = msg.model_name();
  if (!msg.model_version().empty()) {
    const std::string& v = msg.model_version();
    int64_t parsed = -1;
    auto res = std::from_chars(v.data(), v.data() + v.size(), parsed);
    if (res.ec != std::errc() || res.ptr != v.data() + v.size() || parsed < 0) {
      return InvalidArgument("invalid model_version '" + v + "'");
    }
    r->model_version = parsed;
  }
  r->id = msg.id();
  for (const auto& [key, p] : msg.parameters()) {
    if (key == "timeout" || key == "priority") {
      int64_t value = p.parameter_choice_case() == inference::InferParameter::kInt64Param
                          ? p.int64_param()
                      : p.parameter_choice_case() == inference::InferParameter::kUint64Param
                          ? static_cast<int64_t>(p.uint64_param())
                          : -1;
      if (value < 0)
        return InvalidArgument("parameter '" + key + "' must be a non-negative integer");
      if (key == "timeout") r->timeout_us = static_cast<uint64_t>(value);
      if (key == "priority")
        r->priority = static_cast<uint32_t>(std::min<int64_t>(value, UINT32_MAX));
    } else if (key == "entity_ids") {
      if (p.parameter_choice_case() != inference::InferParameter::kStringParam) {
        return InvalidArgument("parameter 'entity_ids' must be a string of comma-separated ids");
      }
      std::string_view s = p.string_param();
      while (!s.empty()) {
        size_t c = s.find(',');
        r->entity_ids.emplace_back(s.substr(0, c));
        if (c == std::string_view::npos) break;
        s.remove_prefix(c + 1);
      }
    } else if (key == "sequence_id" || key == "sequence_start" || key == "sequence_end") {
      return InvalidArgument("sequence batching is not supported by dais");
    }
  }
  const bool raw = msg.raw_input_contents_size() > 0;
  if (raw && msg.raw_input_contents_size() != msg.inputs_size()) {
    return InvalidArgument("raw_input_contents has " +
                           std::to_string(msg.raw_input_contents_size()) + " entries for " +
                           std::to_string(msg.inputs_size()) + " inputs");
  }
  for (int i = 0; i < msg.inputs_size(); ++i) {
    const auto& in = msg.inputs(i);
    for (int j = 0; j < i; ++j) {
      if (msg.inputs(j).name() == in.name())
        return InvalidArgument("duplicate input " + Quote(in.name()));
    }
    Tensor t;
    t.name = in.name();
    t.dtype = DataTypeFromName(in.datatype());
    if (t.dtype == DataType::kInvalid) {
      return InvalidArgument("input " + Quote(in.name()) + ": unknown datatype '" + in.datatype() +
                             "'");
    }
    t.shape.assign(in.shape().begin(), in.shape().end());
    int64_t elements = ElementCount(t.shape);
    if (elements < 0) {
      return InvalidArgument("input " + Quote(in.name()) + ": invalid shape " +
                             ShapeToString(t.shape));
    }
    if (raw) {
      if (in.has_contents()) {
        return InvalidArgument("input " + Quote(in.name()) +
                               " has typed contents while the request uses raw_input_contents; "
                               "use one or the other");
      }
      const std::string& bytes = msg.raw_input_contents(i);
      t.data = std::string_view(bytes.data(), bytes.size());
      RETURN_IF_ERROR(CheckRawSize(t, elements));
    } else {
      if (!in.has_contents()) {
        return InvalidArgument("input " + Quote(in.name()) +
                               " has no data: set contents or raw_input_contents");
      }
      RETURN_IF_ERROR(TypedContents(in.contents(), t.dtype, in.name(), elements, &t));
    }
    r->inputs.push_back(std::move(t));
  }
  for (const auto& out : msg.outputs()) {
    for (const runtime::RequestedOutput& seen : r->outputs) {
      if (seen.name == out.name()) {
        return InvalidArgument("duplicate requested output " + Quote(out.name()));
      }
    }
    if (out.parameters().count("classification")) {
      return Unimplemented("the classification extension is not supported by dais");
    }
    r->outputs.push_back(runtime::RequestedOutput{out.name(), true});
  }
  return OkStatus();
}

void ToInferResponse(const runtime::InferenceResponse& response,
                     inference::ModelInferResponse* msg) {
  msg->set_model_name(response.model_name);
  msg->set_model_version(response.model_version);
  msg->set_id(response.id);
  for (const auto& [k, v] : response.parameters)
    (*msg->mutable_parameters())[k].set_string_param(v);
  for (const Tensor& t : response.outputs) {
    auto* out = msg->add_outputs();
    out->set_name(t.name);
    out->set_datatype(std::string(DataTypeName(t.dtype)));
    for (int64_t d : t.shape) out->add_shape(d);
    msg->add_raw_output_contents(t.data.data(), t.data.size());
  }
}

}  // namespace dais::frontends::grpc
