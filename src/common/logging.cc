#include "common/logging.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <mutex>
#include <string>

#include "common/mutex.h"

namespace dais::log {
namespace {
std::atomic<int> g_verbosity{0};
std::atomic<Format> g_format{Format::kText};
Mutex g_write_mu;
std::atomic<uint64_t> g_suppressed{0};

// The recent distinct lines, for the repeat limit; a small table replaced least recently seen
// first, so a flood of distinct lines costs a bounded amount of memory and a scan of 64 slots.
struct Recent {
  uint64_t hash = 0;
  uint64_t last_use = 0;  // 0: empty; else the Admit call that last saw it (least recent goes)
  int64_t window_start_ms = 0;
  uint64_t in_window = 0;   // lines of this window, written or not
  uint64_t suppressed = 0;  // not written in this window
};
constexpr size_t kRecentSlots = 64;
Recent g_recent[kRecentSlots];  // guarded by g_write_mu
uint64_t g_uses = 0;            // guarded by g_write_mu

uint64_t LineHash(Level level, const char* file, int line, std::string_view message) {
  uint64_t h = std::hash<std::string_view>{}(message);
  h ^= std::hash<std::string_view>{}(file) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h ^ (static_cast<uint64_t>(line) << 8) ^ static_cast<uint64_t>(level);
}

// Under g_write_mu. False: do not write this line. `*note`: a suffix to write with it.
bool Admit(uint64_t hash, int64_t now_ms, std::string* note) {
  const uint64_t use = ++g_uses;
  Recent* slot = nullptr;
  Recent* oldest = &g_recent[0];
  for (Recent& r : g_recent) {
    if (r.hash == hash && r.last_use != 0) {
      slot = &r;
      break;
    }
    if (r.last_use < oldest->last_use) oldest = &r;
  }
  if (slot == nullptr) {
    *oldest = Recent{hash, use, now_ms, 1, 0};
    return true;
  }
  slot->last_use = use;
  const int64_t window_ms = int64_t{kRepeatWindowSecs} * 1000;
  if (now_ms - slot->window_start_ms >= window_ms) {
    if (slot->suppressed > 0) {
      *note = " [" + std::to_string(slot->suppressed) + " identical lines suppressed in the last " +
              std::to_string((now_ms - slot->window_start_ms) / 1000) + " s]";
    }
    *slot = Recent{hash, use, now_ms, 1, 0};
    return true;
  }
  const uint64_t n = ++slot->in_window;
  if (n < static_cast<uint64_t>(kRepeatBurst)) return true;
  if (n == static_cast<uint64_t>(kRepeatBurst)) {
    *note = " [" + std::to_string(n) + " times in " +
            std::to_string((now_ms - slot->window_start_ms) / 1000) +
            " s; identical lines are suppressed until " + std::to_string(kRepeatWindowSecs) +
            " s have passed]";
    return true;
  }
  ++slot->suppressed;
  g_suppressed.fetch_add(1, std::memory_order_relaxed);
  return false;
}

const char* Basename(const char* path) {
  const char* base = path;
  for (const char* p = path; *p; ++p)
    if (*p == '/') base = p + 1;
  return base;
}

// A JSON string's contents (RFC 8259 §7): quote, backslash and control characters escaped; other
// bytes as they are (messages are UTF-8 or, from a peer, whatever it sent: kept byte for byte).
void AppendJsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  for (const char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out->append(fmt::format("\\u{:04x}", static_cast<unsigned>(c)));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}
}  // namespace

std::string FormatLine(Format format, std::string_view stamp, Level level, std::string_view source,
                       std::string_view message, std::string_view note) {
  static constexpr char kLetters[] = {'I', 'W', 'E', 'F'};
  static constexpr const char* kNames[] = {"info", "warning", "error", "fatal"};
  const int l = static_cast<int>(level);
  if (format == Format::kText) {
    return fmt::format("{} {} {}] {}{}", stamp, kLetters[l], source, message, note);
  }
  std::string out = "{\"time\":";
  AppendJsonString(&out, stamp);
  out += ",\"level\":\"";
  out += kNames[l];
  out += "\",\"source\":";
  AppendJsonString(&out, source);
  out += ",\"message\":";
  AppendJsonString(&out, message);
  if (!note.empty()) {
    out += ",\"note\":";
    // The text note is " [...]"; JSON carries what is inside the brackets.
    const bool bracketed = note.size() >= 3 && note.substr(0, 2) == " [" && note.back() == ']';
    AppendJsonString(&out, bracketed ? note.substr(2, note.size() - 3) : note);
  }
  out += '}';
  return out;
}

void SetFormat(Format format) { g_format.store(format); }
Format CurrentFormat() { return g_format.load(std::memory_order_relaxed); }
uint64_t SuppressedCount() { return g_suppressed.load(std::memory_order_relaxed); }
void SetVerbosity(int level) { g_verbosity.store(level); }
int Verbosity() { return g_verbosity.load(std::memory_order_relaxed); }
std::atomic<uint64_t>& BugCount() {
  static std::atomic<uint64_t> count{0};
  return count;
}

void Write(Level level, const char* file, int line, std::string_view message) {
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  int millis = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[40];
  const size_t n = std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(stamp + n, sizeof stamp - n, ".%03dZ", millis);
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  const uint64_t hash = LineHash(level, file, line, message);
  {
    MutexLock lock(&g_write_mu);
    std::string note;
    // Fatal lines are always written: the process ends with them.
    if (level != Level::kFatal && !Admit(hash, now_ms, &note)) return;
    const std::string source = fmt::format("{}:{}", Basename(file), line);
    const std::string text = FormatLine(CurrentFormat(), stamp, level, source, message, note);
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fputc('\n', stderr);
    std::fflush(stderr);
  }
  if (level == Level::kFatal) std::abort();
}

}  // namespace dais::log
