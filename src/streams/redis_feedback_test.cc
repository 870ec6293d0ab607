// The feedback stream against a real redis-server: entries written off the caller's thread,
// capped, with the record as JSON; bad URLs named; a full buffer drops and counts.
#include "streams/redis_feedback.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <cmath>
#include <cstring>
#include <thread>

#include "common/status_testing.h"
#include "redis/testing/redis_process.h"

namespace dais::streams {
namespace {

server::FeedbackRecord Record(int i) {
  server::FeedbackRecord r;
  r.id = "req-" + std::to_string(i);
  r.model = "mlp_small";
  r.version = "1";
  r.entity_ids = {"user-7"};
  r.latency_us = 120;
  r.time_ms = 1764633600000;
  server::FeedbackTensor in;
  in.name = "INPUT__0";
  in.dtype = DataType::kFp32;
  in.shape = {1, 2};
  const float v[2] = {0.5f, static_cast<float>(i)};
  in.bytes.assign(reinterpret_cast<const char*>(v), sizeof(v));
  r.inputs.push_back(std::move(in));
  server::FeedbackTensor out;
  out.name = "OUTPUT__0";
  out.dtype = DataType::kInt64;
  out.shape = {1};
  const int64_t o = 42;
  out.bytes.assign(reinterpret_cast<const char*>(&o), sizeof(o));
  r.outputs.push_back(std::move(out));
  server::FeedbackTensor big;
  big.name = "EMBEDDING";
  big.dtype = DataType::kFp16;
  big.shape = {1, 100000};
  big.truncated = true;
  r.outputs.push_back(std::move(big));
  return r;
}

TEST(FeedbackStream, UrlsAreParsedAndBadOnesNamed) {
  ASSERT_OK_AND_ASSIGN(StreamAddress a, ParseStreamUrl("redis://127.0.0.1:6379/dais:feedback"));
  EXPECT_EQ(a.redis, "127.0.0.1:6379");
  EXPECT_EQ(a.stream, "dais:feedback");
  for (const char* bad : {"127.0.0.1:6379/s", "redis://127.0.0.1:6379", "redis://127.0.0.1:6379/",
                          "redis://nohost/s", "redis://h:99999/s"}) {
    EXPECT_EQ(ParseStreamUrl(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(FeedbackStream, TheRecordIsJsonWithNumbersAndTruncatedTensorsMarked) {
  rapidjson::Document d;
  d.Parse(FeedbackRecordJson(Record(3)).c_str());
  ASSERT_TRUE(d.IsObject());
  EXPECT_STREQ(d["id"].GetString(), "req-3");
  EXPECT_STREQ(d["entity_ids"][0].GetString(), "user-7");
  EXPECT_DOUBLE_EQ(d["inputs"][0]["data"][1].GetDouble(), 3.0);
  EXPECT_STREQ(d["inputs"][0]["datatype"].GetString(), "FP32");
  EXPECT_EQ(d["outputs"][0]["data"][0].GetInt64(), 42);
  EXPECT_TRUE(d["outputs"][1]["truncated"].GetBool());
  EXPECT_FALSE(d["outputs"][1].HasMember("data"));
  // Floats in their shortest form; NaN (not JSON) as null.
  server::FeedbackRecord r = Record(0);
  const float v[3] = {0.1f, std::nanf(""), -2.5e-8f};
  r.inputs[0].shape = {3};
  r.inputs[0].bytes.assign(reinterpret_cast<const char*>(v), sizeof(v));
  const std::string json = FeedbackRecordJson(r);
  EXPECT_NE(json.find("\"data\":[0.1,null,-2.5e-08]"), std::string::npos) << json;
}

TEST(FeedbackStream, RecordsReachACappedRedisStream) {
  ASSERT_OK_AND_ASSIGN(auto redis, redis::testing::RedisProcess::Start());
  FeedbackStreamOptions o;
  o.url = "redis://" + redis->address() + "/fb";
  o.max_len = 50;
  {
    ASSERT_OK_AND_ASSIGN(auto stream, RedisFeedbackStream::Create(o));
    for (int i = 0; i < 400; ++i) ASSERT_TRUE(stream->Offer(Record(i)));
  }  // the destructor writes what is buffered
  ASSERT_OK_AND_ASSIGN(redis::Reply len,
                       redis::testing::BlockingCall(redis->address(), {"XLEN", "fb"}));
  // MAXLEN ~ trims in whole macro nodes: at least 50 kept, far fewer than 400.
  EXPECT_GE(len.integer, 50);
  EXPECT_LT(len.integer, 400);
  ASSERT_OK_AND_ASSIGN(
      redis::Reply last,
      redis::testing::BlockingCall(redis->address(), {"XREVRANGE", "fb", "+", "-", "COUNT", "1"}));
  ASSERT_EQ(last.elements.size(), 1u);
  const auto& fields = last.elements[0].elements[1].elements;
  ASSERT_GE(fields.size(), 10u);
  EXPECT_EQ(fields[0].str, "id");
  EXPECT_EQ(fields[1].str, "req-399");  // in order, the last one last
  EXPECT_EQ(fields[8].str, "record");
  rapidjson::Document d;
  d.Parse(fields[9].str.c_str());
  EXPECT_STREQ(d["model"].GetString(), "mlp_small");
}

TEST(FeedbackStream, WithoutRedisOfferNeverBlocksAndAFullBufferDrops) {
  FeedbackStreamOptions o;
  o.url = "redis://127.0.0.1:1/fb";  // nothing listens there
  o.buffer = 10;
  ASSERT_OK_AND_ASSIGN(auto stream, RedisFeedbackStream::Create(o));
  int taken = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i) taken += stream->Offer(Record(i));
  EXPECT_LT(taken, 1000);  // the buffer holds 10 (plus what the writer took meanwhile)
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace dais::streams
