#include "frontends/http/infer_codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/status_testing.h"

namespace dais::frontends::http {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

struct Parsed {
  Status status;
  std::unique_ptr<runtime::InferenceRequest> request;
};

Parsed ParseOnce(std::string body, size_t header_length) {
  Parsed parsed;
  parsed.request = std::make_unique<runtime::InferenceRequest>();
  parsed.status = ParseInferRequest(std::move(body), header_length, parsed.request.get());
  return parsed;
}

// Whether two parses read the same request (or refused it with the same error).
void ExpectSameRequest(const Parsed& a, const Parsed& b, const std::string& body) {
  ASSERT_EQ(a.status.code(), b.status.code()) << body;
  ASSERT_EQ(a.status.message(), b.status.message()) << body;
  if (!a.status.ok()) return;
  const runtime::InferenceRequest& x = *a.request;
  const runtime::InferenceRequest& y = *b.request;
  EXPECT_EQ(x.id, y.id) << body;
  EXPECT_EQ(x.entity_ids, y.entity_ids) << body;
  EXPECT_EQ(x.binary_output_default, y.binary_output_default) << body;
  EXPECT_EQ(x.timeout_us, y.timeout_us) << body;
  EXPECT_EQ(x.priority, y.priority) << body;
  ASSERT_EQ(x.inputs.size(), y.inputs.size()) << body;
  for (size_t i = 0; i < x.inputs.size(); ++i) {
    EXPECT_EQ(x.inputs[i].name, y.inputs[i].name) << body;
    EXPECT_EQ(x.inputs[i].dtype, y.inputs[i].dtype) << body;
    EXPECT_EQ(x.inputs[i].shape, y.inputs[i].shape) << body;
    EXPECT_EQ(x.inputs[i].data, y.inputs[i].data) << body;
  }
  ASSERT_EQ(x.outputs.size(), y.outputs.size()) << body;
  for (size_t i = 0; i < x.outputs.size(); ++i) {
    EXPECT_EQ(x.outputs[i].name, y.outputs[i].name) << body;
    EXPECT_EQ(x.outputs[i].binary, y.outputs[i].binary) << body;
  }
}

// Every body goes through both of the codec's JSON readers: as it is (simdjson, unless it refuses
// the text) and with a first member that simdjson refuses and rapidjson reads (an integer beyond
// 64 bits, an unknown field the codec ignores), which sends it to rapidjson. Both must agree,
// except on where a malformed text is malformed (the offsets move).
Parsed Parse(std::string body, size_t header_length = 0) {
  Parsed parsed = ParseOnce(body, header_length);
  const std::string_view kMalformed = "malformed JSON", kDeep = "JSON nested deeper";
  const std::string& message = parsed.status.message();
  if (!body.starts_with('{') || header_length > body.size() || message.starts_with(kMalformed) ||
      message.starts_with(kDeep)) {
    return parsed;
  }
  const std::string member = R"("unknown_to_dais":18446744073709551616)";
  const bool empty = body.size() > 1 && body[1] == '}';
  std::string forced = "{" + member + (empty ? "" : ",") + body.substr(1);
  const size_t forced_header = header_length > 0 ? header_length + forced.size() - body.size() : 0;
  ExpectSameRequest(parsed, ParseOnce(std::move(forced), forced_header), body);
  return parsed;
}

// Parses a request with one input and returns its status (for error-path tests).
Status ParseOne(const std::string& input_json) {
  return Parse(R"({"inputs":[)" + input_json + "]}").status;
}

template <typename T>
std::vector<T> Values(const Tensor& tensor) {
  EXPECT_EQ(tensor.data.size() % sizeof(T), 0u);
  std::vector<T> values(tensor.data.size() / sizeof(T));
  std::memcpy(values.data(), tensor.data.data(), values.size() * sizeof(T));
  return values;
}

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// Triton's serialized BYTES form.
std::string Serialized(const std::vector<std::string>& elements) {
  std::string out;
  for (const std::string& element : elements) {
    uint32_t length = static_cast<uint32_t>(element.size());
    out.append(reinterpret_cast<const char*>(&length), 4);
    out += element;
  }
  return out;
}

Tensor MakeTensor(std::string name, DataType dtype, std::vector<int64_t> shape,
                  const std::string& bytes) {
  Tensor tensor;
  tensor.name = std::move(name);
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.Own(std::vector<char>(bytes.begin(), bytes.end()));
  return tensor;
}

// ---------------------------------------------------------------------------------------------
// JSON inputs, one datatype at a time.

TEST(ParseInferRequestTest, EveryDatatypeFromJson) {
  Parsed parsed = Parse(R"({"id":"req-1","inputs":[
    {"name":"bool","shape":[2],"datatype":"BOOL","data":[true,false]},
    {"name":"u8","shape":[2],"datatype":"UINT8","data":[0,255]},
    {"name":"u16","shape":[2],"datatype":"UINT16","data":[0,65535]},
    {"name":"u32","shape":[1],"datatype":"UINT32","data":[4294967295]},
    {"name":"u64","shape":[2],"datatype":"UINT64","data":[0,18446744073709551615]},
    {"name":"i8","shape":[2],"datatype":"INT8","data":[-128,127]},
    {"name":"i16","shape":[2],"datatype":"INT16","data":[-32768,32767]},
    {"name":"i32","shape":[2],"datatype":"INT32","data":[-2147483648,2147483647]},
    {"name":"i64","shape":[2],"datatype":"INT64","data":[-9223372036854775808,9223372036854775807]},
    {"name":"fp16","shape":[3],"datatype":"FP16","data":[1.0,-2,0.1]},
    {"name":"fp32","shape":[3],"datatype":"FP32","data":[1.5,-2,3.4028235e38]},
    {"name":"fp64","shape":[3],"datatype":"FP64","data":[0.1,-7,1e300]},
    {"name":"bf16","shape":[2],"datatype":"BF16","data":[1,3.140625]},
    {"name":"bytes","shape":[3],"datatype":"BYTES","data":["ab","","\u0000z"]}
  ]})");
  ASSERT_OK(parsed.status);
  const runtime::InferenceRequest& request = *parsed.request;
  EXPECT_EQ(request.id, "req-1");
  ASSERT_EQ(request.inputs.size(), 14u);
  const auto& in = request.inputs;

  EXPECT_EQ(in[0].name, "bool");
  EXPECT_EQ(in[0].dtype, DataType::kBool);
  EXPECT_EQ(in[0].shape, std::vector<int64_t>{2});
  EXPECT_EQ(in[0].data, std::string("\x01\x00", 2));
  EXPECT_EQ(Values<uint8_t>(in[1]), (std::vector<uint8_t>{0, 255}));
  EXPECT_EQ(Values<uint16_t>(in[2]), (std::vector<uint16_t>{0, 65535}));
  EXPECT_EQ(Values<uint32_t>(in[3]), (std::vector<uint32_t>{4294967295u}));
  EXPECT_EQ(Values<uint64_t>(in[4]),
            (std::vector<uint64_t>{0, std::numeric_limits<uint64_t>::max()}));
  EXPECT_EQ(Values<int8_t>(in[5]), (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(Values<int16_t>(in[6]), (std::vector<int16_t>{-32768, 32767}));
  EXPECT_EQ(Values<int32_t>(in[7]), (std::vector<int32_t>{std::numeric_limits<int32_t>::min(),
                                                          std::numeric_limits<int32_t>::max()}));
  EXPECT_EQ(Values<int64_t>(in[8]), (std::vector<int64_t>{std::numeric_limits<int64_t>::min(),
                                                          std::numeric_limits<int64_t>::max()}));
  EXPECT_EQ(in[9].dtype, DataType::kFp16);
  EXPECT_EQ(Values<uint16_t>(in[9]), (std::vector<uint16_t>{0x3c00, 0xc000, 0x2e66}));
  EXPECT_EQ(Values<float>(in[10]),
            (std::vector<float>{1.5f, -2.0f, std::numeric_limits<float>::max()}));
  EXPECT_EQ(Values<double>(in[11]), (std::vector<double>{0.1, -7.0, 1e300}));
  EXPECT_EQ(in[12].dtype, DataType::kBf16);
  EXPECT_EQ(Values<uint16_t>(in[12]), (std::vector<uint16_t>{0x3f80, 0x4049}));
  EXPECT_EQ(in[13].dtype, DataType::kBytes);
  EXPECT_EQ(in[13].data, Serialized({"ab", "", std::string("\0z", 2)}));

  for (const Tensor& tensor : in) {
    // JSON data is owned by the tensor, not borrowed from the body.
    EXPECT_EQ(tensor.data.data(), tensor.storage.data()) << tensor.name;
  }
}

TEST(ParseInferRequestTest, NestedDataIsFlattenedRowMajor) {
  Parsed parsed = Parse(R"({"inputs":[
    {"name":"a","shape":[2,3],"datatype":"INT32","data":[[1,2,3],[4,5,6]]},
    {"name":"b","shape":[2,2,1],"datatype":"INT32","data":[[[1],[2]],[[3],[4]]]},
    {"name":"c","shape":[4],"datatype":"INT32","data":[[[1],[2]],[[3],[4]]]},
    {"name":"d","shape":[2],"datatype":"BYTES","data":[["x"],["yz"]]}
  ]})");
  ASSERT_OK(parsed.status);
  const auto& in = parsed.request->inputs;
  EXPECT_EQ(in[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Values<int32_t>(in[0]), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(Values<int32_t>(in[1]), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(Values<int32_t>(in[2]), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(in[3].data, Serialized({"x", "yz"}));
}

TEST(ParseInferRequestTest, IntegralDoublesAreAcceptedForIntegerTypes) {
  Parsed parsed = Parse(R"({"inputs":[
    {"name":"i","shape":[3],"datatype":"INT32","data":[1.0,-2e3,0.0]},
    {"name":"u","shape":[2],"datatype":"UINT64","data":[1e19,18446744073709549568.0]},
    {"name":"l","shape":[1],"datatype":"INT64","data":[-9223372036854775808.0]}
  ]})");
  ASSERT_OK(parsed.status);
  EXPECT_EQ(Values<int32_t>(parsed.request->inputs[0]), (std::vector<int32_t>{1, -2000, 0}));
  EXPECT_EQ(Values<uint64_t>(parsed.request->inputs[1]),
            (std::vector<uint64_t>{10000000000000000000ull, 18446744073709549568ull}));
  EXPECT_EQ(Values<int64_t>(parsed.request->inputs[2]),
            std::vector<int64_t>{std::numeric_limits<int64_t>::min()});
}

TEST(ParseInferRequestTest, ScalarAndEmptyTensors) {
  Parsed parsed = Parse(R"({"inputs":[
    {"name":"scalar","shape":[],"datatype":"FP32","data":[2.5]},
    {"name":"bare","shape":[],"datatype":"INT64","data":7},
    {"name":"empty","shape":[0,3],"datatype":"FP32","data":[]},
    {"name":"empty_bytes","shape":[0],"datatype":"BYTES","data":[]}
  ]})");
  ASSERT_OK(parsed.status);
  const auto& in = parsed.request->inputs;
  EXPECT_TRUE(in[0].shape.empty());
  EXPECT_EQ(Values<float>(in[0]), std::vector<float>{2.5f});
  EXPECT_EQ(Values<int64_t>(in[1]), std::vector<int64_t>{7});
  EXPECT_TRUE(in[2].data.empty());
  EXPECT_TRUE(in[3].data.empty());
}

