#include "common/json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/status_testing.h"

namespace dais::json {
namespace {

using ::testing::HasSubstr;

std::string Nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(ParseJsonTest, AcceptsTheLimitRefusesOneMore) {
  rapidjson::Document d;
  EXPECT_OK(ParseJson(Nested(100), &d));
  EXPECT_TRUE(d.IsArray());
  Status s = ParseJson(Nested(101), &d);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("nested deeper than 100 levels"));
  EXPECT_OK(ParseJson(Nested(5), &d, /*max_depth=*/5));
  EXPECT_FALSE(ParseJson(Nested(6), &d, /*max_depth=*/5).ok());
}

TEST(ParseJsonTest, MalformedTrailingAndNul) {
  rapidjson::Document d;
  EXPECT_THAT(ParseJson("{\"a\":", &d).message(), HasSubstr("malformed JSON at offset 5"));
  EXPECT_THAT(ParseJson("[1] x", &d).message(), HasSubstr("malformed JSON"));
  EXPECT_THAT(ParseJson(std::string_view("[1]\0[2]", 7), &d).message(), HasSubstr("NUL byte"));
  ASSERT_OK(ParseJson(R"({"a":[1,{"b":"x"}]})", &d));
  EXPECT_EQ(d["a"][1]["b"].GetString(), std::string("x"));
}

// Issue 11: 250,000 levels overflowed the stack of the recursive parser; 40 MB took 11.7 s.
TEST(ParseJsonTest, HugeNestingStopsAtTheLimit) {
  rapidjson::Document d;
  Status s = ParseJson(std::string(40 << 20, '['), &d);
  EXPECT_THAT(s.message(), HasSubstr("nested deeper than 100 levels at offset 10"));
}

constexpr unsigned kFull = rapidjson::kParseFullPrecisionFlag;

TEST(ParseJsonTest, FullPrecisionNumbersAreCorrectlyRounded) {
  // rapidjson 1.1's own full-precision conversion read "0e50" as -1.55e-266; each text here must
  // read back as strtod reads it.
  const std::vector<std::string> texts = {"0e50",
                                          "0e+300",
                                          "-0e300",
                                          "0.000e+310",
                                          "0e-242",
                                          "0.1",
                                          "2.2250738585072014e-308",
                                          "4.9e-324",
                                          "1e-400",
                                          "-1e-400",
                                          "1.7976931348623157e308",
                                          "123456789012345678901234567890",
                                          "18446744073709551616",
                                          "1e23",
                                          "-0.0"};
  for (const std::string& text : texts) {
    rapidjson::Document d;
    ASSERT_OK(ParseJson<kFull>("[" + text + "]", &d));
    ASSERT_TRUE(d[0].IsNumber()) << text;
    const double want = std::strtod(text.c_str(), nullptr);
    EXPECT_EQ(d[0].GetDouble(), want) << text;
    EXPECT_EQ(std::signbit(d[0].GetDouble()), std::signbit(want)) << text;
  }
}

TEST(ParseJsonTest, FullPrecisionIntegersKeepEveryBit) {
  rapidjson::Document d;
  ASSERT_OK(ParseJson<kFull>("[-9223372036854775808, 18446744073709551615, 7, -0]", &d));
  EXPECT_TRUE(d[0].IsInt64());
  EXPECT_EQ(d[0].GetInt64(), INT64_MIN);
  EXPECT_TRUE(d[1].IsUint64());
  EXPECT_FALSE(d[1].IsInt64());
  EXPECT_EQ(d[1].GetUint64(), UINT64_MAX);
  EXPECT_TRUE(d[2].IsInt());
  EXPECT_EQ(d[2].GetInt(), 7);
  EXPECT_TRUE(d[3].IsInt64());
  EXPECT_EQ(d[3].GetInt64(), 0);
}

TEST(ParseJsonTest, FullPrecisionBeyondTheLargestDoubleIsRefused) {
  // rapidjson refuses an exponent beyond 308 itself; the rest is refused after conversion.
  rapidjson::Document d;
  EXPECT_EQ(ParseJson<kFull>("[1e400]", &d).message(),
            "malformed JSON at offset 1: Number too big to be stored in double.");
  for (const char* text : {"[1, -1.8e308]", "[17976931348623159e292]"}) {
    Status s = ParseJson<kFull>(text, &d);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(s.message(), HasSubstr("a number beyond the range of a double")) << text;
  }
}

TEST(ParseJsonTest, FullPrecisionWithNanAndInfinity) {
  rapidjson::Document d;
  ASSERT_OK(
      ParseJson<kFull | rapidjson::kParseNanAndInfFlag>("[NaN, Infinity, -Infinity, 1.5]", &d));
  EXPECT_TRUE(std::isnan(d[0].GetDouble()));
  EXPECT_EQ(d[1].GetDouble(), HUGE_VAL);
  EXPECT_EQ(d[2].GetDouble(), -HUGE_VAL);
  EXPECT_EQ(d[3].GetDouble(), 1.5);
  EXPECT_FALSE(ParseJson<kFull>("[NaN]", &d).ok());
}

TEST(DepthScannerTest, CountsOutsideStringsAcrossPieces) {
  DepthScanner scanner(3);
  EXPECT_TRUE(scanner.Feed(R"({"a":"[[[[[[\"[[[[",)"));
  EXPECT_TRUE(scanner.Feed(R"("b":[[)"));
  EXPECT_FALSE(scanner.Feed("[["));
  EXPECT_EQ(scanner.offset(), 26u);  // the bracket that went too deep
  DepthScanner flat(2);
  EXPECT_TRUE(flat.Feed("[1],[2],[3],{\"x\":[4]}"));
}

}  // namespace
}  // namespace dais::json
