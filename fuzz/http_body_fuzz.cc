// Fuzzes what the HTTP server does with a request body before the KServe codec sees it, and the
// raw binary request:
//   - Content-Encoding / Accept-Encoding values (content_coding.h),
//   - a gzip / deflate body inflated in pieces under an output limit (common/zlib_codec.h), and
//     compress-then-inflate round trips,
//   - ParseRawInferRequest with a datatype and configured shape chosen by the input.
//
// Input: byte 0 picks the zlib format and datatype, byte 1 the piece size, byte 2 the shape;
// the rest is the body.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/zlib_codec.h"
#include "frontends/http/content_coding.h"
#include "frontends/http/infer_codec.h"

namespace {

void Require(bool condition) {
  if (!condition) std::abort();
}

constexpr uint64_t kLimit = 1 << 20;

void Inflate(dais::ZlibFormat format, std::string_view body, size_t piece) {
  dais::Inflater inflater(format, kLimit);
  std::string out;
  dais::Status s;
  for (size_t i = 0; i < body.size() && s.ok(); i += piece) {
    s = inflater.Feed(body.substr(i, piece), &out);
  }
  Require(out.size() == inflater.total_out());
  if (s.ok()) {
    Require(out.size() <= kLimit);
  } else {
    Require(!s.message().empty());
    Require(s.code() == dais::StatusCode::kInvalidArgument ||
            s.code() == dais::StatusCode::kResourceExhausted);
  }
}

void RoundTrip(dais::ZlibFormat format, std::string_view body, size_t piece) {
  const std::string packed = dais::Deflate(body, format);
  Require(!packed.empty());
  dais::Inflater inflater(format, body.size());
  std::string out;
  for (size_t i = 0; i < packed.size(); i += piece) {
    Require(inflater.Feed(std::string_view(packed).substr(i, piece), &out).ok());
  }
  Require(inflater.Finish().ok());
  Require(out == body);
}

void RawRequest(uint8_t type_selector, uint8_t shape_selector, std::string_view body) {
  static constexpr dais::DataType kTypes[] = {dais::DataType::kFp32,  dais::DataType::kInt8,
                                              dais::DataType::kInt64, dais::DataType::kBool,
                                              dais::DataType::kBytes, dais::DataType::kFp16};
  const dais::DataType dtype = kTypes[type_selector % std::size(kTypes)];
  // Up to 3 dimensions, each -1, 0, 1, 2 or 3.
  std::vector<int64_t> shape;
  for (int i = 0; i < shape_selector % 4; ++i) {
    shape.push_back(static_cast<int64_t>((shape_selector >> (2 + 2 * i)) % 5) - 1);
  }
  auto request = std::make_unique<dais::runtime::InferenceRequest>();
  dais::Status s = dais::frontends::http::ParseRawInferRequest(std::string(body), "x", dtype, shape,
                                                               request.get());
  if (!s.ok()) {
    Require(s.code() == dais::StatusCode::kInvalidArgument && !s.message().empty());
    return;
  }
  Require(request->inputs.size() == 1 && request->binary_output_default);
  const dais::Tensor& t = request->inputs[0];
  const int64_t count = dais::ElementCount(t.shape);
  Require(count >= 0);
  if (dtype == dais::DataType::kBytes) {
    Require(count == 1 && t.data.size() == body.size() + 4);
  } else {
    Require(t.data.size() == static_cast<uint64_t>(count) * dais::DataTypeSize(dtype));
    Require(t.data.size() == body.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const auto format = (data[0] & 1) ? dais::ZlibFormat::kGzip : dais::ZlibFormat::kZlib;
  const size_t piece = static_cast<size_t>(data[1]) + 1;
  const std::string_view body(reinterpret_cast<const char*>(data + 3), size - 3);

  auto coding = dais::frontends::http::RequestCoding(body.substr(0, 64));
  Require(coding.ok() || coding.status().code() == dais::StatusCode::kUnimplemented);
  (void)dais::frontends::http::AnswerCoding(body.substr(0, 256));

  Inflate(format, body, piece);
  if (body.size() <= 4096) RoundTrip(format, body, piece);
  RawRequest(static_cast<uint8_t>(data[0] >> 1), data[2], body);
  return 0;
}
