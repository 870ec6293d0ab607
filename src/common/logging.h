// Minimal leveled logging on stderr: "2026-11-30T19:00:00.123Z I serve.cc:42] message".
// Verbose logs (LOG_VERBOSE(n)) print when n <= the --log-verbose level.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <string_view>

namespace dais::log {

enum class Level { kInfo, kWarning, kError, kFatal };

void SetVerbosity(int level);
int Verbosity();
void Write(Level level, const char* file, int line, std::string_view message);
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
