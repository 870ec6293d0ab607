#include "perf/http_codec.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "common/status_testing.h"
#include "perf/input_data.h"

namespace dais::perf {
namespace {

RequestInputs TwoInputs() {
  ModelInfo m;
  m.name = "m";
  m.max_batch_size = 8;
  m.inputs = {{"x", "FP32", DataType::kFp32, {-1, 2}}, {"s", "BYTES", DataType::kBytes, {-1}}};
  auto r = ResolveInputs(m, 2);
  EXPECT_OK(r);
  auto data = ParseInputDataJson(R"({"data": [{"x": [0.1, -2], "s": ["ab"]}]})", *r);
  EXPECT_OK(data);
  return (*data)[0];
}

TEST(BuildInferBody, Json) {
  InferBody b = BuildInferBody(TwoInputs(), false);
  EXPECT_EQ(b.header_length, 0u);
  rapidjson::Document doc;
  doc.Parse(b.body.c_str());
  ASSERT_FALSE(doc.HasParseError()) << b.body;
  const auto& x = doc["inputs"][0];
  EXPECT_STREQ(x["name"].GetString(), "x");
  EXPECT_STREQ(x["datatype"].GetString(), "FP32");
  EXPECT_EQ(x["shape"][0].GetInt(), 2);
  ASSERT_EQ(x["data"].Size(), 4u);
  EXPECT_FLOAT_EQ(static_cast<float>(x["data"][0].GetDouble()), 0.1f);
  EXPECT_NE(b.body.find("0.1,"), std::string::npos) << b.body;  // shortest float text
  EXPECT_STREQ(doc["inputs"][1]["data"][1].GetString(), "ab");
  EXPECT_FALSE(doc.HasMember("parameters"));
}

TEST(BuildInferBody, Binary) {
  RequestInputs in = TwoInputs();
  InferBody b = BuildInferBody(in, true);
  ASSERT_GT(b.header_length, 0u);
  rapidjson::Document doc;
  doc.Parse(b.body.data(), b.header_length);
  ASSERT_FALSE(doc.HasParseError());
  EXPECT_EQ(doc["inputs"][0]["parameters"]["binary_data_size"].GetUint64(), 16u);
  EXPECT_EQ(doc["inputs"][1]["parameters"]["binary_data_size"].GetUint64(), 12u);
  EXPECT_TRUE(doc["parameters"]["binary_data_output"].GetBool());
  EXPECT_FALSE(doc["inputs"][0].HasMember("data"));
  EXPECT_EQ(b.body.substr(b.header_length), in[0].bytes + in[1].bytes);
}

TEST(ParseModelMetadata, DaisAnswer) {
  auto m = ParseModelMetadata(R"({"name":"mlp_small","versions":["1"],"platform":"pytorch_libtorch",
      "inputs":[{"name":"input__0","datatype":"FP32","shape":[-1,16]}],
      "outputs":[{"name":"output__0","datatype":"FP32","shape":[-1,4]}]})");
  ASSERT_OK(m);
  EXPECT_EQ(m->name, "mlp_small");
  EXPECT_EQ(m->versions, std::vector<std::string>{"1"});
  ASSERT_EQ(m->inputs.size(), 1u);
  EXPECT_EQ(m->inputs[0].dtype, DataType::kFp32);
  EXPECT_EQ(m->inputs[0].shape, (std::vector<int64_t>{-1, 16}));
  EXPECT_EQ(m->outputs[0].name, "output__0");
  EXPECT_FALSE(ParseModelMetadata("[]").ok());
  EXPECT_FALSE(ParseModelMetadata(R"({"inputs":[{"name":"x"}]})").ok());
}

TEST(ParseMaxBatchSize, FormsAndDefault) {
  EXPECT_EQ(*ParseMaxBatchSize(R"({"name":"m","max_batch_size":64})"), 64);
  EXPECT_EQ(*ParseMaxBatchSize(R"({"name":"m"})"), 0);
  EXPECT_EQ(*ParseMaxBatchSize(R"({"config":{"max_batch_size":"8"}})"), 8);
  EXPECT_FALSE(ParseMaxBatchSize(R"({"max_batch_size":true})").ok());
}

TEST(ParseModelStatistics, SumsVersions) {
  auto s = ParseModelStatistics(R"({"model_stats":[
      {"name":"m","version":"1","inference_count":10,"execution_count":5,
       "inference_stats":{"success":{"count":10,"ns":1000},"queue":{"count":10,"ns":100},
                          "compute_infer":{"count":5,"ns":500}}},
      {"name":"m","version":"2","inference_count":"4","execution_count":2,
       "inference_stats":{"success":{"count":4,"ns":"400"}}}]})");
  ASSERT_OK(s);
  EXPECT_EQ(s->inference_count, 14u);
  EXPECT_EQ(s->execution_count, 7u);
  EXPECT_EQ(s->success.count, 14u);
  EXPECT_EQ(s->success.ns, 1400u);
  EXPECT_EQ(s->queue.ns, 100u);
  EXPECT_EQ(s->compute_infer.count, 5u);
  EXPECT_FALSE(ParseModelStatistics(R"({"error":"no"})").ok());
}

TEST(ErrorText, ErrorMemberOrBody) {
  EXPECT_EQ(ErrorText(R"({"error":"unknown model 'x'"})"), "unknown model 'x'");
  EXPECT_EQ(ErrorText("plain"), "plain");
  EXPECT_EQ(ErrorText(""), "(empty body)");
}

}  // namespace
}  // namespace dais::perf
