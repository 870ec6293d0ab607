#include "common/logging.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dais::log {
namespace {

using ::testing::HasSubstr;

int Lines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

// Issue 11: a model failing to load 60,000 times wrote 60,000 identical lines.
TEST(LoggingTest, RepeatedIdenticalLinesAreSuppressedAndCounted) {
  const uint64_t before = SuppressedCount();
  testing::internal::CaptureStderr();
  for (int i = 0; i < 1000; ++i) LOG_ERROR("model '{}' failed to load: {}", "bad", "no file");
  std::string out = testing::internal::GetCapturedStderr();
  EXPECT_EQ(Lines(out), kRepeatBurst) << out;
  EXPECT_THAT(out, HasSubstr("identical lines are suppressed"));
  EXPECT_EQ(SuppressedCount() - before, 1000u - kRepeatBurst);
}

TEST(LoggingTest, DistinctLinesAreAllWritten) {
  testing::internal::CaptureStderr();
  for (int i = 0; i < 200; ++i) LOG_INFO("loading model 'm{}'", i);
  std::string out = testing::internal::GetCapturedStderr();
  EXPECT_EQ(Lines(out), 200);
}

TEST(LoggingTest, SameTextFromAnotherLineIsNotTheSameLine) {
  testing::internal::CaptureStderr();
  for (int i = 0; i < 20; ++i) {
    LOG_WARNING("same text");
    LOG_WARNING("same text");
  }
  std::string out = testing::internal::GetCapturedStderr();
  EXPECT_EQ(Lines(out), 2 * kRepeatBurst);
}

}  // namespace
TEST(LoggingTest, TextLineIsStampLevelSourceMessage) {
  EXPECT_EQ(FormatLine(Format::kText, "2026-11-30T19:00:00.123Z", Level::kWarning, "serve.cc:42",
                       "model m failed", " [5 times in 2 s]"),
            "2026-11-30T19:00:00.123Z W serve.cc:42] model m failed [5 times in 2 s]");
}

TEST(LoggingTest, JsonLineEscapesTheMessageAndCarriesTheNote) {
  EXPECT_EQ(FormatLine(Format::kJson, "2026-11-30T19:00:00.123Z", Level::kError, "a.cc:7",
                       "bad \"name\"\\path\nnext\x01", " [3 identical lines suppressed]"),
            R"({"time":"2026-11-30T19:00:00.123Z","level":"error","source":"a.cc:7",)"
            R"("message":"bad \"name\"\\path\nnext\u0001",)"
            R"("note":"3 identical lines suppressed"})");
  EXPECT_EQ(FormatLine(Format::kJson, "t", Level::kInfo, "b.cc:1", "", ""),
            R"({"time":"t","level":"info","source":"b.cc:1","message":""})");
}

}  // namespace dais::log
