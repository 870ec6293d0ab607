// Minimal leveled logging on stderr: "2026-11-30T19:00:00.123Z I serve.cc:42] message", or with
// `--log-format json` one JSON object per line for log pipelines (Loki, Elasticsearch, Cloud
// Logging): {"time":"2026-11-30T19:00:00.123Z","level":"info","source":"serve.cc:42",
// "message":"..."} (plus "note" when the repeat limit below adds one).
// Verbose logs (LOG_VERBOSE(n)) print when n <= the --log-verbose level.
// Repeated identical lines (same level, file:line and text) are rate-limited: within a window of
// kRepeatWindowSecs the first kRepeatBurst are written, the rest counted; the next occurrence
// after the window is written with "[N identical lines suppressed in the last M s]" (a model
// failing to load 60,000 times writes a handful of lines a minute, not 60,000).
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <string>
#include <string_view>

namespace dais::log {

enum class Level { kInfo, kWarning, kError, kFatal };
enum class Format { kText, kJson };

void SetFormat(Format format);
Format CurrentFormat();
// The log line as written (without the newline); exposed for tests.
std::string FormatLine(Format format, std::string_view stamp, Level level, std::string_view source,
                       std::string_view message, std::string_view note);

void SetVerbosity(int level);
int Verbosity();
void Write(Level level, const char* file, int line, std::string_view message);
inline constexpr int kRepeatBurst = 5;
inline constexpr int kRepeatWindowSecs = 60;
// Lines not written because they repeated (since the process started).
uint64_t SuppressedCount();
// Counts DAIS_BUG occurrences (exported as a metric): an impossible state we survived.
std::atomic<uint64_t>& BugCount();

}  // namespace dais::log

#define DAIS_LOG(level, ...) \
  ::dais::log::Write(::dais::log::Level::level, __FILE__, __LINE__, fmt::format(__VA_ARGS__))
#define LOG_INFO(...) DAIS_LOG(kInfo, __VA_ARGS__)
#define LOG_WARNING(...) DAIS_LOG(kWarning, __VA_ARGS__)
#define LOG_ERROR(...) DAIS_LOG(kError, __VA_ARGS__)
#define LOG_VERBOSE(n, ...)                                     \
  do {                                                          \
    if (::dais::log::Verbosity() >= (n)) LOG_INFO(__VA_ARGS__); \
  } while (0)
// A "can't happen" state that we can survive: log loudly, count, continue.
#define DAIS_BUG(...)                      \
  do {                                     \
    ::dais::log::BugCount().fetch_add(1);  \
    DAIS_LOG(kError, "BUG: " __VA_ARGS__); \
  } while (0)
// A "can't happen" state that we cannot survive.
#define DAIS_CHECK(cond)                                      \
  do {                                                        \
    if (!(cond)) DAIS_LOG(kFatal, "check failed: {}", #cond); \
  } while (0)