TEST(ParseInferRequestTest, DeeplyNestedDataIsRefusedWithoutOverflowingTheStack) {
  const int depth = 200000;
  std::string data = std::string(depth, '[') + "1" + std::string(depth, ']');
  Parsed parsed =
      Parse(R"({"inputs":[{"name":"x","shape":[1],"datatype":"INT8","data":)" + data + "}]}");
  EXPECT_EQ(parsed.status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status.message(), HasSubstr("nested deeper than 100 levels"));
  // Deep nesting elsewhere (ignored parameters) is refused the same way.
  Parsed ignored = Parse(R"({"parameters":{"x":)" + data + R"(},"inputs":[]})");
  EXPECT_THAT(ignored.status.message(), HasSubstr("nested deeper than 100 levels"));
}

TEST(ParseInferRequestTest, DepthLimitCountsContainers) {
  // max_json_depth nested containers are accepted, whatever is inside; one more is refused.
  auto parse = [](const std::string& body) {
    runtime::InferenceRequest request;
    return ParseInferRequest(body, 0, &request, /*max_json_depth=*/3);
  };
  EXPECT_EQ(parse(R"({"inputs":[[1]]})").message(), "input 0 must be an object, got an array");
  EXPECT_EQ(parse(R"({"inputs":[[]]})").message(), "input 0 must be an object, got an array");
  EXPECT_EQ(parse(R"({"inputs":[[[1]]]})").message(),
            "JSON nested deeper than 3 levels at offset 12");
  EXPECT_EQ(parse(R"({"inputs":[[[]]]})").message(),
            "JSON nested deeper than 3 levels at offset 12");
}

TEST(ParseInferRequestTest, Fp16AndBf16RoundToNearestEven) {
  Parsed parsed = Parse(R"({"inputs":[
    {"name":"h","shape":[5],"datatype":"FP16","data":[65504,1.00048828125,1.00146484375,5.960464477539063e-8,-0.0]},
    {"name":"b","shape":[2],"datatype":"BF16","data":[1.00390625,1.01171875]}
  ]})");
  ASSERT_OK(parsed.status);
  // 1 + 2^-11 ties to 1.0; 1 + 3*2^-11 ties to 1 + 2^-9; 2^-24 is the smallest subnormal.
  EXPECT_EQ(Values<uint16_t>(parsed.request->inputs[0]),
            (std::vector<uint16_t>{0x7bff, 0x3c00, 0x3c02, 0x0001, 0x8000}));
  EXPECT_EQ(Values<uint16_t>(parsed.request->inputs[1]), (std::vector<uint16_t>{0x3f80, 0x3f82}));
}

