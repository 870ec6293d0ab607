#include "redis/resp.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/status_testing.h"

namespace dais::redis {
namespace {

// Feeds `input` whole, and byte by byte, and checks both give `want` and no error.
void ExpectParses(const std::string& input, const std::vector<Reply>& want) {
  {
    RespParser p;
    std::vector<Reply> got;
    ASSERT_OK(p.Feed(input, &got));
    EXPECT_EQ(got, want);
    EXPECT_EQ(p.buffered(), 0u);
  }
  {
    RespParser p;
    std::vector<Reply> got;
    for (char c : input) ASSERT_OK(p.Feed(std::string_view(&c, 1), &got));
    EXPECT_EQ(got, want);
    EXPECT_EQ(p.buffered(), 0u);
  }
}

Status FeedAll(const std::string& input) {
  RespParser p;
  std::vector<Reply> got;
  return p.Feed(input, &got);
}

TEST(RespEncodeTest, ArrayOfBulkStrings) {
  EXPECT_EQ(EncodeCommand({"SET", "k", "v"}), "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n");
  EXPECT_EQ(EncodeCommand({}), "*0\r\n");
  std::string binary("a\0\r\nb", 5);
  EXPECT_EQ(EncodeCommand({binary, ""}), "*2\r\n$5\r\n" + binary + "\r\n$0\r\n\r\n");
  std::string out = "x";
  AppendCommand({"PING"}, &out);
  EXPECT_EQ(out, "x*1\r\n$4\r\nPING\r\n");
}

TEST(RespEncodeTest, PiecesEncodeLikeEncodeCommand) {
  const std::string binary("a\0\r\nb", 5);
  std::string out;
  AppendArrayHeader(4, &out);
  for (std::string_view a : {std::string_view("HMGET"), std::string_view("k"),
                             std::string_view(binary), std::string_view()}) {
    AppendBulk(a, &out);
  }
  EXPECT_EQ(out, EncodeCommand({"HMGET", "k", binary, ""}));
}

TEST(RespParserTest, EveryType) {
  ExpectParses("+OK\r\n", {Reply::Status("OK")});
  ExpectParses("-ERR bad thing\r\n", {Reply::Error("ERR bad thing")});
  ExpectParses(":42\r\n:-7\r\n:0\r\n", {Reply::Integer(42), Reply::Integer(-7), Reply::Integer(0)});
  ExpectParses(":9223372036854775807\r\n", {Reply::Integer(INT64_MAX)});
  ExpectParses(":-9223372036854775808\r\n", {Reply::Integer(INT64_MIN)});
  ExpectParses("$5\r\nhello\r\n", {Reply::Bulk("hello")});
  ExpectParses("$0\r\n\r\n", {Reply::Bulk("")});
  ExpectParses("$4\r\na\r\nb\r\n", {Reply::Bulk("a\r\nb")});  // binary-safe
  ExpectParses("$-1\r\n", {Reply::Nil()});
  ExpectParses("*-1\r\n", {Reply::Nil()});
  ExpectParses("*0\r\n", {Reply::Array({})});
  ExpectParses("+\r\n", {Reply::Status("")});
}

TEST(RespParserTest, ArraysNestedAndMixed) {
  ExpectParses("*3\r\n$1\r\na\r\n$-1\r\n:5\r\n",
               {Reply::Array({Reply::Bulk("a"), Reply::Nil(), Reply::Integer(5)})});
  ExpectParses("*2\r\n*2\r\n:1\r\n*0\r\n*1\r\n*-1\r\n+after\r\n",
               {Reply::Array({Reply::Array({Reply::Integer(1), Reply::Array({})}),
                              Reply::Array({Reply::Nil()})}),
                Reply::Status("after")});
  // Error replies inside arrays (EXEC) stay replies.
  ExpectParses("*2\r\n+OK\r\n-WRONGTYPE x\r\n",
               {Reply::Array({Reply::Status("OK"), Reply::Error("WRONGTYPE x")})});
}

TEST(RespParserTest, PipelinedRepliesAndPartialFeeds) {
  RespParser p;
  std::vector<Reply> got;
  ASSERT_OK(p.Feed("+OK\r\n$5\r\nhel", &got));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_GT(p.buffered(), 0u);
  ASSERT_OK(p.Feed("lo\r", &got));
  ASSERT_EQ(got.size(), 1u);
  ASSERT_OK(p.Feed("\n*2\r\n:1", &got));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1], Reply::Bulk("hello"));
  ASSERT_OK(p.Feed("\r\n:2\r\n", &got));
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[2], Reply::Array({Reply::Integer(1), Reply::Integer(2)}));
  EXPECT_EQ(p.buffered(), 0u);
}

