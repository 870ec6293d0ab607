#include "frontends/http/http1_parser.h"

#include <gtest/gtest.h>

#include <string>

namespace dais::frontends::http {
namespace {

using Stop = Http1RequestParser::Stop;

TEST(Http1ParserTest, AHeadAndItsBodyInOneRead) {
  const std::string wire =
      "POST /v2/models/m/infer HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
      "Content-Length: 5\r\nX-Empty:\r\n\r\nhello";
  Http1RequestParser p;
  auto r = p.Parse(wire);
  ASSERT_EQ(r.stop, Stop::kHeadComplete) << p.error();
  const size_t head = wire.find("hello");
  EXPECT_EQ(r.consumed, head);
  const Http1RequestHead& h = p.head();
  EXPECT_EQ(h.method, "POST");
  EXPECT_EQ(h.target, "/v2/models/m/infer");
  EXPECT_EQ(h.head_bytes, head);
  EXPECT_EQ(h.content_length, 5);
  EXPECT_FALSE(h.chunked);
  EXPECT_TRUE(h.keep_alive);
  EXPECT_FALSE(h.expect_continue);
  ASSERT_EQ(h.header_count, 4u);
  EXPECT_EQ(h.Find("content-type"), "application/json");
  EXPECT_EQ(h.Find("HOST"), "gw");
  EXPECT_EQ(h.Find("x-empty"), "");
  EXPECT_EQ(h.headers[3].name, "X-Empty");
  // The views point into the caller's bytes: nothing was copied.
  EXPECT_EQ(h.target.data(), wire.data() + 5);
  r = p.Parse(std::string_view(wire).substr(head));
  EXPECT_EQ(r.stop, Stop::kMessageComplete);
  EXPECT_EQ(r.consumed, 5u);
  EXPECT_EQ(p.body_bytes(), 5u);
}

TEST(Http1ParserTest, PipelinedRequestsStopAtEachMessagesEnd) {
  const std::string one = "POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc";
  const std::string two = "GET /b HTTP/1.1\r\n\r\n";
  const std::string three = "GET /c HTTP/1.1\r\nConnection: close\r\n\r\n";
  const std::string wire = one + two + three;
  Http1RequestParser p;
  std::string_view rest = wire;
  std::vector<std::string> targets;
  std::vector<size_t> lengths;
  for (int message = 0; message < 3; ++message) {
    size_t length = 0;
    for (;;) {
      auto r = p.Parse(rest);
      ASSERT_NE(r.stop, Stop::kError) << p.error();
      ASSERT_NE(r.stop, Stop::kNeedMore) << "message " << message;
      length += r.consumed;
      rest.remove_prefix(r.consumed);
      if (r.stop == Stop::kHeadComplete) targets.emplace_back(p.head().target);
      if (r.stop == Stop::kMessageComplete) break;
    }
    lengths.push_back(length);
    if (message == 2) {
      EXPECT_FALSE(p.head().keep_alive);
    }
    p.Reset();
  }
  EXPECT_EQ(targets, (std::vector<std::string>{"/a", "/b", "/c"}));
  EXPECT_EQ(lengths, (std::vector<size_t>{one.size(), two.size(), three.size()}));
  EXPECT_TRUE(rest.empty());
}

// Reset leaves the header slots of the last request in place: the next head must not see them,
// nor any other field of the last one.
TEST(Http1ParserTest, ANextRequestSeesNothingOfTheLastHead) {
  const std::string one =
      "POST /a HTTP/1.0\r\nConnection: keep-alive\r\nX-One: 1\r\nExpect: 100-continue\r\n"
      "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
  const std::string two = "GET /b HTTP/1.1\r\nX-Two: 2\r\n\r\n";
  Http1RequestParser p;
  auto r = p.Parse(one);
  ASSERT_EQ(r.stop, Stop::kHeadComplete) << p.error();
  ASSERT_TRUE(p.head().chunked);
  ASSERT_TRUE(p.head().expect_continue);
  r = p.Parse(std::string_view(one).substr(r.consumed));
  ASSERT_EQ(r.stop, Stop::kMessageComplete) << p.error();
  p.Reset();
  r = p.Parse(two);
  ASSERT_EQ(r.stop, Stop::kHeadComplete) << p.error();
  const Http1RequestHead& h = p.head();
  EXPECT_EQ(h.method, "GET");
  EXPECT_EQ(h.target, "/b");
  EXPECT_EQ(h.version_minor, 1);
  EXPECT_EQ(h.header_count, 1u);
  EXPECT_EQ(h.head_bytes, two.size());
  EXPECT_EQ(h.Find("x-two"), "2");
  EXPECT_EQ(h.Find("x-one"), "");
  EXPECT_EQ(h.Find("expect"), "");
  EXPECT_EQ(h.content_length, -1);
  EXPECT_FALSE(h.chunked);
  EXPECT_FALSE(h.expect_continue);
  EXPECT_TRUE(h.keep_alive);
}

// The head split at every byte: the caller keeps the bytes in place and hands over the new ones.
TEST(Http1ParserTest, AHeadSplitAtEveryByte) {
  const std::string wire =
      "PUT /x/y?z=1 HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer abc.def.ghi\r\n"
      "Content-Length: 2\r\n\r\nok";
  for (size_t cut = 1; cut < wire.size(); ++cut) {
    Http1RequestParser p;
    auto r = p.Parse(std::string_view(wire).substr(0, cut));
    size_t at = r.consumed;
    if (r.stop == Stop::kNeedMore) {
      ASSERT_EQ(r.consumed, cut);
      r = p.Parse(std::string_view(wire).substr(cut));
      at += r.consumed;
    }
    ASSERT_EQ(r.stop, Stop::kHeadComplete) << "cut " << cut << ": " << p.error();
    EXPECT_EQ(p.head().method, "PUT") << cut;
    EXPECT_EQ(p.head().target, "/x/y?z=1") << cut;
    EXPECT_EQ(p.head().Find("authorization"), "Bearer abc.def.ghi") << cut;
    EXPECT_EQ(p.head().content_length, 2) << cut;
    EXPECT_EQ(at, wire.size() - 2) << cut;
  }
}

TEST(Http1ParserTest, AChunkedBodyIsTakenRawToItsEnd) {
  const std::string body = "4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\nTrailer: t\r\n\r\n";
  const std::string wire = "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + body +
                           "GET /next HTTP/1.1\r\n\r\n";
  Http1RequestParser p;
  auto r = p.Parse(wire);
  ASSERT_EQ(r.stop, Stop::kHeadComplete) << p.error();
  EXPECT_TRUE(p.head().chunked);
  EXPECT_EQ(p.head().content_length, -1);
  std::string_view rest = std::string_view(wire).substr(r.consumed);
  // The body in two reads, the cut inside a chunk-size line.
  r = p.Parse(rest.substr(0, 14));
  ASSERT_EQ(r.stop, Stop::kNeedMore);
  EXPECT_EQ(r.consumed, 14u);
  r = p.Parse(rest.substr(14));
  ASSERT_EQ(r.stop, Stop::kMessageComplete) << p.error();
  EXPECT_EQ(14 + r.consumed, body.size());
  EXPECT_EQ(p.body_bytes(), 9u);  // "Wikipedia"
}

TEST(Http1ParserTest, ExpectContinueIsReported) {
  Http1RequestParser p;
  auto r = p.Parse("POST /u HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 10\r\n\r\n");
  ASSERT_EQ(r.stop, Stop::kHeadComplete);
  EXPECT_TRUE(p.head().expect_continue);
  EXPECT_TRUE(p.in_body());
}

TEST(Http1ParserTest, HttpOneZeroClosesUnlessKeptAlive) {
  Http1RequestParser p;
  ASSERT_EQ(p.Parse("GET / HTTP/1.0\r\n\r\n").stop, Stop::kHeadComplete);
  EXPECT_FALSE(p.head().keep_alive);
  EXPECT_EQ(p.head().version_minor, 0);
  Http1RequestParser q;
  ASSERT_EQ(q.Parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").stop, Stop::kHeadComplete);
  EXPECT_TRUE(q.head().keep_alive);
}

struct Refusal {
  const char* what;
  std::string wire;
  int status;
};

TEST(Http1ParserTest, SmugglingAttemptsAndOversizedHeadsAreRefused) {
  Http1Limits limits;
  limits.max_head_bytes = 256;
  limits.max_headers = 8;
  limits.max_body_bytes = 1000;
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 9; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  const Refusal cases[] = {
      {"CL + TE", "POST / HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n",
       400},
      {"TE + CL", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n",
       400},
      {"duplicate CL", "POST / HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\n", 400},
      {"differing CL", "POST / HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\n", 400},
      {"CL list", "POST / HTTP/1.1\r\nContent-Length: 4, 4\r\n\r\n", 400},
      {"negative CL", "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
      {"TE not ending in chunked", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
       400},
      {"space before colon", "POST / HTTP/1.1\r\nContent-Length : 4\r\n\r\n", 400},
      {"obsolete line folding", "GET / HTTP/1.1\r\nX-A: a\r\n  folded\r\n\r\n", 400},
      {"bare LF line ends", "GET / HTTP/1.1\nHost: h\n\n", 400},
      {"bare LF after the request line and at the end", "GET / HTTP/1.1\n\n", 400},
      {"bare LF ending the head", "GET / HTTP/1.1\r\nHost: h\r\n\n", 400},
      {"folding an empty value", "POST / HTTP/1.1\r\nTransfer-Encoding:\r\n chunked\r\n\r\n", 400},
      {"chunk data not ended by CRLF",
       "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXY0\r\n\r\n", 400},
      {"Content-Length past 2^63",
       "POST / HTTP/1.1\r\nContent-Length: 18446744073709551615\r\n\r\n", 413},
      {"bad chunk size", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
      {"not HTTP", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 400},
      {"head too large", "GET /" + std::string(300, 'a') + " HTTP/1.1\r\n\r\n", 431},
      {"too many headers", many + "\r\n", 431},
      {"declared body too large", "POST / HTTP/1.1\r\nContent-Length: 1001\r\n\r\n", 413},
  };
  for (const Refusal& c : cases) {
    Http1RequestParser p(limits);
    auto r = p.Parse(c.wire);
    if (r.stop == Stop::kHeadComplete) r = p.Parse(std::string_view(c.wire).substr(r.consumed));
    EXPECT_EQ(r.stop, Stop::kError) << c.what;
    EXPECT_EQ(p.error_status(), c.status) << c.what << ": " << p.error();
    EXPECT_FALSE(p.error().empty()) << c.what;
    // Refused for good: the framing of the connection is lost.
    EXPECT_EQ(p.Parse("GET / HTTP/1.1\r\n\r\n").stop, Stop::kError) << c.what;
  }
}

// Trailers are part of the body's bytes: the head is not changed by them, even split over reads
// from different buffers.
TEST(Http1ParserTest, TrailersDoNotChangeTheHead) {
  const std::string head = "POST /t HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  Http1RequestParser p;
  auto r = p.Parse(head);
  ASSERT_EQ(r.stop, Stop::kHeadComplete);
  const std::string part1 = "3\r\nabc\r\n0\r\nX-Tra";
  const std::string part2 = "iler: v\r\nX-Two: w\r\n\r\n";
  ASSERT_EQ(p.Parse(part1).stop, Stop::kNeedMore);
  r = p.Parse(part2);
  ASSERT_EQ(r.stop, Stop::kMessageComplete) << p.error();
  EXPECT_EQ(r.consumed, part2.size());
  EXPECT_EQ(p.head().header_count, 1u);
  EXPECT_EQ(p.head().Find("x-trailer"), "");
}

// A malformed head in a read that also holds a large body is a 400, not a 431.
TEST(Http1ParserTest, AMalformedHeadInALargeReadIsA400) {
  Http1Limits limits;
  limits.max_head_bytes = 128;
  Http1RequestParser p(limits);
  const std::string wire = "GET / HTTP/1.1\r\nBad Header: x\r\n\r\n" + std::string(1000, 'x');
  EXPECT_EQ(p.Parse(wire).stop, Stop::kError);
  EXPECT_EQ(p.error_status(), 400) << p.error();
}

TEST(Http1ParserTest, ExpectWithSpacesAndABodylessRequestEndingOnAnEmptyCall) {
  Http1RequestParser p;
  auto r = p.Parse("GET /h HTTP/1.1\r\nExpect:  100-continue \r\n\r\n");
  ASSERT_EQ(r.stop, Stop::kHeadComplete);
  EXPECT_TRUE(p.head().expect_continue);
  r = p.Parse("");
  EXPECT_EQ(r.stop, Stop::kMessageComplete);
  EXPECT_EQ(r.consumed, 0u);
}

TEST(Http1ParserTest, AChunkedBodyPastTheLimitIsRefused) {
  Http1Limits limits;
  limits.max_body_bytes = 8;
  Http1RequestParser p(limits);
  const std::string wire =
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n9\r\n123456789\r\n";
  auto r = p.Parse(wire);
  ASSERT_EQ(r.stop, Stop::kHeadComplete);
  r = p.Parse(std::string_view(wire).substr(r.consumed));
  EXPECT_EQ(r.stop, Stop::kError);
  EXPECT_EQ(p.error_status(), 413) << p.error();
}

// A head arriving a byte at a time is refused once it passes the limit, not buffered forever.
TEST(Http1ParserTest, AHeadTricklingPastTheLimitIsRefused) {
  Http1Limits limits;
  limits.max_head_bytes = 64;
  Http1RequestParser p(limits);
  std::string wire = "GET / HTTP/1.1\r\nX-Long: ";
  wire += std::string(100, 'v');
  Http1RequestParser::Result r;
  size_t fed = 0;
  for (; fed < wire.size(); ++fed) {
    r = p.Parse(std::string_view(wire).substr(fed, 1));
    if (r.stop != Stop::kNeedMore) break;
  }
  EXPECT_EQ(r.stop, Stop::kError);
  EXPECT_EQ(p.error_status(), 431);
  EXPECT_LE(fed, 65u);
}

TEST(Http1ParserTest, TheBodySinkGetsThePayloadWithoutChunkFraming) {
  const std::string wire =
      "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3\r\nabc\r\n4;ext=1\r\ndefg\r\n0\r\nX-Trailer: t\r\n\r\n";
  for (size_t piece : {wire.size(), size_t{1}, size_t{3}}) {
    Http1RequestParser p;
    std::string body;
    std::string_view rest = wire;
    bool head_seen = false;
    for (;;) {
      auto r = p.Parse(rest.substr(0, head_seen ? piece : rest.size()));
      ASSERT_NE(r.stop, Stop::kError) << p.error();
      rest.remove_prefix(r.consumed);
      if (r.stop == Stop::kHeadComplete) {
        head_seen = true;
        p.set_body_sink(&body);
      }
      if (r.stop == Stop::kMessageComplete) break;
      ASSERT_FALSE(rest.empty() && r.stop == Stop::kNeedMore);
    }
    EXPECT_EQ(body, "abcdefg") << "pieces of " << piece;
    EXPECT_EQ(p.chunks(), 3u);  // two with data, the last
    EXPECT_TRUE(rest.empty());
  }
}

TEST(Http1ParserTest, ChunksPastTheLimitAreA413) {
  Http1Limits limits;
  limits.max_body_chunks = 2;
  Http1RequestParser p(limits);
  const std::string wire =
      "POST /x HTTP/1.1\r\nTransfer-Encoding: "
      "chunked\r\n\r\n1\r\na\r\n1\r\nb\r\n1\r\nc\r\n0\r\n\r\n";
  auto r = p.Parse(wire);
  ASSERT_EQ(r.stop, Stop::kHeadComplete);
  r = p.Parse(std::string_view(wire).substr(r.consumed));
  EXPECT_EQ(r.stop, Stop::kError);
  EXPECT_EQ(p.error_status(), 413);
}

TEST(Http1ParserTest, AnUpgradeRequestIsAnsweredAsAPlainOne) {
  // curl --http2 on http:// asks for h2c; a server may ignore Upgrade (RFC 9110 section 7.8).
  const std::string wire =
      "GET /v2/health/live HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, HTTP2-Settings\r\n"
      "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"
      "GET /next HTTP/1.1\r\nHost: h\r\n\r\n";
  Http1RequestParser p;
  std::string_view rest = wire;
  auto r = p.Parse(rest);
  ASSERT_EQ(r.stop, Stop::kHeadComplete) << p.error();
  rest.remove_prefix(r.consumed);
  r = p.Parse(rest);
  ASSERT_EQ(r.stop, Stop::kMessageComplete) << p.error();
  rest.remove_prefix(r.consumed);
  p.Reset();
  r = p.Parse(rest);
  ASSERT_EQ(r.stop, Stop::kHeadComplete) << p.error();
  EXPECT_EQ(p.head().target, "/next");
}

TEST(Http1ParserTest, AHeadParsedAgainFromItsStartAfterReset) {
  // A server whose buffer grows under a head moves its bytes, then parses them again.
  const std::string wire = "GET /moved HTTP/1.1\r\nHost: h\r\nX-Long: abcdef\r\n\r\n";
  Http1RequestParser p;
  ASSERT_EQ(p.Parse(std::string_view(wire).substr(0, 30)).stop, Stop::kNeedMore);
  const std::string moved = wire;  // elsewhere in memory
  p.Reset();
  auto r = p.Parse(moved);
  ASSERT_EQ(r.stop, Stop::kHeadComplete) << p.error();
  EXPECT_EQ(p.head().target.data(), moved.data() + 4);
  EXPECT_EQ(p.head().Find("x-long"), "abcdef");
  EXPECT_EQ(p.head().head_bytes, wire.size());
}

TEST(Http1ParserTest, ARawUtf8PathIsTakenInPlaceOnly) {
  std::string wire = "GET /v2/models/caf\xc3\xa9/config HTTP/1.1\r\nHost: x\r\n\r\n";
  Http1RequestParser strict;
  EXPECT_EQ(strict.Parse(wire).stop, Stop::kError);  // llhttp's strict mode alone
  for (size_t piece : {wire.size(), size_t{1}, size_t{20}}) {
    std::string bytes = wire;
    Http1RequestParser p;
    size_t at = 0;
    Http1RequestParser::Result r;
    do {
      const size_t n = std::min(piece, bytes.size() - at);
      r = p.ParseInPlace(bytes.data() + at, n);
      at += r.consumed;
    } while (r.stop == Stop::kNeedMore && at < bytes.size());
    ASSERT_EQ(r.stop, Stop::kHeadComplete) << p.error();
    EXPECT_EQ(p.head().target, "/v2/models/caf\xc3\xa9/config");
    EXPECT_EQ(bytes, wire);  // every byte put back
  }
  std::string in_method = "G\xc3T / HTTP/1.1\r\n\r\n";
  Http1RequestParser p;
  EXPECT_EQ(p.ParseInPlace(in_method.data(), in_method.size()).stop, Stop::kError);
}

TEST(Http1ParserTest, ValuesLoseTheWhitespaceAroundThem) {
  const std::string wire =
      "POST /x HTTP/1.1\r\nHost: h\r\nAuthorization:  Bearer t \t\r\nX-Empty:   \r\n"
      "Content-Length: 0\r\n\r\n";
  Http1RequestParser p;
  ASSERT_EQ(p.Parse(wire).stop, Stop::kHeadComplete) << p.error();
  EXPECT_EQ(p.head().Find("authorization"), "Bearer t");
  EXPECT_EQ(p.head().Find("x-empty"), "");
}

TEST(Http1ParserTest, EndlessChunkExtensionsAreRefused) {
  Http1Limits limits;
  limits.max_head_bytes = 256;
  Http1RequestParser p(limits);
  const std::string head = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  ASSERT_EQ(p.Parse(head).stop, Stop::kHeadComplete);
  ASSERT_EQ(p.Parse("1;name=").stop, Stop::kNeedMore);
  Http1RequestParser::Result r;
  for (int i = 0; i < 10 && r.stop != Stop::kError; ++i) r = p.Parse(std::string(64, 'a'));
  EXPECT_EQ(r.stop, Stop::kError);
  EXPECT_EQ(p.error_status(), 400);
  // Empty extensions and leading zeros reach no callback at all: bounded all the same.
  for (const char* endless : {";", "0"}) {
    Http1RequestParser q(limits);
    ASSERT_EQ(q.Parse(head).stop, Stop::kHeadComplete);
    ASSERT_EQ(q.Parse(endless[0] == ';' ? "1" : "0").stop, Stop::kNeedMore);
    Http1RequestParser::Result e;
    for (int i = 0; i < 10 && e.stop != Stop::kError; ++i) e = q.Parse(std::string(64, endless[0]));
    EXPECT_EQ(e.stop, Stop::kError) << endless;
    EXPECT_EQ(q.error_status(), 400);
  }
  // A legitimate body of many one-byte chunks passes.
  Http1RequestParser ok(limits);
  ASSERT_EQ(ok.Parse(head).stop, Stop::kHeadComplete);
  std::string chunks;
  for (int i = 0; i < 200; ++i) chunks += "1\r\na\r\n";
  chunks += "0\r\n\r\n";
  EXPECT_EQ(ok.Parse(chunks).stop, Stop::kMessageComplete) << ok.error();
}

TEST(Http1ParserTest, EmptyLinesBeforeARawUtf8RequestLine) {
  std::string wire = "\r\nGET /caf\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string original = wire;
  Http1RequestParser p;
  auto r = p.ParseInPlace(wire.data(), wire.size());
  ASSERT_EQ(r.stop, Stop::kHeadComplete) << p.error();
  EXPECT_EQ(p.head().target, "/caf\xc3\xa9");
  EXPECT_EQ(wire, original);
  // The same a byte at a time: the empty line's LF is not the request line's end (fuzz finding).
  Http1RequestParser q;
  size_t at = 0;
  do {
    r = q.ParseInPlace(wire.data() + at, 1);
    at += r.consumed;
  } while (r.stop == Stop::kNeedMore && at < wire.size());
  ASSERT_EQ(r.stop, Stop::kHeadComplete) << q.error();
  EXPECT_EQ(q.head().target, "/caf\xc3\xa9");
}

}  // namespace
}  // namespace dais::frontends::http