TEST(ParseInferRequestTest, FloatRangeErrors) {
  Status status = ParseOne(R"({"name":"h","shape":[2],"datatype":"FP16","data":[1,65520]})");
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "input 'h': value 65520 at index 1 is out of range for FP16");
  status = ParseOne(R"({"name":"b","shape":[1],"datatype":"BF16","data":[-1e39]})");
  EXPECT_EQ(status.message(), "input 'b': value -1e+39 at index 0 is out of range for BF16");
  status = ParseOne(R"({"name":"f","shape":[1],"datatype":"FP32","data":[3.5e38]})");
  EXPECT_EQ(status.message(), "input 'f': value 3.5e+38 at index 0 is out of range for FP32");
  // Too big for a double is a JSON error (rapidjson rejects it).
  status = ParseOne(R"({"name":"d","shape":[1],"datatype":"FP64","data":[1e400]})");
  EXPECT_THAT(status.message(), StartsWith("malformed JSON at offset "));
}

TEST(ParseInferRequestTest, NumbersAreCorrectlyRounded) {
  // The texts a client prints (shortest round-trip forms, 17 digits, extremes) read back to the
  // exact double strtod gives; integers beyond 64 bits become doubles; underflow is zero.
  const std::vector<std::string> texts = {"0.1",
                                          "0.30000000000000004",
                                          "2.2250738585072014e-308",
                                          "4.9e-324",
                                          "1.7976931348623157e308",
                                          "-123.456e-7",
                                          "9007199254740993",
                                          "18446744073709551616",
                                          "123456789012345678901234567890",
                                          "1e-400",
                                          "-0",
                                          "0.12345678901234567890123456789"};
  std::string data;
  for (const std::string& t : texts) data += (data.empty() ? "" : ",") + t;
  Parsed parsed = Parse(R"({"inputs":[{"name":"d","shape":[)" + std::to_string(texts.size()) +
                        R"(],"datatype":"FP64","data":[)" + data + "]}]}");
  ASSERT_OK(parsed.status);
  std::vector<double> got = Values<double>(parsed.request->inputs[0]);
  ASSERT_EQ(got.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(got[i], std::strtod(texts[i].c_str(), nullptr)) << texts[i];
  }
  // FP32 from the same texts: the double, rounded to float.
  parsed = Parse(R"({"inputs":[{"name":"f","shape":[3],"datatype":"FP32","data":[0.1,1e-50,)"
                 R"(16777217]}]})");
  ASSERT_OK(parsed.status);
  EXPECT_EQ(Values<float>(parsed.request->inputs[0]),
            (std::vector<float>{static_cast<float>(0.1), 0.f, 16777216.f}));
  // INT64 keeps every bit of a 64-bit integer.
  parsed = Parse(R"({"inputs":[{"name":"i","shape":[2],"datatype":"INT64","data":)"
                 R"([-9223372036854775808,9223372036854775807]}]})");
  ASSERT_OK(parsed.status);
  EXPECT_EQ(Values<int64_t>(parsed.request->inputs[0]),
            (std::vector<int64_t>{INT64_MIN, INT64_MAX}));
  // Beyond the largest double is not a number JSON readers agree on (rapidjson's full precision
  // read it as NaN, which reached the model before issue 18): refused as such.
  for (const char* type : {"FP64", "FP32", "FP16", "BF16"}) {
    Status status = ParseOne(std::string(R"({"name":"d","shape":[2],"datatype":")") + type +
                             R"(","data":[1,-1.8e308]})");
    EXPECT_EQ(status.message(),
              "malformed JSON at offset 63: a number beyond the range of a double (+-1.8e308)");
  }
  // A zero with a large exponent is zero (rapidjson's own conversion read "0e50" as -1.55e-266).
  parsed = Parse(R"({"inputs":[{"name":"z","shape":[3],"datatype":"FP64","data":)"
                 R"([0e50,0e+300,18446744073709551616]}]})");
  ASSERT_OK(parsed.status);
  EXPECT_EQ(Values<double>(parsed.request->inputs[0]), (std::vector<double>{0, 0, 0x1p64}));
}

TEST(ParseInferRequestTest, TextSimdjsonRefusesIsReadByRapidjson) {
  // BYTES elements that are not UTF-8 (simdjson validates, rapidjson takes them as they are) and
  // integers beyond 64 bits (simdjson refuses, rapidjson reads a double): read as before simdjson.
  Parsed parsed = Parse(
      "{\"inputs\":[{\"name\":\"s\",\"shape\":[2],\"datatype\":\"BYTES\","
      "\"data\":[\"\xff\xfe\",\"ok\"]}]}");
  ASSERT_OK(parsed.status);
  EXPECT_EQ(parsed.request->inputs[0].data, Serialized({"\xff\xfe", "ok"}));
  parsed = Parse(R"({"inputs":[{"name":"f","shape":[1],"datatype":"FP32","data":[)"
                 R"(99999999999999999999999]}]})");
  ASSERT_OK(parsed.status);
  EXPECT_EQ(Values<float>(parsed.request->inputs[0]), std::vector<float>{1e23f});
  // Negative zero keeps its sign (json.dumps(-0.0) is "-0.0"; "-0" is the integer zero).
  parsed = Parse(R"({"inputs":[{"name":"z","shape":[2],"datatype":"FP32","data":[-0.0,-0]}]})");
  ASSERT_OK(parsed.status);
  EXPECT_TRUE(std::signbit(Values<float>(parsed.request->inputs[0])[0]));
  EXPECT_FALSE(std::signbit(Values<float>(parsed.request->inputs[0])[1]));
}

TEST(ParseInferRequestTest, NanAndInfinityAreRejected) {
  for (const char* value : {"NaN", "Infinity", "-Infinity", "nan"}) {
    Status status = ParseOne(std::string(R"({"name":"x","shape":[1],"datatype":"FP32","data":[)") +
                             value + "]}");
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << value;
    EXPECT_THAT(status.message(), StartsWith("malformed JSON at offset ")) << value;
  }
}

// ---------------------------------------------------------------------------------------------
// JSON data errors.

TEST(ParseInferRequestTest, WrongElementCount) {
  Status status =
      ParseOne(R"({"name":"INPUT0","shape":[2,3],"datatype":"FP32","data":[1,2,3,4,5]})");
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "input 'INPUT0': shape [2,3] has 6 elements but data has 5");
  status = ParseOne(R"({"name":"INPUT0","shape":[1],"datatype":"BYTES","data":["a","b"]})");
  EXPECT_EQ(status.message(), "input 'INPUT0': shape [1] has 1 elements but data has 2");
  status = ParseOne(R"({"name":"INPUT0","shape":[],"datatype":"INT32","data":[]})");
  EXPECT_EQ(status.message(), "input 'INPUT0': shape [] has 1 elements but data has 0");
}

