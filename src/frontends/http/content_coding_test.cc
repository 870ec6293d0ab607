#include "frontends/http/content_coding.h"

#include <gtest/gtest.h>

#include "common/status_testing.h"

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

// Issue 32: "chunked, identity" was accepted and the body read as a second request.
TEST(ContentCodingTest, TransferEncodingMustEndWithChunkedAlone) {
  EXPECT_OK(CheckTransferEncoding("chunked"));
  EXPECT_OK(CheckTransferEncoding(" Chunked "));
  EXPECT_EQ(CheckTransferEncoding("chunked, identity").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckTransferEncoding("identity").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckTransferEncoding("").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckTransferEncoding("chunked, chunked").code(), StatusCode::kInvalidArgument);
  const Status gzip = CheckTransferEncoding("gzip, chunked");
  EXPECT_EQ(gzip.code(), StatusCode::kUnimplemented);
  EXPECT_NE(gzip.message().find("'gzip' is not implemented"), std::string::npos);
}

}  // namespace
}  // namespace dais::frontends::http