TEST(RespParserTest, ManyRepliesInOneFeedKeepOrder) {
  std::string input;
  std::vector<Reply> want;
  for (int i = 0; i < 5000; ++i) {
    const std::string v = std::to_string(i);
    input += "$" + std::to_string(v.size()) + "\r\n" + v + "\r\n";
    want.push_back(Reply::Bulk(v));
  }
  RespParser p;
  std::vector<Reply> got;
  // Odd-sized chunks cross every boundary.
  for (size_t i = 0; i < input.size(); i += 7) {
    ASSERT_OK(p.Feed(std::string_view(input).substr(i, 7), &got));
  }
  EXPECT_EQ(got, want);
}

TEST(RespParserTest, MalformedInputIsInvalidArgument) {
  for (const char* bad : {"?x\r\n", "\r\n", "+OK\rX", ":12a\r\n", ":\r\n", ":+1\r\n",
                          ":99999999999999999999\r\n", "$-2\r\n", "$abc\r\n", "$3\r\nabcd\r\n",
                          "$3\r\nabc\n\n", "*-2\r\n", "*x\r\n", "*1\r\n!\r\n"}) {
    Status s = FeedAll(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(RespParserTest, ErrorIsStickyAndEarlierRepliesKept) {
  RespParser p;
  std::vector<Reply> got;
  Status s = p.Feed("+one\r\n+two\r\n%bad\r\n+three\r\n", &got);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(got, (std::vector<Reply>{Reply::Status("one"), Reply::Status("two")}));
  EXPECT_EQ(p.Feed("+OK\r\n", &got).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(got.size(), 2u);
}

TEST(RespParserTest, NestingDepthLimit) {
  std::string ok_input, too_deep;
  for (int i = 0; i < RespParser::kMaxDepth; ++i) ok_input += "*1\r\n";
  ok_input += ":1\r\n";
  RespParser p;
  std::vector<Reply> got;
  ASSERT_OK(p.Feed(ok_input, &got));
  ASSERT_EQ(got.size(), 1u);
  for (int i = 0; i < RespParser::kMaxDepth + 1; ++i) too_deep += "*1\r\n";
  too_deep += ":1\r\n";
  EXPECT_EQ(FeedAll(too_deep).code(), StatusCode::kInvalidArgument);
}

TEST(RespParserTest, SizeLimits) {
  EXPECT_EQ(FeedAll("$536870913\r\n").code(), StatusCode::kInvalidArgument);  // 512 MiB + 1
  EXPECT_OK(FeedAll("$536870912\r\n"));  // at the limit: waits for the bytes
  EXPECT_EQ(FeedAll("*16777217\r\n").code(), StatusCode::kInvalidArgument);  // 2^24 + 1
  EXPECT_OK(FeedAll("*16777216\r\n"));
  // A line with no CRLF cannot grow without bound.
  EXPECT_EQ(FeedAll("+" + std::string(RespParser::kMaxLine + 10, 'a')).code(),
            StatusCode::kInvalidArgument);
  EXPECT_OK(FeedAll("+" + std::string(1000, 'a')));
}

TEST(RespParserTest, ReplyToString) {
  EXPECT_EQ(ReplyToString(Reply::Array({Reply::Bulk("a\n"), Reply::Nil(), Reply::Integer(3),
                                        Reply::Error("ERR x"), Reply::Status("OK")})),
            "[\"a\\x0a\", (nil), (integer) 3, (error) ERR x, OK]");
}

}  // namespace
}  // namespace dais::redis