TEST(ParseInferRequestTest, IntegerRangeErrorsNameInputAndIndex) {
  struct Case {
    const char* datatype;
    const char* data;
    const char* message;
  };
  const Case cases[] = {
      {"UINT8", "[1,300]", "input 'X': value 300 at index 1 is out of range for UINT8"},
      {"UINT8", "[-1]", "input 'X': value -1 at index 0 is out of range for UINT8"},
      {"INT8", "[0,0,-129]", "input 'X': value -129 at index 2 is out of range for INT8"},
      {"INT16", "[32768]", "input 'X': value 32768 at index 0 is out of range for INT16"},
      {"UINT16", "[65536]", "input 'X': value 65536 at index 0 is out of range for UINT16"},
      {"INT32", "[2147483648]", "input 'X': value 2147483648 at index 0 is out of range for INT32"},
      {"UINT32", "[4294967296]",
       "input 'X': value 4294967296 at index 0 is out of range for UINT32"},
      {"INT64", "[9223372036854775808]",
       "input 'X': value 9223372036854775808 at index 0 is out of range for INT64"},
      {"UINT64", "[-1]", "input 'X': value -1 at index 0 is out of range for UINT64"},
      {"INT32", "[1.5]", "input 'X': value 1.5 at index 0 is not an integer (datatype INT32)"},
      {"INT32", "[1.0000001]",
       "input 'X': value 1.0000001 at index 0 is not an integer (datatype INT32)"},
      {"UINT64", "[18446744073709551616]",
       "input 'X': value 18446744073709551616 at index 0 is out of range for UINT64"},
      {"INT64", "[-9.3e18]", "input 'X': value -9.3e+18 at index 0 is out of range for INT64"},
      {"UINT8", "[256.0]", "input 'X': value 256 at index 0 is out of range for UINT8"},
      {"INT8", "[-1e300]", "input 'X': value -1e+300 at index 0 is out of range for INT8"},
      {"INT8", "[true]",
       "input 'X': element at index 0 must be an integer for datatype INT8, got a boolean"},
      {"BOOL", "[1]",
       "input 'X': element at index 0 must be a boolean for datatype BOOL, got a number"},
      {"FP32", "[1,\"2\"]",
       "input 'X': element at index 1 must be a number for datatype FP32, got a string"},
      {"FP16", "[null]",
       "input 'X': element at index 0 must be a number for datatype FP16, got null"},
      {"BYTES", "[\"a\",1]",
       "input 'X': element at index 1 must be a string for datatype BYTES, got a number"},
      {"FP64", "[{}]",
       "input 'X': element at index 0 must be a number for datatype FP64, got an object"},
  };
  for (const Case& c : cases) {
    int count = 1;
    for (const char* p = c.data; *p; ++p) count += *p == ',';
    std::string input = std::string(R"({"name":"X","shape":[)") + std::to_string(count) +
                        R"(],"datatype":")" + c.datatype + R"(","data":)" + c.data + "}";
    Status status = ParseOne(input);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << input;
    EXPECT_EQ(status.message(), c.message) << input;
  }
}

TEST(ParseInferRequestTest, FieldErrors) {
  struct Case {
    std::string body;
    std::string message;
  };
  const std::vector<Case> cases = {
      {R"({})", "missing field 'inputs'"},
      {R"({"outputs":[]})", "missing field 'inputs'"},
      {R"([])", "request body must be a JSON object, got an array"},
      {R"({"inputs":{}})", "'inputs' must be an array, got an object"},
      {R"({"inputs":[3]})", "input 0 must be an object, got a number"},
      {R"({"inputs":[{"shape":[1],"datatype":"FP32","data":[1]}]})",
       "missing field 'name' for input 0"},
      {R"({"inputs":[{"name":5,"shape":[1],"datatype":"FP32","data":[1]}]})",
       "input 0: 'name' must be a string, got a number"},
      {R"({"inputs":[{"name":"X","datatype":"FP32","data":[1]}]})",
       "missing field 'shape' for input 'X'"},
      {R"({"inputs":[{"name":"X","shape":1,"datatype":"FP32","data":[1]}]})",
       "input 'X': 'shape' must be an array of integers, got a number"},
      {R"({"inputs":[{"name":"X","shape":[1.5],"datatype":"FP32","data":[1]}]})",
       "input 'X': shape dimension 0 must be an integer, got 1.5"},
      {R"({"inputs":[{"name":"X","shape":[2,-3],"datatype":"FP32","data":[1]}]})",
       "input 'X': shape [2,-3] has negative dimension 1"},
      {R"({"inputs":[{"name":"X","shape":[4294967296,4294967296],"datatype":"FP32","data":[1]}]})",
       "input 'X': shape [4294967296,4294967296] has too many elements"},
      {R"({"inputs":[{"name":"X","shape":[1],"data":[1]}]})",
       "missing field 'datatype' for input 'X'"},
      {R"({"inputs":[{"name":"X","shape":[1],"datatype":"FP31","data":[1]}]})",
       "unknown datatype 'FP31' for input 'X'"},
      {R"({"inputs":[{"name":"X","shape":[1],"datatype":"INVALID","data":[1]}]})",
       "unknown datatype 'INVALID' for input 'X'"},
      {R"({"inputs":[{"name":"X","shape":[1],"datatype":"TYPE_FP32","data":[1]}]})",
       "unknown datatype 'TYPE_FP32' for input 'X'"},
      {R"({"inputs":[{"name":"X","shape":[1],"datatype":32,"data":[1]}]})",
       "input 'X': 'datatype' must be a string, got a number"},
      {R"({"inputs":[{"name":"X","shape":[1],"datatype":"FP32"}]})",
       "input 'X' has neither 'data' nor parameters.binary_data_size"},
      {R"({"inputs":[{"name":"X","shape":[1],"datatype":"FP32","data":[1],"parameters":{"binary_data_size":4}}]})",
       "input 'X' has both 'data' and parameters.binary_data_size"},
      {R"({"inputs":[{"name":"X","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":-4}}]})",
       "input 'X': parameter 'binary_data_size' must be a non-negative integer, got -4"},
      {R"({"inputs":[{"name":"X","shape":[1],"datatype":"FP32","parameters":[]}]})",
       "input 'X': 'parameters' must be an object, got an array"},
      {R"({"inputs":[{"name":"X","shape":[1],"datatype":"FP32","data":[1]},)"
       R"({"name":"X","shape":[1],"datatype":"FP32","data":[2]}]})",
       "duplicate input 'X'"},
      {R"({"id":7,"inputs":[]})", "'id' must be a string, got a number"},
  };
  for (const Case& c : cases) {
    Parsed parsed = Parse(c.body);
    EXPECT_EQ(parsed.status.code(), StatusCode::kInvalidArgument) << c.body;
    EXPECT_EQ(parsed.status.message(), c.message) << c.body;
  }
}

