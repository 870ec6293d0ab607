#include "perf/options.h"

#include <gtest/gtest.h>

#include "common/status_testing.h"

namespace dais::perf {
namespace {

std::vector<int64_t> Levels(std::string_view text) {
  auto r = ParseConcurrencyRange("--concurrency-range", text);
  EXPECT_OK(r);
  return r.ok() ? *r : std::vector<int64_t>{};
}

TEST(ParseRange, MultiplyingStep) {
  EXPECT_EQ(Levels("1:64:x2"), (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(Levels("1:100:x2"), (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(Levels("2:20:X3"), (std::vector<int64_t>{2, 6, 18}));
  EXPECT_EQ(Levels("1:4:x1.5"), (std::vector<int64_t>{1, 2, 3}));  // 1, ceil(1.5), ceil(3)=3
}

TEST(ParseRange, AddingStep) {
  EXPECT_EQ(Levels("1:10:3"), (std::vector<int64_t>{1, 4, 7, 10}));
  EXPECT_EQ(Levels("1:10:4"), (std::vector<int64_t>{1, 5, 9}));
  EXPECT_EQ(Levels("1:4"), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(Levels("8"), (std::vector<int64_t>{8}));
  EXPECT_EQ(Levels("3:3"), (std::vector<int64_t>{3}));
}

TEST(ParseRange, Rates) {
  auto r = ParseRateRange("--request-rate-range", "100:200:100");
  ASSERT_OK(r);
  EXPECT_EQ(*r, (std::vector<double>{100, 200}));
  r = ParseRateRange("--request-rate-range", "0.1:0.3:0.1");
  ASSERT_OK(r);
  ASSERT_EQ(r->size(), 3u);
  EXPECT_DOUBLE_EQ((*r)[0], 0.1);
}

TEST(ParseRange, Errors) {
  for (const char* bad :
       {"", "a", "1:b", "1:4:c", "0:4", "-1:4", "4:1", "1:4:0", "1:4:x1", "1:4:x0.5", "1:4:-1",
        "1:2:3:4", "1.5:4", "1:4:1.5", ":4", "1:", "1:100000"}) {
    auto r = ParseConcurrencyRange("--concurrency-range", bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(r.status().message().find("--concurrency-range"), std::string::npos);
    }
  }
}

TEST(ParseUrl, Forms) {
  auto hp = ParseUrl("127.0.0.1:9000", 8000);
  ASSERT_OK(hp);
  EXPECT_EQ(hp->host, "127.0.0.1");
  EXPECT_EQ(hp->port, "9000");
  hp = ParseUrl("http://example.com/", 8000);
  ASSERT_OK(hp);
  EXPECT_EQ(hp->host, "example.com");
  EXPECT_EQ(hp->port, "8000");
  hp = ParseUrl("[::1]:8001", 8000);
  ASSERT_OK(hp);
  EXPECT_EQ(hp->host, "::1");
  EXPECT_EQ(hp->port, "8001");
  EXPECT_FALSE(ParseUrl("host:0", 8000).ok());
  EXPECT_FALSE(ParseUrl("host:99999", 8000).ok());
  EXPECT_FALSE(ParseUrl(":80", 8000).ok());
  EXPECT_FALSE(ParseUrl("", 8000).ok());
}

TEST(ValidateOptions, Combinations) {
  PerfOptions o;
  o.model_name = "m";
  EXPECT_OK(ValidateOptions(o));
  o.concurrency_range = "1:2";
  o.request_rate_range = "10";
  EXPECT_FALSE(ValidateOptions(o).ok());
  o.request_rate_range.clear();
  o.batch_size = 0;
  EXPECT_FALSE(ValidateOptions(o).ok());
  o.batch_size = 1;
  o.protocol = "grpc";
  o.http_binary = true;
  EXPECT_FALSE(ValidateOptions(o).ok());
  o.http_binary = false;
  o.concurrency_range = "0:2";
  EXPECT_FALSE(ValidateOptions(o).ok());
}

}  // namespace
}  // namespace dais::perf
