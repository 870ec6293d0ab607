#include "common/zlib_codec.h"

#include <gtest/gtest.h>

#include <random>

#include "common/status_testing.h"

namespace dais {
namespace {

std::string Text(size_t n) {
  std::string s;
  std::mt19937 rng(7);
  while (s.size() < n) s += "{\"data\":[" + std::to_string(rng() % 1000) + "]},";
  s.resize(n);
  return s;
}

std::string InflateAll(std::string_view in, ZlibFormat f, size_t piece, uint64_t limit,
                       Status* status) {
  Inflater inf(f, limit);
  std::string out;
  for (size_t i = 0; i < in.size(); i += piece) {
    *status = inf.Feed(in.substr(i, piece), &out);
    if (!status->ok()) return out;
  }
  *status = inf.Finish();
  return out;
}

TEST(ZlibCodecTest, RoundTripsInPiecesBothFormats) {
  const std::string text = Text(300'000);
  for (ZlibFormat f : {ZlibFormat::kGzip, ZlibFormat::kZlib}) {
    const std::string packed = Deflate(text, f);
    ASSERT_FALSE(packed.empty());
    EXPECT_LT(packed.size(), text.size() / 2);
    for (size_t piece : {size_t{1}, size_t{7}, size_t{4096}, packed.size()}) {
      Status s;
      EXPECT_EQ(InflateAll(packed, f, piece, 1 << 20, &s), text) << piece;
      EXPECT_OK(s);
    }
  }
  EXPECT_EQ(ContentEncodingName(ZlibFormat::kGzip), "gzip");
  EXPECT_EQ(ContentEncodingName(ZlibFormat::kZlib), "deflate");
}

TEST(ZlibCodecTest, StreamingDeflaterMatchesTheTextFedInPieces) {
  const std::string text = Text(300'000);
  for (ZlibFormat f : {ZlibFormat::kGzip, ZlibFormat::kZlib}) {
    for (size_t piece : {size_t{1}, size_t{333}, size_t{100'000}, text.size()}) {
      Deflater d(f, 1);
      for (size_t i = 0; i < text.size(); i += piece) {
        ASSERT_OK(d.Feed(std::string_view(text).substr(i, piece)));
      }
      ASSERT_OK(d.Finish());
      EXPECT_EQ(d.total_in(), text.size());
      EXPECT_LT(d.output().size(), text.size() / 2);
      Status s;
      EXPECT_EQ(InflateAll(d.output(), f, 4096, 1 << 20, &s), text) << piece;
      EXPECT_OK(s);
    }
  }
  Deflater empty(ZlibFormat::kGzip);
  ASSERT_OK(empty.Finish());
  Status s;
  EXPECT_EQ(InflateAll(empty.output(), ZlibFormat::kGzip, 10, 10, &s), "");
  EXPECT_OK(s);
}

TEST(ZlibCodecTest, OutputLimitStopsABombEarly) {
  const std::string zeros(50u << 20, '\0');  // 50 MiB -> ~50 KiB
  const std::string packed = Deflate(zeros, ZlibFormat::kGzip, 9);
  ASSERT_LT(packed.size(), 100'000u);
  Inflater inf(ZlibFormat::kGzip, 1 << 20);
  std::string out;
  Status s = inf.Feed(packed, &out);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("1048576"), std::string::npos) << s.ToString();
  EXPECT_LE(out.size(), (1u << 20) + 64 * 1024);  // stopped within one step of the limit
}

TEST(ZlibCodecTest, CorruptTruncatedAndTrailingDataAreErrors) {
  const std::string text = Text(10'000);
  const std::string packed = Deflate(text, ZlibFormat::kGzip);
  Status s;
  InflateAll("this is not gzip at all", ZlibFormat::kGzip, 100, 1 << 20, &s);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("malformed gzip"), std::string::npos) << s.ToString();

  InflateAll(std::string_view(packed).substr(0, packed.size() / 2), ZlibFormat::kGzip, 100, 1 << 20,
             &s);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.ToString();

  InflateAll(std::string_view(packed).substr(0, 5), ZlibFormat::kGzip, 100, 1 << 20, &s);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();  // cut before any output

  EXPECT_OK(Inflater(ZlibFormat::kGzip, 10).Finish());  // nothing fed: an empty body

  InflateAll(packed + "junk", ZlibFormat::kGzip, 100, 1 << 20, &s);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("after the end"), std::string::npos) << s.ToString();
}

TEST(ZlibCodecTest, DeflateAcceptsARawStreamToo) {
  // A raw RFC 1951 stream (no zlib header), as some clients send for "deflate".
  const std::string zlib = Deflate("hello hello hello hello", ZlibFormat::kZlib);
  const std::string raw = zlib.substr(2, zlib.size() - 6);  // strip header and Adler-32
  Status s;
  EXPECT_EQ(InflateAll(raw, ZlibFormat::kZlib, 3, 1 << 20, &s), "hello hello hello hello");
  EXPECT_OK(s);
}

}  // namespace
}  // namespace dais