TEST(ParseInferRequestTest, MalformedJson) {
  Parsed parsed = Parse(R"({"inputs": [1 2]})");
  EXPECT_EQ(parsed.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status.message(),
            "malformed JSON at offset 14: Missing a comma or ']' after an array element.");
  parsed = Parse("");
  EXPECT_EQ(parsed.status.message(), "malformed JSON at offset 0: The document is empty.");
  parsed = Parse(R"({"inputs":[]} x)");
  EXPECT_EQ(parsed.status.message(),
            "malformed JSON at offset 14: The document root must not be followed by other "
            "values.");
  parsed = Parse(R"({"inputs":"abc)");
  EXPECT_THAT(parsed.status.message(), StartsWith("malformed JSON at offset "));
  // NUL ends a C string; it must not hide trailing garbage.
  parsed = Parse(std::string(R"({"inputs":[]})") + '\0' + "garbage");
  EXPECT_EQ(parsed.status.message(), "malformed JSON at offset 13: NUL byte");
}

TEST(ParseInferRequestTest, EmptyInputsIsAccepted) {
  // The protocol only requires the field; the runtime checks the model's inputs.
  Parsed parsed = Parse(R"({"inputs":[]})");
  ASSERT_OK(parsed.status);
  EXPECT_TRUE(parsed.request->inputs.empty());
  EXPECT_TRUE(parsed.request->outputs.empty());
}

// ---------------------------------------------------------------------------------------------
// Binary tensor data extension.

TEST(ParseInferRequestTest, BinaryInputsBorrowFromTheBody) {
  std::string header =
      R"({"inputs":[{"name":"A","shape":[2,2],"datatype":"FP32","parameters":{"binary_data_size":16}}]})";
  std::string binary = Bytes(std::vector<float>{1.f, 2.f, 3.f, 4.f});
  Parsed parsed = Parse(header + binary, header.size());
  ASSERT_OK(parsed.status);
  const runtime::InferenceRequest& request = *parsed.request;
  ASSERT_EQ(request.inputs.size(), 1u);
  const Tensor& a = request.inputs[0];
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(a.data.data(), request.body.data() + header.size());  // borrowed, not copied
  EXPECT_TRUE(a.storage.empty());
  EXPECT_EQ(Values<float>(a), (std::vector<float>{1.f, 2.f, 3.f, 4.f}));
}

TEST(ParseInferRequestTest, MixedJsonAndBinaryInputsTakeSlicesInOrder) {
  std::string header = R"({"inputs":[
    {"name":"j1","shape":[1],"datatype":"INT32","data":[5]},
    {"name":"b1","shape":[3],"datatype":"UINT8","parameters":{"binary_data_size":3,"other":1}},
    {"name":"j2","shape":[2],"datatype":"BOOL","data":[false,true]},
    {"name":"b2","shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":13}},
    {"name":"b3","shape":[1],"datatype":"INT64","parameters":{"binary_data_size":8}},
    {"name":"b4","shape":[0],"datatype":"FP32","parameters":{"binary_data_size":0}}
  ]})";
  std::string b1 = "\x01\x02\x03";
  std::string b2 = Serialized({"hi", "you"});
  std::string b3 = Bytes(std::vector<int64_t>{-42});
  ASSERT_EQ(b2.size(), 13u);
  Parsed parsed = Parse(header + b1 + b2 + b3, header.size());
  ASSERT_OK(parsed.status);
  const runtime::InferenceRequest& request = *parsed.request;
  const auto& in = request.inputs;
  ASSERT_EQ(in.size(), 6u);
  const char* binary = request.body.data() + header.size();
  EXPECT_EQ(Values<int32_t>(in[0]), std::vector<int32_t>{5});
  EXPECT_EQ(in[1].data.data(), binary);
  EXPECT_EQ(in[1].data, b1);
  EXPECT_EQ(in[2].data, std::string("\0\1", 2));
  EXPECT_EQ(in[3].data.data(), binary + 3);
  EXPECT_EQ(in[3].data, b2);
  EXPECT_EQ(in[4].data.data(), binary + 3 + 13);
  EXPECT_EQ(Values<int64_t>(in[4]), std::vector<int64_t>{-42});
  EXPECT_TRUE(in[5].data.empty());
}

TEST(ParseInferRequestTest, TruncatedBinarySection) {
  std::string header = R"({"inputs":[
    {"name":"A","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}},
    {"name":"B","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}}]})";
  Parsed parsed = Parse(header + std::string(8, 'x'), header.size());
  EXPECT_EQ(parsed.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status.message(),
            "truncated binary data for input 'B': expected 8 bytes, 4 remain");
}

TEST(ParseInferRequestTest, OversizedBinarySection) {
  std::string header =
      R"({"inputs":[{"name":"A","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}}]})";
  Parsed parsed = Parse(header + std::string(6, 'x'), header.size());
  EXPECT_EQ(parsed.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status.message(),
            "binary data section has 6 bytes but the inputs' binary_data_size add up to 4");
  // Binary bytes with only JSON inputs are an error too.
  header = R"({"inputs":[{"name":"A","shape":[1],"datatype":"FP32","data":[1]}]})";
  parsed = Parse(header + "zz", header.size());
  EXPECT_EQ(parsed.status.message(),
            "binary data section has 2 bytes but the inputs' binary_data_size add up to 0");
}

TEST(ParseInferRequestTest, BinaryDataSizeWithoutHeaderLength) {
  // Without Inference-Header-Content-Length the whole body is JSON: there is no binary section.
  Parsed parsed = Parse(
      R"({"inputs":[{"name":"A","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}}]})");
  EXPECT_EQ(parsed.status.message(),
            "truncated binary data for input 'A': expected 4 bytes, 0 remain");
}

TEST(ParseInferRequestTest, HeaderLengthLargerThanBody) {
  std::string body = R"({"inputs":[]})";
  Parsed parsed = Parse(body, body.size() + 1);
  EXPECT_EQ(parsed.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status.message(),
            "Inference-Header-Content-Length 14 is larger than the body (13 bytes)");
  // Exactly the body is fine: an empty binary section.
  EXPECT_OK(Parse(body, body.size()).status);
  // Shorter than the JSON cuts it.
  EXPECT_THAT(Parse(body, 5).status.message(), StartsWith("malformed JSON at offset "));
}

TEST(ParseInferRequestTest, BinaryDataSizeMustMatchShape) {
  std::string header =
      R"({"inputs":[{"name":"A","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":12}}]})";
  Parsed parsed = Parse(header + std::string(12, 'x'), header.size());
  EXPECT_EQ(parsed.status.message(),
            "input 'A': binary_data_size 12 does not match shape [2] of FP32 (2 elements of 4 "
            "bytes)");
  // A product that overflows once multiplied by the element size.
  header =
      R"({"inputs":[{"name":"A","shape":[4611686018427387904],"datatype":"FP64","parameters":{"binary_data_size":0}}]})";
  parsed = Parse(header, header.size());
  EXPECT_THAT(parsed.status.message(), HasSubstr("does not match shape"));
}

