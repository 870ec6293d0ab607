#include "common/json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
