#include "features/spec/feature_spec.h"

#include <gtest/gtest.h>

#include <cstring>

#include "common/status_testing.h"
#include "features/spec/feature_codec.h"

namespace dais::features {
namespace {

constexpr const char* kSpec = R"(
domain: ads
entities:
  - {name: user_id, key_type: int64}
  - {name: device, key_type: string}
feature_groups:
  - name: user_profile
    entity: user_id
    version: 2
    max_age: 1h
    ttl: 7d
    features:
      - {name: age, dtype: FP32, default: 30}
      - {name: clicks, dtype: INT64, shape: [3], default: [1, 2, 3]}
  - name: device_stats
    entity: device
    features:
      - {name: score, dtype: FP64}
inputs:
  - {name: INPUT__0, features: [user_profile:clicks, user_profile:age]}
entity_input: USER_ID
)";

TEST(FeatureSpec, ParsesEverything) {
  auto spec = ParseFeatureSpec(kSpec, "features.yaml");
  ASSERT_OK(spec);
  const FeatureSpec& s = **spec;
  EXPECT_EQ(s.domain, "ads");
  ASSERT_EQ(s.groups.size(), 2u);
  const GroupSpec& g = s.groups[0];
  EXPECT_EQ(g.version, 2);
  EXPECT_EQ(g.max_age_us, 3600LL * 1000000);
  EXPECT_EQ(g.ttl_ms, 7LL * 86400 * 1000);
  EXPECT_EQ(g.record_bytes, 4u + 24u);
  EXPECT_EQ(g.offsets, (std::vector<size_t>{0, 4}));
  float age;
  std::memcpy(&age, g.features[0].default_bytes.data(), 4);
  EXPECT_EQ(age, 30.0f);
  EXPECT_EQ(ElementAsInt(DataType::kInt64, g.features[1].default_bytes.data(), 2), 3);
  EXPECT_EQ(s.groups[1].version, 1);
  EXPECT_EQ(s.groups[1].max_age_us, 0);
  ASSERT_EQ(s.inputs.size(), 1u);
  EXPECT_EQ(s.inputs[0].elements, 4);
  EXPECT_EQ(s.entity, "user_id");
  EXPECT_EQ(s.entity_input, "USER_ID");
  auto ref = s.Resolve("device_stats:score");
  ASSERT_OK(ref);
  EXPECT_EQ(ref->group, 1u);
  EXPECT_EQ(s.RefName(*ref), "device_stats:score");
}

void ExpectError(const std::string& text, const std::string& needle) {
  auto spec = ParseFeatureSpec(text, "m/features.yaml");
  ASSERT_FALSE(spec.ok()) << "accepted: " << text;
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(spec.status().message().find(needle), std::string::npos) << spec.status().message();
  EXPECT_NE(spec.status().message().find("m/features.yaml"), std::string::npos);
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  size_t p = s.find(from);
  EXPECT_NE(p, std::string::npos) << from;
  return s.replace(p, from.size(), to);
}

TEST(FeatureSpec, ErrorsNameTheGroupAndField) {
  ExpectError(Replace(kSpec, "dtype: FP32", "dtype: STRING"), "group user_profile feature age");
  ExpectError(Replace(kSpec, "default: [1, 2, 3]", "default: [1, 2]"), "has 2 values");
  ExpectError(Replace(kSpec, "max_age: 1h", "max_age: soon"), "`max_age`");
  ExpectError(Replace(kSpec, "entity: device", "entity: nobody"), "entity \"nobody\"");
  ExpectError(Replace(kSpec, "user_profile:age]", "user_profile:height]"), "no feature \"height\"");
  ExpectError(Replace(kSpec, "user_profile:age]", "device_stats:score]"), "share one entity");
  ExpectError(Replace(kSpec, "version: 2", "version: 0"), "`version`");
  ExpectError(Replace(kSpec, "{name: age, dtype: FP32, default: 30}",
                      "{name: age, dtype: INT32, default: 1.5}"),
              "not an integer");
  ExpectError(Replace(kSpec, "domain: ads", "domain: \"a:b\""), "domain");
  ExpectError(Replace(kSpec, "entity_input: USER_ID", "entity_inputs: USER_ID"),
              "unknown field \"entity_inputs\"");
  ExpectError("feature_groups: [", "m/features.yaml:");
  ExpectError(Replace(kSpec, "shape: [3]", "shape: [-1]"), "positive integer");
}

TEST(FeatureSpec, KnnLookupsFillInputs) {
  const std::string knn =
      "knn:\n  - {name: near, collection: items, query: user_profile:clicks, k: 4, "
      "min_score: 0.5}\ninputs:\n  - {name: NEAR_IDS, knn: near, output: ids}\n"
      "  - {name: NEAR_SCORES, knn: near, output: scores}\n";
  const std::string text = Replace(kSpec, "inputs:\n", knn);
  auto spec = ParseFeatureSpec(text, "m/features.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  const FeatureSpec& s = **spec;
  ASSERT_EQ(s.knn.size(), 1u);
  EXPECT_EQ(s.knn[0].collection, "items");
  EXPECT_EQ(s.knn[0].k, 4);
  EXPECT_TRUE(s.knn[0].has_min_score);
  EXPECT_EQ(s.RefName(s.knn[0].query), "user_profile:clicks");
  ASSERT_EQ(s.inputs.size(), 3u);
  EXPECT_EQ(s.inputs[0].knn, 0);
  EXPECT_FALSE(s.inputs[0].knn_scores);
  EXPECT_TRUE(s.inputs[1].knn_scores);
  EXPECT_EQ(s.inputs[1].elements, 4);
  EXPECT_TRUE(SameLayout(spec->get(), spec->get()));
  auto other = ParseFeatureSpec(Replace(text, "k: 4", "k: 5"), "m/features.yaml");
  EXPECT_FALSE(SameLayout(spec->get(), other->get()));

  ExpectError(Replace(text, "query: user_profile:clicks", "query: user_profile:nope"),
              "knn near: feature reference");
  ExpectError(Replace(text, "k: 4", "k: 0"), "`k` must be an integer from 1 to 1000");
  ExpectError(Replace(text, "output: ids", "output: names"), "`output` must be ids or scores");
  ExpectError(Replace(text, "knn: near, output: ids", "knn: far, output: ids"),
              "no knn lookup \"far\"");
  ExpectError(Replace(text, "collection: items", "collection: items, metric: l2"),
              "unknown field \"metric\"");
  ExpectError(Replace(text, "knn: near, output: ids", "knn: near, output: ids, features: [a:b]"),
              "not both");
}

TEST(FeatureSpec, Durations) {
  EXPECT_EQ(*ParseDurationUs("250ms"), 250000);
  EXPECT_EQ(*ParseDurationUs("30"), 30000000);
  EXPECT_EQ(*ParseDurationUs("2d"), 2LL * 86400000000);
  EXPECT_FALSE(ParseDurationUs("1y").ok());
  EXPECT_FALSE(ParseDurationUs("").ok());
  EXPECT_FALSE(ParseDurationUs("-1s").ok());
}

TEST(FeatureSpec, CanonicalEntityIds) {
  EXPECT_EQ(*CanonicalEntityId(KeyType::kInt64, "0042"), "42");
  EXPECT_FALSE(CanonicalEntityId(KeyType::kInt64, "abc").ok());
  EXPECT_FALSE(CanonicalEntityId(KeyType::kInt64, "").ok());
  EXPECT_FALSE(CanonicalEntityId(KeyType::kInt64, "99999999999999999999").ok());
  EXPECT_EQ(*CanonicalEntityId(KeyType::kString, "dev-1"), "dev-1");
  EXPECT_FALSE(CanonicalEntityId(KeyType::kString, "a\nb").ok());
}

TEST(FeatureCodec, RangeAndConversion) {
  std::string out;
  EXPECT_OK(AppendElement(DataType::kInt8, Scalar::Int(127), &out));
  EXPECT_FALSE(AppendElement(DataType::kInt8, Scalar::Int(128), &out).ok());
  EXPECT_FALSE(AppendElement(DataType::kBool, Scalar::Int(2), &out).ok());
  EXPECT_FALSE(AppendElement(DataType::kFp32, Scalar::Real(1e300), &out).ok());
  std::string src;
  ASSERT_OK(AppendElement(DataType::kInt64, Scalar::Int(-7), &src));
  ASSERT_OK(AppendElement(DataType::kInt64, Scalar::Int(9), &src));
  float dst[2];
  ASSERT_TRUE(ConvertElements(DataType::kInt64, src.data(), DataType::kFp32,
                              reinterpret_cast<char*>(dst), 2)
                  .ok());
  EXPECT_EQ(dst[0], -7.0f);
  EXPECT_EQ(dst[1], 9.0f);
}

}  // namespace
}  // namespace dais::features