TEST(ParseInferRequestTest, BinaryBytesMustBeWellFormed) {
  auto parse_bytes = [](const std::string& shape, const std::string& binary) {
    std::string header = R"({"inputs":[{"name":"S","shape":)" + shape +
                         R"(,"datatype":"BYTES","parameters":{"binary_data_size":)" +
                         std::to_string(binary.size()) + "}}]}";
    return Parse(header + binary, header.size());
  };
  Parsed ok = parse_bytes("[3]", Serialized({"a", "", "bcd"}));
  ASSERT_OK(ok.status);
  EXPECT_EQ(ok.request->inputs[0].data, Serialized({"a", "", "bcd"}));

  EXPECT_EQ(parse_bytes("[3]", Serialized({"a", "b"})).status.message(),
            "input 'S': shape [3] has 3 elements but binary data has 2 BYTES elements");
  EXPECT_EQ(parse_bytes("[1]", Serialized({"a"}) + "\x01\x00").status.message(),
            "input 'S': BYTES element 1 at offset 5 has a truncated 4-byte length prefix");
  std::string long_length(
      "\x10\x00\x00\x00"
      "abc",
      7);
  EXPECT_EQ(parse_bytes("[1]", long_length).status.message(),
            "input 'S': BYTES element 0 has length 16 but only 3 bytes remain");
  std::string huge_length("\xff\xff\xff\xff", 4);
  EXPECT_EQ(parse_bytes("[1]", huge_length).status.message(),
            "input 'S': BYTES element 0 has length 4294967295 but only 0 bytes remain");
}

// ---------------------------------------------------------------------------------------------
// Request parameters and requested outputs.

TEST(ParseInferRequestTest, RequestParameters) {
  Parsed parsed = Parse(R"({"parameters":{"timeout":1500,"priority":2,"binary_data_output":true,
    "unknown":{"nested":[1]}},"inputs":[]})");
  ASSERT_OK(parsed.status);
  EXPECT_EQ(parsed.request->timeout_us, 1500u);
  EXPECT_EQ(parsed.request->priority, 2u);
  EXPECT_TRUE(parsed.request->binary_output_default);

  parsed = Parse(R"({"inputs":[]})");
  EXPECT_EQ(parsed.request->timeout_us, 0u);
  EXPECT_EQ(parsed.request->priority, 0u);
  EXPECT_FALSE(parsed.request->binary_output_default);
}

TEST(ParseInferRequestTest, RequestParameterErrors) {
  struct Case {
    std::string parameters;
    std::string message;
  };
  const std::vector<Case> cases = {
      {R"({"timeout":-1})",
       "parameter 'timeout' must be a non-negative integer (microseconds), got -1"},
      {R"({"timeout":1.5})",
       "parameter 'timeout' must be a non-negative integer (microseconds), got 1.5"},
      {R"({"timeout":"10"})",
       "parameter 'timeout' must be a non-negative integer (microseconds), got a string"},
      {R"({"priority":4294967296})",
       "parameter 'priority' must be an integer in [0, 4294967295], got 4294967296"},
      {R"({"priority":-1})", "parameter 'priority' must be an integer in [0, 4294967295], got -1"},
      {R"({"binary_data_output":1})", "parameter 'binary_data_output' must be a boolean, got 1"},
      {R"({"sequence_id":1})",
       "parameter 'sequence_id': sequence batching is not supported by dais"},
      {R"({"sequence_start":true})",
       "parameter 'sequence_start': sequence batching is not supported by dais"},
      {R"({"sequence_end":false})",
       "parameter 'sequence_end': sequence batching is not supported by dais"},
      {R"([1])", "request 'parameters' must be an object, got an array"},
  };
  for (const Case& c : cases) {
    Parsed parsed = Parse(R"({"parameters":)" + c.parameters + R"(,"inputs":[]})");
    EXPECT_EQ(parsed.status.code(), StatusCode::kInvalidArgument) << c.parameters;
    EXPECT_EQ(parsed.status.message(), c.message) << c.parameters;
  }
}

TEST(ParseInferRequestTest, RequestedOutputs) {
  Parsed parsed = Parse(R"({"inputs":[],"outputs":[
    {"name":"a","parameters":{"binary_data":true}},
    {"name":"b","parameters":{"binary_data":false}},
    {"name":"c"},
    {"name":"d","parameters":{"other":1}}]})");
  ASSERT_OK(parsed.status);
  const auto& out = parsed.request->outputs;
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].name, "a");
  EXPECT_TRUE(out[0].binary);
  EXPECT_FALSE(out[1].binary);
  EXPECT_FALSE(out[2].binary);
  EXPECT_FALSE(out[3].binary);

  // binary_data_output is the default for outputs that do not say, wherever it appears.
  parsed = Parse(R"({"outputs":[{"name":"a","parameters":{"binary_data":false}},{"name":"c"}],
    "inputs":[],"parameters":{"binary_data_output":true}})");
  ASSERT_OK(parsed.status);
  EXPECT_FALSE(parsed.request->outputs[0].binary);
  EXPECT_TRUE(parsed.request->outputs[1].binary);
}

