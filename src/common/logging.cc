#include "common/logging.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>

namespace dais::log {
namespace {
std::atomic<int> g_verbosity{0};
std::mutex g_write_mu;

const char* Basename(const char* path) {
  const char* base = path;
  for (const char* p = path; *p; ++p)
    if (*p == '/') base = p + 1;
  return base;
}
}  // namespace

void SetVerbosity(int level) { g_verbosity.store(level); }
int Verbosity() { return g_verbosity.load(std::memory_order_relaxed); }
std::atomic<uint64_t>& BugCount() {
  static std::atomic<uint64_t> count{0};
  return count;
}

void Write(Level level, const char* file, int line, std::string_view message) {
  static constexpr char kLetters[] = {'I', 'W', 'E', 'F'};
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  int millis = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  {
    std::lock_guard<std::mutex> lock(g_write_mu);
    std::fprintf(stderr, "%s.%03dZ %c %s:%d] %.*s\n", stamp, millis,
                 kLetters[static_cast<int>(level)], Basename(file), line,
                 static_cast<int>(message.size()), message.data());
    std::fflush(stderr);
  }
  if (level == Level::kFatal) std::abort();
}

}  // namespace dais::log
