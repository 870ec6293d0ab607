// The Feast codec over an in-process feature store: push then read back, and the errors a client
// gets for what it sent wrong (each a Status naming the field).
#include "frontends/http/feast_http.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <future>

#include "common/status_testing.h"
#include "features/spec/feature_spec.h"
#include "features/store/memory_tier.h"

namespace dais::frontends::http {
namespace {

using features::FeatureSpecPtr;

constexpr const char* kSpec = R"(
domain: shop
entities:
  - {name: user_id, key_type: int64}
feature_groups:
  - name: user_profile
    entity: user_id
    max_age: 1h
    features:
      - {name: age, dtype: FP32, default: 30}
      - {name: clicks, dtype: INT64, shape: [3], default: [1, 2, 3]}
)";

class FeastHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(spec_, features::ParseFeatureSpec(kSpec, "shop.yaml"));
    features::StoreOptions o;
    store_ = std::make_unique<features::FeatureStore>(
        o, std::make_unique<features::MemoryTier>(1 << 20));
    FeatureSpecPtr spec = spec_;
    PushOptions push;
    push.now_us = [] { return int64_t{1'800'000'000} * 1'000'000; };  // 2027-01-15
    api_ = std::make_unique<FeastHttp>(
        store_.get(), [spec] { return std::vector<FeatureSpecPtr>{spec}; },
        [spec](const std::string& name) { return name == "ranker" ? spec : FeatureSpecPtr(); },
        push);
  }

  StatusOr<std::string> Call(bool push, const std::string& body) {
    std::promise<StatusOr<std::string>> p;
    auto done = [&p](StatusOr<std::string> json) { p.set_value(std::move(json)); };
    push ? api_->Push(body, done) : api_->GetOnlineFeatures(body, done);
    return p.get_future().get();
  }

  // The status of a request that must fail, and that its message names `word`.
  StatusCode Fails(bool push, const std::string& body, const std::string& word) {
    StatusOr<std::string> r = Call(push, body);
    EXPECT_FALSE(r.ok()) << body;
    if (r.ok()) return StatusCode::kOk;
    EXPECT_NE(r.status().message().find(word), std::string::npos) << r.status().ToString();
    return r.status().code();
  }

  FeatureSpecPtr spec_;
  std::unique_ptr<features::FeatureStore> store_;
  std::unique_ptr<FeastHttp> api_;
};

TEST_F(FeastHttpTest, PushThenGetOnlineFeatures) {
  ASSERT_OK_AND_ASSIGN(std::string written, Call(true, R"({"push_source_name": "user_profile",
      "df": {"user_id": [7], "event_timestamp": ["2027-01-15T07:00:00Z"], "age": [41.5],
             "clicks": [[4, 5, 6]]}})"));
  EXPECT_EQ(written, R"({"written":1,"skipped_older":0})");
  ASSERT_OK_AND_ASSIGN(std::string json, Call(false, R"({"features": ["user_profile:age",
      "user_profile:clicks"], "entities": {"user_id": [7, 8]}, "full_feature_names": true})"));
  rapidjson::Document d;
  d.Parse(json.c_str());
  ASSERT_TRUE(d.IsObject()) << json;
  const auto& names = d["metadata"]["feature_names"];
  ASSERT_EQ(names.Size(), 3u);
  EXPECT_STREQ(names[0].GetString(), "user_id");
  EXPECT_STREQ(names[1].GetString(), "user_profile__age");
  const auto& results = d["results"];
  EXPECT_EQ(results[1]["values"][0].GetDouble(), 41.5);
  EXPECT_STREQ(results[1]["statuses"][0].GetString(), "PRESENT");
  EXPECT_TRUE(results[1]["values"][1].IsNull());  // 8 was never pushed
  EXPECT_STREQ(results[1]["statuses"][1].GetString(), "NOT_FOUND");
  EXPECT_EQ(results[2]["values"][0][2].GetInt64(), 6);
  EXPECT_STREQ(results[1]["event_timestamps"][0].GetString(), "2027-01-15T07:00:00Z");
}

TEST_F(FeastHttpTest, FeatureServiceNamesAModel) {
  ASSERT_OK(Call(false, R"({"feature_service": "ranker", "entities": {"user_id": [1]}})"));
  EXPECT_EQ(Fails(false, R"({"feature_service": "nope", "entities": {"user_id": [1]}})", "nope"),
            StatusCode::kNotFound);
}

TEST_F(FeastHttpTest, BadLookupsNameWhatIsWrong) {
  EXPECT_EQ(Fails(false, "{", "JSON"), StatusCode::kInvalidArgument);
  EXPECT_EQ(Fails(false, "[]", "JSON object"), StatusCode::kInvalidArgument);
  EXPECT_EQ(Fails(false, R"({"entities": {"user_id": [1]}})", "features"),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Fails(false, R"({"features": ["age"], "entities": {"user_id": [1]}})", "group:feature"),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      Fails(false, R"({"features": ["user_profile:age"], "entities": {"shop": [1]}})", "shop"),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(Fails(false, R"({"features": ["user_profile:age"], "entities": {"user_id": ["x"]}})",
                  "entities.user_id[0]"),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Fails(false, R"({"features": ["user_profile:age"], "entities": {"user_id": [1]},
                  "project": 3})",
                  "project"),
            StatusCode::kInvalidArgument);
}

TEST_F(FeastHttpTest, BadPushesNameWhatIsWrong) {
  const std::string head = R"({"push_source_name": "user_profile", "df": {"user_id": [1], )";
  EXPECT_EQ(Fails(true, R"({"df": {}})", "push_source_name"), StatusCode::kInvalidArgument);
  EXPECT_EQ(Fails(true, head + R"("event_timestamp": [0], "age": [1]}})", "clicks"),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Fails(true, head + R"("event_timestamp": [0], "age": [true], "clicks": [[1, 2, 3]]}})",
                  "df.age[0]"),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Fails(true, head + R"("event_timestamp": ["2099-01-01T00:00:00Z"], "age": [1],
                  "clicks": [[1, 2, 3]]}})",
                  "future"),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Fails(true, head + R"("event_timestamp": [0], "age": [1], "clicks": [[1, 2, 3]],
                  "colour": [1]}})",
                  "colour"),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Fails(true, head + R"("event_timestamp": [0], "age": [1], "clicks": [[1, 2]]}})",
                  "list of 3"),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dais::frontends::http