TEST(ParseInferRequestTest, RequestedOutputErrors) {
  Parsed parsed =
      Parse(R"({"inputs":[],"outputs":[{"name":"probs","parameters":{"classification":3}}]})");
  EXPECT_EQ(parsed.status.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(parsed.status.message(),
            "output 'probs': the classification extension is not supported by dais");

  struct Case {
    std::string outputs;
    std::string message;
  };
  const std::vector<Case> cases = {
      {R"({})", "'outputs' must be an array, got an object"},
      {R"([1])", "requested output 0 must be an object, got a number"},
      {R"([{}])", "missing field 'name' for requested output 0"},
      {R"([{"name":null}])", "requested output 0: 'name' must be a string, got null"},
      {R"([{"name":"a","parameters":{"binary_data":"yes"}}])",
       "output 'a': parameter 'binary_data' must be a boolean, got a string"},
      {R"([{"name":"a","parameters":5}])",
       "output 'a': 'parameters' must be an object, got a number"},
      {R"([{"name":"a"},{"name":"a"}])", "duplicate requested output 'a'"},
  };
  for (const Case& c : cases) {
    parsed = Parse(R"({"inputs":[],"outputs":)" + c.outputs + "}");
    EXPECT_EQ(parsed.status.code(), StatusCode::kInvalidArgument) << c.outputs;
    EXPECT_EQ(parsed.status.message(), c.message) << c.outputs;
  }
}

// ---------------------------------------------------------------------------------------------
// Responses.

TEST(SerializeInferResponseTest, JsonOnly) {
  runtime::InferenceResponse response;
  response.model_name = "simple";
  response.model_version = "3";
  response.id = "r1";
  response.outputs.push_back(
      MakeTensor("OUT", DataType::kFp32, {2}, Bytes(std::vector<float>{1.5f, 0.1f})));
  response.outputs.push_back(
      MakeTensor("I", DataType::kInt64, {1, 2}, Bytes(std::vector<int64_t>{-1, 1LL << 40})));
  response.output_binary = {false, false};
  EncodedResponse encoded = SerializeInferResponse(response);
  EXPECT_EQ(encoded.header_length, 0u);
  EXPECT_EQ(encoded.body,
            R"({"model_name":"simple","model_version":"3","id":"r1","outputs":[)"
            R"({"name":"OUT","datatype":"FP32","shape":[2],"data":[1.5,0.1]},)"
            R"({"name":"I","datatype":"INT64","shape":[1,2],"data":[-1,1099511627776]}]})");
}

TEST(SerializeInferResponseTest, EmptyIdIsOmitted) {
  runtime::InferenceResponse response;
  response.model_name = "m";
  response.model_version = "1";
  EncodedResponse encoded = SerializeInferResponse(response);
  EXPECT_EQ(encoded.body, R"({"model_name":"m","model_version":"1","outputs":[]})");
  EXPECT_EQ(encoded.header_length, 0u);
}

TEST(SerializeInferResponseTest, EveryDatatypeAsJson) {
  runtime::InferenceResponse response;
  response.model_name = "m";
  response.model_version = "1";
  response.outputs.push_back(MakeTensor("b", DataType::kBool, {3}, std::string("\1\0\2", 3)));
  response.outputs.push_back(MakeTensor("u8", DataType::kUint8, {1}, "\xff"));
  response.outputs.push_back(
      MakeTensor("u16", DataType::kUint16, {1}, Bytes(std::vector<uint16_t>{65535})));
  response.outputs.push_back(
      MakeTensor("u32", DataType::kUint32, {1}, Bytes(std::vector<uint32_t>{4294967295u})));
  response.outputs.push_back(
      MakeTensor("u64", DataType::kUint64, {1},
                 Bytes(std::vector<uint64_t>{std::numeric_limits<uint64_t>::max()})));
  response.outputs.push_back(MakeTensor("i8", DataType::kInt8, {1}, "\x80"));
  response.outputs.push_back(
      MakeTensor("i16", DataType::kInt16, {1}, Bytes(std::vector<int16_t>{-32768})));
  response.outputs.push_back(
      MakeTensor("i32", DataType::kInt32, {1},
                 Bytes(std::vector<int32_t>{std::numeric_limits<int32_t>::min()})));
  response.outputs.push_back(
      MakeTensor("i64", DataType::kInt64, {1},
                 Bytes(std::vector<int64_t>{std::numeric_limits<int64_t>::min()})));
  response.outputs.push_back(MakeTensor("f16", DataType::kFp16, {3},
                                        Bytes(std::vector<uint16_t>{0x3c00, 0xc000, 0x2e66})));
  response.outputs.push_back(
      MakeTensor("bf16", DataType::kBf16, {2}, Bytes(std::vector<uint16_t>{0x3f80, 0x4049})));
  response.outputs.push_back(
      MakeTensor("f64", DataType::kFp64, {3}, Bytes(std::vector<double>{0.1, -1e300, 2})));
  response.outputs.push_back(
      MakeTensor("f32", DataType::kFp32, {4},
                 Bytes(std::vector<float>{std::numeric_limits<float>::quiet_NaN(),
                                          std::numeric_limits<float>::infinity(),
                                          -std::numeric_limits<float>::infinity(), 1e-45f})));
  response.outputs.push_back(MakeTensor("s", DataType::kBytes, {3},
                                        Serialized({"a\"b\\", "", std::string("\n\0\x01", 3)})));
  response.output_binary.assign(response.outputs.size(), false);
  EncodedResponse encoded = SerializeInferResponse(response);
  EXPECT_EQ(encoded.header_length, 0u);
  EXPECT_EQ(
      encoded.body,
      R"({"model_name":"m","model_version":"1","outputs":[)"
      R"({"name":"b","datatype":"BOOL","shape":[3],"data":[true,false,true]},)"
      R"({"name":"u8","datatype":"UINT8","shape":[1],"data":[255]},)"
      R"({"name":"u16","datatype":"UINT16","shape":[1],"data":[65535]},)"
      R"({"name":"u32","datatype":"UINT32","shape":[1],"data":[4294967295]},)"
      R"({"name":"u64","datatype":"UINT64","shape":[1],"data":[18446744073709551615]},)"
      R"({"name":"i8","datatype":"INT8","shape":[1],"data":[-128]},)"
      R"({"name":"i16","datatype":"INT16","shape":[1],"data":[-32768]},)"
      R"({"name":"i32","datatype":"INT32","shape":[1],"data":[-2147483648]},)"
      R"({"name":"i64","datatype":"INT64","shape":[1],"data":[-9223372036854775808]},)"
      R"({"name":"f16","datatype":"FP16","shape":[3],"data":[1,-2,0.0999755859375]},)"
      R"({"name":"bf16","datatype":"BF16","shape":[2],"data":[1,3.140625]},)"
      R"({"name":"f64","datatype":"FP64","shape":[3],"data":[0.1,-1e+300,2]},)"
      R"({"name":"f32","datatype":"FP32","shape":[4],"data":[NaN,Infinity,-Infinity,1e-45]},)"
      R"({"name":"s","datatype":"BYTES","shape":[3],"data":["a\"b\\","","\n\u0000\u0001"]}]})");
}

TEST(SerializeInferResponseTest, BinaryOutputsFollowTheJsonHeader) {
  runtime::InferenceResponse response;
  response.model_name = "m";
  response.model_version = "2";
  std::string a = Bytes(std::vector<float>{1.f, 2.f});
  std::string s = Serialized({"xy"});
  response.outputs.push_back(MakeTensor("A", DataType::kFp32, {2}, a));
  response.outputs.push_back(
      MakeTensor("J", DataType::kInt32, {1}, Bytes(std::vector<int32_t>{7})));
  response.outputs.push_back(MakeTensor("S", DataType::kBytes, {1}, s));
  response.output_binary = {true, false, true};
  EncodedResponse encoded = SerializeInferResponse(response);
  const std::string json =
      R"({"model_name":"m","model_version":"2","outputs":[)"
      R"({"name":"A","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}},)"
      R"({"name":"J","datatype":"INT32","shape":[1],"data":[7]},)"
      R"({"name":"S","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":6}}]})";
  EXPECT_EQ(encoded.header_length, json.size());
  EXPECT_EQ(encoded.body, json + a + s);
}

TEST(SerializeInferResponseTest, MissingBinaryFlagsMeanJson) {
  runtime::InferenceResponse response;
  response.outputs.push_back(MakeTensor("A", DataType::kUint8, {1}, "\x05"));
  // output_binary shorter than outputs: the rest are JSON.
  EncodedResponse encoded = SerializeInferResponse(response);
  EXPECT_EQ(encoded.header_length, 0u);
  EXPECT_THAT(encoded.body, HasSubstr(R"("data":[5])"));
}

