#include "perf/input_data.h"

#include <gtest/gtest.h>

#include <cstring>

#include "common/status_testing.h"

namespace dais::perf {
namespace {

TensorSpec Spec(const std::string& name, const std::string& datatype, std::vector<int64_t> shape) {
  return TensorSpec{name, datatype, DataTypeFromName(datatype), std::move(shape)};
}

ModelInfo Model(int64_t max_batch_size, std::vector<TensorSpec> inputs) {
  ModelInfo m;
  m.name = "m";
  m.max_batch_size = max_batch_size;
  m.inputs = std::move(inputs);
  return m;
}

template <typename T>
std::vector<T> Values(const InputTensor& t) {
  std::vector<T> v(t.bytes.size() / sizeof(T));
  std::memcpy(v.data(), t.bytes.data(), v.size() * sizeof(T));
  return v;
}

TEST(ResolveInputs, BatchDimensionAndVariableDims) {
  auto r =
      ResolveInputs(Model(64, {Spec("x", "FP32", {-1, 16}), Spec("y", "INT64", {-1, -1, 3})}), 8);
  ASSERT_OK(r);
  EXPECT_EQ((*r)[0].shape, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ((*r)[1].shape, (std::vector<int64_t>{8, 1, 3}));
  EXPECT_TRUE((*r)[0].batched);
}

TEST(ResolveInputs, NonBatchingModelKeepsItsShape) {
  auto r = ResolveInputs(Model(0, {Spec("x", "FP32", {-1, 4})}), 1);
  ASSERT_OK(r);
  EXPECT_EQ((*r)[0].shape, (std::vector<int64_t>{1, 4}));
  EXPECT_FALSE((*r)[0].batched);
  auto bad = ResolveInputs(Model(0, {Spec("x", "FP32", {4})}), 2);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("does not batch"), std::string::npos);
}

TEST(ResolveInputs, Errors) {
  EXPECT_FALSE(ResolveInputs(Model(4, {Spec("x", "FP32", {-1, 4})}), 5).ok());  // > max
  EXPECT_FALSE(ResolveInputs(Model(4, {Spec("x", "COMPLEX", {-1, 4})}), 1).ok());
  EXPECT_FALSE(ResolveInputs(Model(4, {}), 1).ok());
}

TEST(ResolveInputs, UnknownConfigInfersBatchingFromShapes) {
  auto r = ResolveInputs(Model(-1, {Spec("x", "FP32", {-1, 4})}), 3);
  ASSERT_OK(r);
  EXPECT_EQ((*r)[0].shape, (std::vector<int64_t>{3, 4}));
  EXPECT_FALSE(ResolveInputs(Model(-1, {Spec("x", "FP32", {2, 4})}), 3).ok());
}

TEST(GenerateInputs, ShapesSizesAndDeterminism) {
  auto r = ResolveInputs(
      Model(8, {Spec("f", "FP32", {-1, 16}), Spec("h", "FP16", {-1, 2}), Spec("b", "BOOL", {-1}),
                Spec("i", "INT8", {-1, 3}), Spec("u", "UINT64", {-1}), Spec("d", "FP64", {-1}),
                Spec("bf", "BF16", {-1}), Spec("s", "BYTES", {-1, 2})}),
      4);
  ASSERT_OK(r);
  RequestInputs a = GenerateInputs(*r, DataMode::kRandom, 7, 5);
  ASSERT_EQ(a.size(), 8u);
  EXPECT_EQ(a[0].bytes.size(), 4u * 16 * 4);
  EXPECT_EQ(a[1].bytes.size(), 4u * 2 * 2);
  EXPECT_EQ(a[2].bytes.size(), 4u);
  EXPECT_EQ(a[3].bytes.size(), 12u);
  EXPECT_EQ(a[4].bytes.size(), 32u);
  EXPECT_EQ(a[5].bytes.size(), 32u);
  EXPECT_EQ(a[6].bytes.size(), 8u);
  EXPECT_EQ(a[7].bytes.size(), 8u * (4 + 5));
  EXPECT_EQ(a[0].shape, (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(a[0].datatype, "FP32");
  for (float f : Values<float>(a[0])) {
    EXPECT_GE(f, 0.0f);
    EXPECT_LT(f, 1.0f);
  }
  for (uint8_t b : Values<uint8_t>(a[2])) EXPECT_LE(b, 1);
  for (int8_t i : Values<int8_t>(a[3])) EXPECT_GE(i, 0);
  uint32_t len = 0;
  std::memcpy(&len, a[7].bytes.data(), 4);
  EXPECT_EQ(len, 5u);

  RequestInputs same = GenerateInputs(*r, DataMode::kRandom, 7, 5);
  RequestInputs other = GenerateInputs(*r, DataMode::kRandom, 8, 5);
  EXPECT_EQ(a[0].bytes, same[0].bytes);
  EXPECT_NE(a[0].bytes, other[0].bytes);

  RequestInputs zero = GenerateInputs(*r, DataMode::kZero, 7, 5);
  for (float f : Values<float>(zero[0])) EXPECT_EQ(f, 0.0f);
  EXPECT_EQ(zero[7].bytes.substr(4, 5), "00000");
}

TEST(ParseInputDataJson, SimpleAndObjectForms) {
  auto r = ResolveInputs(Model(8, {Spec("x", "FP32", {-1, 3}), Spec("n", "INT32", {-1, -1}),
                                   Spec("s", "BYTES", {-1})}),
                         2);
  ASSERT_OK(r);
  auto data = ParseInputDataJson(R"({"data": [
      {"x": [1, 2.5, 3], "n": {"content": [[1, 2], [3, 4]], "shape": [4]}, "s": ["hi"]},
      {"x": [[4, 5, 6]], "n": [7], "s": "yo"}]})",
                                 *r);
  ASSERT_OK(data);
  ASSERT_EQ(data->size(), 2u);
  const RequestInputs& first = (*data)[0];
  EXPECT_EQ(first[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Values<float>(first[0]), (std::vector<float>{1, 2.5, 3, 1, 2.5, 3}));  // repeated
  EXPECT_EQ(first[1].shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(Values<int32_t>(first[1]), (std::vector<int32_t>{1, 2, 3, 4, 1, 2, 3, 4}));
  EXPECT_EQ(first[2].bytes, std::string("\x02\0\0\0hi\x02\0\0\0hi", 12));
  const RequestInputs& second = (*data)[1];
  EXPECT_EQ(Values<float>(second[0]), (std::vector<float>{4, 5, 6, 4, 5, 6}));
  EXPECT_EQ(second[1].shape, (std::vector<int64_t>{2, 1}));
}

TEST(ParseInputDataJson, Errors) {
  auto r = ResolveInputs(Model(8, {Spec("x", "FP32", {-1, 3}), Spec("k", "UINT8", {-1})}), 1);
  ASSERT_OK(r);
  auto expect_error = [&](const char* json, const char* needle) {
    auto d = ParseInputDataJson(json, *r);
    ASSERT_FALSE(d.ok()) << json;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(d.status().message().find(needle), std::string::npos) << d.status().message();
  };
  expect_error("{", "malformed JSON at offset 1");
  expect_error((std::string(200, '[') + std::string(200, ']')).c_str(), "nested deeper");
  expect_error(R"({"inputs": []})", "expected");
  expect_error(R"({"data": []})", "expected");
  expect_error(R"({"data": [{"x": [1, 2, 3]}]})", "data[0].k: missing");
  expect_error(R"({"data": [{"x": [1, 2], "k": [1]}]})", "2 values given, shape [3] needs 3");
  expect_error(R"({"data": [{"x": [1, 2, "a"], "k": [1]}]})", "must be numbers");
  expect_error(R"({"data": [{"x": [1, 2, 3], "k": [300]}]})", "not a valid UINT8");
  expect_error(R"({"data": [{"x": [1, 2, 3], "k": [1.5]}]})", "not a valid UINT8");
  expect_error(R"({"data": [{"x": {"b64": "AAAA"}, "k": [1]}]})", "b64");
}

}  // namespace
}  // namespace dais::perf
