#include "streams/archive_compact.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "common/logging.h"
#include "streams/archive_files.h"

namespace dais::streams {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kIntent = ".compact-intent";
constexpr std::string_view kCompactedPrefix = "compacted-";
constexpr std::string_view kSuffix = ".jsonl.gz";

bool IsCompacted(const std::string& name) {
  return name.rfind(kCompactedPrefix, 0) == 0 && name.size() > kSuffix.size() &&
         name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

// Finishes (every target in place: the sources go) or undoes (the targets go) the compaction
// an intent file describes. True when there was one.
StatusOr<bool> Recover(const fs::path& day) {
  const fs::path intent = day / kIntent;
  std::error_code ec;
  if (!fs::exists(intent, ec)) return false;
  std::ifstream in(intent);
  std::vector<std::string> sources, targets;
  std::string kind, name;
  while (in >> kind >> name) {
    if (name.find('/') != std::string::npos) {
      return Internal(intent.string() + ": a name with '/': " + name);
    }
    (kind == "source" ? sources : targets).push_back(name);
  }
  bool all_there = !targets.empty();
  for (const std::string& t : targets) all_there = all_there && fs::exists(day / t, ec);
  if (all_there) {
    LOG_INFO("archive compact: {}: finishing an interrupted compaction ({} sources removed)",
             day.string(), sources.size());
    for (const std::string& s : sources) fs::remove(day / s, ec);
  } else {
    LOG_INFO("archive compact: {}: undoing an interrupted compaction", day.string());
    for (const std::string& t : targets) {
      fs::remove(day / t, ec);
      fs::remove(day / ("." + t + ".tmp"), ec);
    }
  }
  RETURN_IF_ERROR(SyncDirectory(day));
  fs::remove(intent, ec);
  RETURN_IF_ERROR(SyncDirectory(day));
  return true;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Merges one day's parts (all but each consumer's newest) and small compacted files.
Status CompactDay(const fs::path& day, const CompactOptions& o,
                  std::map<std::string, uint64_t>& newest, int64_t stamp, CompactStats* stats) {
  std::error_code ec;
  struct Source {
    std::string name;
    uint64_t size;
  };
  std::vector<Source> sources;
  for (const auto& f : fs::directory_iterator(day, ec)) {
    const std::string name = f.path().filename().string();
    std::string consumer;
    uint64_t seq = 0;
    const uint64_t size = f.file_size(ec);
    if (ParsePartName(name, &consumer, &seq)) {
      // Its consumer's newest flush, or one written since the scan (a newer seq, or a consumer
      // not seen then): left alone, its archiver's restart reads it.
      auto it = newest.find(consumer);
      if (it == newest.end() || seq >= it->second) continue;
    } else if (!IsCompacted(name) || size >= o.target_bytes / 10 * 9) {
      continue;  // not ours, or already a full compacted file
    }
    sources.push_back({name, size});
  }
  if (sources.size() < static_cast<size_t>(std::max(2, o.min_files))) return OkStatus();
  std::sort(sources.begin(), sources.end(),
            [](const Source& a, const Source& b) { return a.name < b.name; });
  // Consecutive sources into targets of about target_bytes.
  std::vector<std::vector<const Source*>> groups(1);
  uint64_t group_bytes = 0;
  for (const Source& s : sources) {
    if (!groups.back().empty() && group_bytes + s.size > o.target_bytes) {
      groups.emplace_back();
      group_bytes = 0;
    }
    groups.back().push_back(&s);
    group_bytes += s.size;
  }
  if (groups.size() >= sources.size()) return OkStatus();  // nothing would get fewer
  std::ostringstream intent;
  std::vector<std::string> targets;
  for (size_t i = 0; i < groups.size(); ++i) {
    targets.push_back(std::string(kCompactedPrefix) + std::to_string(stamp) + "-" +
                      std::to_string(i) + std::string(kSuffix));
    intent << "target " << targets.back() << "\n";
  }
  for (const Source& s : sources) intent << "source " << s.name << "\n";
  RETURN_IF_ERROR(WriteDurably(day / (std::string(kIntent) + ".tmp"), day / kIntent, intent.str()));
  // A gzip file may hold several members one after the other (RFC 1952 2.2): the parts are
  // concatenated as they are, without decompressing.
  for (size_t i = 0; i < groups.size(); ++i) {
    DurableFile out(day / ("." + targets[i] + ".tmp"), day / targets[i]);
    RETURN_IF_ERROR(out.Open());
    for (const Source* s : groups[i]) {
      RETURN_IF_ERROR(out.AppendFile(day / s->name));
      stats->bytes_before += s->size;
    }
    stats->bytes_after += out.size();
    RETURN_IF_ERROR(out.Commit());
  }
  for (const Source& s : sources) fs::remove(day / s.name, ec);
  RETURN_IF_ERROR(SyncDirectory(day));
  fs::remove(day / kIntent, ec);
  RETURN_IF_ERROR(SyncDirectory(day));
  stats->days += 1;
  stats->files_before += sources.size();
  stats->files_after += groups.size();
  LOG_INFO("archive compact: {}: {} files -> {}", day.string(), sources.size(), groups.size());
  return OkStatus();
}

}  // namespace

StatusOr<CompactStats> CompactArchive(const CompactOptions& o) {
  if (o.target_bytes == 0) return InvalidArgument("--target-bytes must be positive");
  const fs::path dataset = fs::path(o.root) / o.dataset;
  std::error_code ec;
  if (!fs::is_directory(dataset, ec)) {
    return NotFound("no dataset directory " + dataset.string());
  }
  const fs::path lock_path = dataset / ".compact.lock";
  const int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0) return Internal("cannot open " + lock_path.string() + ": " + std::strerror(errno));
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }
  } unlock{lock};
  if (::flock(lock, LOCK_EX | LOCK_NB) != 0) {
    return FailedPrecondition("another compaction of " + dataset.string() + " is running");
  }

  std::vector<fs::path> days;
  for (const auto& d : fs::directory_iterator(dataset, ec)) {
    if (d.is_directory() && d.path().filename().string().rfind("dt=", 0) == 0) {
      days.push_back(d.path());
    }
  }
  std::sort(days.begin(), days.end());
  CompactStats stats;
  for (const fs::path& day : days) {
    auto recovered = Recover(day);
    if (!recovered.ok()) return recovered.status();
    stats.recovered += *recovered ? 1 : 0;
  }
  // Each consumer's newest flush (over all days) stays: its archiver's restart reads it.
  std::map<std::string, uint64_t> newest;
  for (const fs::path& day : days) {
    for (const auto& f : fs::directory_iterator(day, ec)) {
      std::string consumer;
      uint64_t seq = 0;
      if (ParsePartName(f.path().filename().string(), &consumer, &seq)) {
        newest[consumer] = std::max(newest[consumer], seq);
      }
    }
  }
  const int64_t stamp = NowMs();
  for (const fs::path& day : days) RETURN_IF_ERROR(CompactDay(day, o, newest, stamp, &stats));
  return stats;
}

}  // namespace dais::streams