TEST(SerializeInferResponseTest, MalformedOutputBytesDoNotCrash) {
  runtime::InferenceResponse response;
  response.outputs.push_back(MakeTensor("S", DataType::kBytes, {2}, Serialized({"ok"}) + "\x09"));
  response.outputs.push_back(MakeTensor("F", DataType::kFp32, {1}, "\x01\x02\x03"));
  response.output_binary = {false, false};
  EncodedResponse encoded = SerializeInferResponse(response);
  EXPECT_THAT(encoded.body,
              HasSubstr(R"("name":"S","datatype":"BYTES","shape":[2],"data":["ok"])"));
  EXPECT_THAT(encoded.body, HasSubstr(R"("name":"F","datatype":"FP32","shape":[1],"data":[])"));
}

TEST(SerializeInferResponseTest, BytesRoundTripThroughJson) {
  // Parse a BYTES input from JSON, echo it as an output, read the response back.
  Parsed parsed = Parse(
      R"({"inputs":[{"name":"in","shape":[4],"datatype":"BYTES","data":["plain","qu\"ote\n","\u00e9\u4e2d","\u0000"]}]})");
  ASSERT_OK(parsed.status);
  Tensor& in = parsed.request->inputs[0];
  runtime::InferenceResponse response;
  response.model_name = "echo";
  response.model_version = "1";
  response.outputs.push_back(std::move(in));
  response.output_binary = {false};
  EncodedResponse encoded = SerializeInferResponse(response);

  rapidjson::Document document;
  document.Parse(encoded.body.data(), encoded.body.size());
  ASSERT_FALSE(document.HasParseError()) << encoded.body;
  const rapidjson::Value& data = document["outputs"][0]["data"];
  ASSERT_EQ(data.Size(), 4u);
  EXPECT_EQ(std::string(data[0].GetString(), data[0].GetStringLength()), "plain");
  EXPECT_EQ(std::string(data[1].GetString(), data[1].GetStringLength()), "qu\"ote\n");
  EXPECT_EQ(std::string(data[2].GetString(), data[2].GetStringLength()), "\xc3\xa9\xe4\xb8\xad");
  EXPECT_EQ(std::string(data[3].GetString(), data[3].GetStringLength()), std::string(1, '\0'));
}

TEST(SerializeInferResponseTest, BinaryRequestEchoedAsBinaryResponse) {
  std::string header =
      R"({"inputs":[{"name":"x","shape":[3],"datatype":"INT16","parameters":{"binary_data_size":6}}],)"
      R"("outputs":[{"name":"x","parameters":{"binary_data":true}}]})";
  std::string binary = Bytes(std::vector<int16_t>{1, -2, 3});
  Parsed parsed = Parse(header + binary, header.size());
  ASSERT_OK(parsed.status);
  runtime::InferenceResponse response;
  response.model_name = "m";
  response.model_version = "1";
  Tensor out;
  out.name = "x";
  out.dtype = DataType::kInt16;
  out.shape = {3};
  out.data = parsed.request->inputs[0].data;  // borrowed from the request body
  response.outputs.push_back(std::move(out));
  response.output_binary = {parsed.request->outputs[0].binary};
  EncodedResponse encoded = SerializeInferResponse(response);
  ASSERT_GT(encoded.header_length, 0u);
  EXPECT_EQ(encoded.body.substr(encoded.header_length), binary);
}

TEST(ErrorJsonTest, Escapes) {
  EXPECT_EQ(ErrorJson("model 'x' not found"), R"({"error":"model 'x' not found"})");
  EXPECT_EQ(ErrorJson("he said \"hi\"\n\\ \t"), R"({"error":"he said \"hi\"\n\\ \t"})");
  EXPECT_EQ(ErrorJson(std::string("nul\0!", 5)), R"({"error":"nul\u0000!"})");
  EXPECT_EQ(ErrorJson(""), R"({"error":""})");
}

// Issue 11: error bodies quoting what a client sent must stay valid UTF-8.
TEST(ErrorJsonTest, InvalidUtf8IsEscapedValidKept) {
  EXPECT_EQ(ErrorJson("not found: /v2/models/\xff\xfe"),
            R"({"error":"not found: /v2/models/\\xff\\xfe"})");
  EXPECT_EQ(ErrorJson("model '\xc3\xa9t\xc3\xa9' \xe2\x82\xac"),
            "{\"error\":\"model '\xc3\xa9t\xc3\xa9' \xe2\x82\xac\"}");
  // Truncated sequence, overlong form, surrogate, beyond U+10FFFF.
  EXPECT_EQ(ErrorJson("\xe2\x82"), R"({"error":"\\xe2\\x82"})");
  EXPECT_EQ(ErrorJson("\xc0\xaf"), R"({"error":"\\xc0\\xaf"})");
  EXPECT_EQ(ErrorJson("\xed\xa0\x80"), R"({"error":"\\xed\\xa0\\x80"})");
  EXPECT_EQ(ErrorJson("\xf4\x90\x80\x80"), R"({"error":"\\xf4\\x90\\x80\\x80"})");
}

std::string Nested(int depth, std::string_view leaf) {
  return std::string(depth, '[') + std::string(leaf) + std::string(depth, ']');
}

std::string WithData(const std::string& data, std::string_view shape) {
  return R"({"inputs":[{"name":"x","datatype":"INT32","shape":)" + std::string(shape) +
         R"(,"data":)" + data + "}]}";
}

// Issue 11: nesting depth was unbounded (a 40 MB body of '[' took 11.7 s and 0.9 GB).
TEST(ParseInferRequestTest, NestingDeeperThanTheLimitIsRefusedAtOnce) {
  runtime::InferenceRequest ok_request;
  // 100 levels in all: the request object, "inputs", the input object, and 97 of data.
  ASSERT_OK(ParseInferRequest(WithData(Nested(97, "1"), "[1]"), 0, &ok_request));
  runtime::InferenceRequest deep;
  Status s = ParseInferRequest(WithData(Nested(98, "1"), "[1]"), 0, &deep);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("nested deeper than 100 levels"));
  runtime::InferenceRequest huge;
  std::string body(40 << 20, '[');
  s = ParseInferRequest(std::move(body), 0, &huge);
  EXPECT_THAT(s.message(), HasSubstr("nested deeper than 100 levels at offset 10"));
}

TEST(ParseInferRequestTest, RaggedNestedDataIsRefused) {
  for (const char* data :
       {"[[[1]],2,[3,[4]]]", "[[1,2],[3]]", "[[1,2],3,4]", "[1,[2]]", "[[1],[[2]]]", "[[],[1]]"}) {
    runtime::InferenceRequest r;
    Status s = ParseInferRequest(WithData(data, "[4]"), 0, &r);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << data;
    EXPECT_THAT(s.message(), HasSubstr("ragged")) << data;
  }
  for (const char* data : {"[1,2,3,4]", "[[1,2],[3,4]]", "[[[1],[2]],[[3],[4]]]"}) {
    runtime::InferenceRequest r;
    EXPECT_OK(ParseInferRequest(WithData(data, "[4]"), 0, &r));
  }
}

}  // namespace
}  // namespace dais::frontends::http
