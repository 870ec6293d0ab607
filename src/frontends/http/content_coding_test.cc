#include "frontends/http/content_coding.h"

#include <gtest/gtest.h>

namespace dais::frontends::http {
namespace {

TEST(ContentCodingTest, RequestCoding) {
  EXPECT_EQ(*RequestCoding(""), std::nullopt);
  EXPECT_EQ(*RequestCoding("identity"), std::nullopt);
  EXPECT_EQ(*RequestCoding(" GZip "), ZlibFormat::kGzip);
  EXPECT_EQ(*RequestCoding("x-gzip"), ZlibFormat::kGzip);
  EXPECT_EQ(*RequestCoding("deflate"), ZlibFormat::kZlib);
  for (const char* bad : {"br", "gzip, deflate", "compress", "zstd"}) {
    auto r = RequestCoding(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(r.status().message().find(bad), std::string::npos) << r.status().message();
  }
}

TEST(ContentCodingTest, AnswerCoding) {
  EXPECT_EQ(AnswerCoding(""), std::nullopt);
  EXPECT_EQ(AnswerCoding("identity"), std::nullopt);
  EXPECT_EQ(AnswerCoding("gzip"), ZlibFormat::kGzip);
  EXPECT_EQ(AnswerCoding("deflate"), ZlibFormat::kZlib);
  EXPECT_EQ(AnswerCoding("gzip, deflate"), ZlibFormat::kGzip);  // python-requests' default
  EXPECT_EQ(AnswerCoding("deflate, gzip;q=0"), ZlibFormat::kZlib);
  EXPECT_EQ(AnswerCoding("gzip;q=0.000, deflate;q=0"), std::nullopt);
  EXPECT_EQ(AnswerCoding("gzip;q=0.5"), ZlibFormat::kGzip);
  EXPECT_EQ(AnswerCoding("br, *"), ZlibFormat::kGzip);
  EXPECT_EQ(AnswerCoding("*;q=0"), std::nullopt);
  EXPECT_EQ(AnswerCoding("gzip;q=0, *"), ZlibFormat::kZlib);
  EXPECT_EQ(AnswerCoding("br;q=1.0, zstd"), std::nullopt);
}

}  // namespace
}  // namespace dais::frontends::http
