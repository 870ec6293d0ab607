#include "streams/archiver.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <thread>

#include "common/json.h"
#include "common/logging.h"
#include "common/zlib_codec.h"
#include "metrics/registry.h"
#include "streams/archive_files.h"

namespace dais::streams {

namespace fs = std::filesystem;

namespace {

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void AppendJsonString(std::string_view s, std::string* out) {
  out->push_back('"');
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out->append(buf);
    } else {
      out->push_back(static_cast<char>(c));
    }
  }
  out->push_back('"');
}

// A value that is itself a JSON object or array (the feedback stream's record).
// Accepts any value nested at most `max_depth` deep (what ParseJson accepts when the archive's
// lines are read back: by a restart's ReadIds and by `dais train`).
struct IgnoreAll : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, IgnoreAll> {
  int depth = 0, max_depth = json::kDefaultMaxDepth - 1;  // the line's object is one more level
  bool Default() { return true; }
  bool StartObject() { return ++depth <= max_depth; }
  bool StartArray() { return ++depth <= max_depth; }
  bool EndObject(rapidjson::SizeType) { return --depth, true; }
  bool EndArray(rapidjson::SizeType) { return --depth, true; }
};

bool IsJsonDocument(const std::string& v) {
  if (v.empty() || (v.front() != '{' && v.front() != '[')) return false;
  if (v.find('\0') != std::string::npos) return false;
  // Validated by rapidjson's SAX reader without building a document (iterative: no recursion
  // however deep; numbers checked but not converted). Nested deeper than ParseJson reads back:
  // archived as a string instead.
  rapidjson::Reader reader;
  rapidjson::MemoryStream ms(v.data(), v.size());
  IgnoreAll ignore;
  return !reader
              .Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseNumbersAsStringsFlag>(ms,
                                                                                             ignore)
              .IsError();
}

// Every entry id of a committed part.
Status ReadIds(const fs::path& part, std::unordered_set<std::string>* ids) {
  std::ifstream in(part, std::ios::binary);
  std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Inflater inflater(ZlibFormat::kGzip, uint64_t{1} << 34);
  std::string text;
  RETURN_IF_ERROR(inflater.Feed(gz, &text));
  RETURN_IF_ERROR(inflater.Finish());
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    rapidjson::Document doc;
    if (json::ParseJson(std::string_view(text).substr(pos, end - pos), &doc).ok() &&
        doc.IsObject() && doc.HasMember("entry_id") && doc["entry_id"].IsString()) {
      ids->insert(doc["entry_id"].GetString());
    }
    pos = end + 1;
  }
  return OkStatus();
}

}  // namespace

std::string DayOfEntryId(const std::string& entry_id) {
  const size_t dash = entry_id.find('-');
  int64_t ms = 0;
  try {
    ms = std::stoll(entry_id.substr(0, dash));
  } catch (...) {
    return "";
  }
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
  return buf;
}

void AppendArchiveLine(const std::string& stream, const Entry& entry, std::string* line) {
  *line += "{\"entry_id\":";
  AppendJsonString(entry.entry_id, line);
  *line += ",\"stream\":";
  AppendJsonString(stream, line);
  for (const auto& [k, v] : entry.fields) {
    if (k == "entry_id" || k == "stream") continue;  // ours
    line->push_back(',');
    AppendJsonString(k, line);
    line->push_back(':');
    if (IsJsonDocument(v)) {
      *line += v;
    } else {
      AppendJsonString(v, line);
    }
  }
  line->push_back('}');
}

std::string ArchiveLine(const std::string& stream, const Entry& entry) {
  std::string line;
  AppendArchiveLine(stream, entry, &line);
  return line;
}

struct Archiver::Metrics {
  metrics::Counter& records;
  metrics::Counter& duplicates;
  metrics::Counter& files;
  metrics::Counter& bytes;
  metrics::Gauge& lag_seconds;
  metrics::Histogram& flush_seconds;
  explicit Metrics(const ArchiverOptions& o)
      : records(metrics::Registry::Global()
                    .AddCounter("dais_archive_records_total",
                                "Stream entries written to committed archive parts.",
                                {"stream", "dataset"})
                    .Get({o.stream, o.dataset})),
        duplicates(metrics::Registry::Global()
                       .AddCounter("dais_archive_duplicate_records_total",
                                   "Pending or claimed entries found already in a committed part "
                                   "(after a crash): acknowledged, not written again.",
                                   {"stream", "dataset"})
                       .Get({o.stream, o.dataset})),
        files(metrics::Registry::Global()
                  .AddCounter("dais_archive_files_total", "Archive parts written.",
                              {"stream", "dataset"})
                  .Get({o.stream, o.dataset})),
        bytes(metrics::Registry::Global()
                  .AddCounter("dais_archive_bytes_total",
                              "Bytes of archive parts written (gzip-compressed).",
                              {"stream", "dataset"})
                  .Get({o.stream, o.dataset})),
        lag_seconds(metrics::Registry::Global()
                        .AddGauge("dais_archive_lag_seconds",
                                  "Age (by its stream id's time) of the oldest entry read and "
                                  "not yet in a committed part; 0 when none is waiting.",
                                  {"stream", "dataset"})
                        .Get({o.stream, o.dataset})),
        flush_seconds(metrics::Registry::Global()
                          .AddHistogram("dais_archive_flush_duration_seconds",
                                        "Time to write, fsync and rename a flush's parts and "
                                        "acknowledge its entries.",
                                        {"stream", "dataset"}, metrics::LatencyBuckets())
                          .Get({o.stream, o.dataset})) {}
};

Archiver::Archiver(EventStream* stream, ArchiverOptions options)
    : stream_(stream),
      options_(std::move(options)),
      metrics_(std::make_unique<Metrics>(options_)) {}

Archiver::~Archiver() = default;

namespace {

int64_t IdMs(const std::string& entry_id) {
  int64_t ms = 0;
  for (char c : entry_id) {
    if (c < '0' || c > '9') break;
    ms = ms * 10 + (c - '0');
  }
  return ms;
}

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::string Archiver::DatasetDir() const {
  return (fs::path(options_.root) / options_.dataset).string();
}

Status Archiver::ScanNewest(bool mine) {
  // Per consumer: its newest flush (seq) and that flush's files.
  std::map<std::string, std::pair<uint64_t, std::vector<fs::path>>> newest;
  const std::string my_tmp_prefix = ".part-" + options_.consumer + "-";
  std::error_code ec;
  for (const auto& day : fs::directory_iterator(DatasetDir(), ec)) {
    if (!day.is_directory() || day.path().filename().string().rfind("dt=", 0) != 0) continue;
    for (const auto& f : fs::directory_iterator(day.path(), ec)) {
      const std::string name = f.path().filename().string();
      if (mine && name.rfind(my_tmp_prefix, 0) == 0) {  // a half-written part of ours
        LOG_INFO("archive: removing the unfinished {}", f.path().string());
        fs::remove(f.path(), ec);
        continue;
      }
      std::string consumer;
      uint64_t seq = 0;
      if (!ParsePartName(name, &consumer, &seq) || (consumer == options_.consumer) != mine) {
        continue;
      }
      auto& [top, files] = newest[consumer];
      if (seq > top) top = seq, files.clear();
      if (seq == top) files.push_back(f.path());
    }
  }
  std::unordered_set<std::string>& ids = mine ? committed_ : others_;
  ids.clear();
  for (const auto& [consumer, top_files] : newest) {
    if (mine) next_seq_ = top_files.first + 1;
    for (const fs::path& p : top_files.second) {
      if (Status s = ReadIds(p, &ids); !s.ok()) {
        return Internal("reading " + p.string() + ": " + std::string(s.message()));
      }
    }
  }
  return OkStatus();
}

Status Archiver::Start() {
  if (options_.consumer.empty() || options_.consumer.find('/') != std::string::npos) {
    return InvalidArgument("--consumer: a name without '/' is needed");
  }
  if (int64_t{options_.max_age_ms} * 2 > options_.claim_idle_ms) {
    // Entries buffered longer than the claim time could be claimed and written by another
    // archiver as well.
    return InvalidArgument("--max-age-ms (" + std::to_string(options_.max_age_ms) +
                           ") must be at most half of --claim-idle-ms (" +
                           std::to_string(options_.claim_idle_ms) + ")");
  }
  RETURN_IF_ERROR(stream_->EnsureGroup(options_.stream, options_.group));
  std::error_code ec;
  if (fs::create_directories(DatasetDir(), ec)) {
    RETURN_IF_ERROR(SyncDirectory(fs::path(DatasetDir()).parent_path()));
  }
  if (ec) return Internal("cannot create " + DatasetDir() + ": " + ec.message());
  RETURN_IF_ERROR(ScanNewest(/*mine=*/true));
  RETURN_IF_ERROR(ScanNewest(/*mine=*/false));
  LOG_INFO("archive: {} of group {} on {} -> {} (next part {}; {} + {} ids in the newest parts)",
           options_.consumer, options_.group, options_.stream, DatasetDir(), next_seq_,
           committed_.size(), others_.size());
  return OkStatus();
}

Status Archiver::AckAll(const std::vector<std::string>& ids) {
  for (size_t i = 0; i < ids.size(); i += 1000) {
    std::vector<std::string> chunk(ids.begin() + i, ids.begin() + std::min(ids.size(), i + 1000));
    // Until it succeeds: reading on while these stay pending would break the invariant that
    // only the newest flush may hold pending entries.
    for (int backoff = 100;; backoff = std::min(backoff * 2, 5000)) {
      Status s = stream_->Ack(options_.stream, options_.group, chunk);
      if (s.ok()) break;
      LOG_WARNING("archive: XACK of {} entries: {}; retrying", chunk.size(), s.message());
      std::this_thread::sleep_for(std::chrono::milliseconds(backoff));
    }
  }
  return OkStatus();
}

Status Archiver::Take(std::vector<Entry> entries, bool redelivered) {
  // Only entries delivered before (pending after a restart, or claimed) can be in a committed
  // part or in the buffer already: new ones (">") skip the lookups. The sets are built when a
  // redelivery needs them (at most once a claim round), not kept up for every entry.
  if (redelivered && !entries.empty()) {
    if (!committed_ids_.empty()) {
      committed_.insert(committed_ids_.begin(), committed_ids_.end());
      committed_ids_.clear();
    }
    buffered_ids_.clear();
    buffered_ids_.insert(buffer_.begin(), buffer_.end());
  }
  std::vector<std::string> already;
  for (Entry& e : entries) {
    if (redelivered) {
      if (buffered_ids_.count(e.entry_id)) continue;  // claimed back while still buffered
      if (committed_.count(e.entry_id) || others_.count(e.entry_id)) {
        already.push_back(e.entry_id);
        continue;
      }
      buffered_ids_.insert(e.entry_id);
    }
    if (buffer_.empty()) {
      oldest_ms_ = SteadyMs();
      oldest_id_ms_ = IdMs(e.entry_id);
    }
    line_.clear();
    AppendArchiveLine(options_.stream, e, &line_);
    line_.push_back('\n');
    RETURN_IF_ERROR(DayPart(e.entry_id)->Feed(line_));
    buffer_bytes_ += line_.size();
    buffer_.push_back(std::move(e.entry_id));
  }
  if (!already.empty()) {
    stats_.duplicates += already.size();
    metrics_->duplicates.Increment(static_cast<double>(already.size()));
    LOG_INFO("archive: {} entries already in a committed part: acknowledged", already.size());
    RETURN_IF_ERROR(AckAll(already));
  }
  return OkStatus();
}

Deflater* Archiver::DayPart(const std::string& entry_id) {
  const int64_t day = IdMs(entry_id) / 86'400'000;
  if (day != current_day_ || current_part_ == nullptr) {
    std::string name = DayOfEntryId(entry_id);
    if (name.empty()) name = "1970-01-01";
    auto& part = parts_[name];
    if (!part) part = std::make_unique<Deflater>(ZlibFormat::kGzip, 1);
    current_day_ = day;
    current_part_ = part.get();
  }
  return current_part_;
}

Status Archiver::Flush() {
  if (buffer_.empty()) return OkStatus();
  const auto started = std::chrono::steady_clock::now();
  const std::string name = "part-" + options_.consumer + "-" + std::to_string(next_seq_);
  for (const auto& [day, part] : parts_) {
    const fs::path dir = fs::path(DatasetDir()) / ("dt=" + day);
    std::error_code ec;
    if (fs::create_directories(dir, ec)) {
      // A new day: its directory entry must be durable before a part in it is acknowledged.
      RETURN_IF_ERROR(SyncDirectory(dir.parent_path()));
    }
    if (ec) return Internal("cannot create " + dir.string() + ": " + ec.message());
    RETURN_IF_ERROR(part->Finish());
    const std::string& gz = part->output();
    RETURN_IF_ERROR(
        WriteDurably(dir / ("." + name + ".jsonl.gz.tmp"), dir / (name + ".jsonl.gz"), gz));
    stats_.files += 1;
    stats_.bytes += gz.size();
    metrics_->files.Increment();
    metrics_->bytes.Increment(static_cast<double>(gz.size()));
  }
  parts_.clear();
  current_part_ = nullptr;
  std::vector<std::string> ids = std::move(buffer_);
  // Committed: from now on these ids are the newest flush's (this consumer's older ones are
  // all acknowledged, so only these can still be pending).
  ++next_seq_;
  stats_.records += ids.size();
  buffer_.clear();
  buffered_ids_.clear();
  buffer_bytes_ = 0;
  RETURN_IF_ERROR(AckAll(ids));
  metrics_->records.Increment(static_cast<double>(ids.size()));
  committed_.clear();
  committed_ids_ = std::move(ids);
  metrics_->flush_seconds.Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  return OkStatus();
}

int Archiver::ReadCount() const {
  // No read brings more than a part holds: parts keep to --max-records.
  return static_cast<int>(std::min<size_t>(options_.read_count, options_.max_records));
}

Status Archiver::Run() {
  bool pending = true;  // first this consumer's entries delivered before a restart
  int64_t last_claim = 0;
  bool claim_empty = false;  // the last claim found nothing (drain waits for one that does)
  const int64_t claim_every = std::max(1000, options_.claim_idle_ms / 2);
  // The next read of new entries, sent before the last one's entries are encoded and written,
  // so that Redis and this thread work at once. What it delivers is pending and in no file,
  // like buffered entries: a crash leaves it to this consumer's restart or to a claim.
  std::future<StatusOr<std::vector<Entry>>> next;
  while (!stopping_) {
    StatusOr<std::vector<Entry>> got = std::vector<Entry>{};
    const int64_t now = SteadyMs();
    bool claimed = false;
    if (next.valid()) {
      got = next.get();
    } else if (!pending && now - last_claim > claim_every) {
      last_claim = now;
      claimed = true;
      // What another consumer may have committed without acknowledging before it died.
      RETURN_IF_ERROR(ScanNewest(/*mine=*/false));
      got = stream_->Claim(options_.stream, options_.group, options_.consumer,
                           options_.claim_idle_ms, ReadCount());
    } else if (pending) {
      got = stream_->Read(options_.stream, options_.group, options_.consumer, ReadCount(), 0,
                          /*pending=*/true);
    } else {
      got = stream_->Read(options_.stream, options_.group, options_.consumer, ReadCount(), 200,
                          /*pending=*/false);
    }
    if (!got.ok()) {
      LOG_WARNING("archive: {}", got.status().message());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    // A full read says more is waiting; not when a claim round is due (while the stream stays
    // busy it would never come).
    if (!pending && !claimed && got->size() == static_cast<size_t>(ReadCount()) &&
        SteadyMs() - last_claim <= claim_every) {
      next = stream_->ReadAsync(options_.stream, options_.group, options_.consumer, ReadCount(),
                                /*block_ms=*/1);
    }
    const bool nothing = got->empty();
    if (pending && nothing) pending = false;
    if (claimed) claim_empty = nothing;
    RETURN_IF_ERROR(Take(std::move(*got), pending || claimed));
    // Pending and claimed entries are read from the start of the list each time ("0"): written
    // (and so acknowledged) before the next read, or the same ones would come back.
    const bool reread = (pending || claimed) && !nothing;
    const bool full =
        reread || buffer_.size() >= options_.max_records || buffer_bytes_ >= options_.max_bytes;
    const bool old = !buffer_.empty() && SteadyMs() - oldest_ms_ >= options_.max_age_ms;
    const bool drained = options_.drain && nothing && !pending && !claimed && claim_empty;
    if (full || old || drained) RETURN_IF_ERROR(Flush());
    metrics_->lag_seconds.Set(
        buffer_.empty()
            ? 0.0
            : static_cast<double>(std::max<int64_t>(0, WallMs() - oldest_id_ms_)) / 1000.0);
    if (drained) break;
  }
  if (next.valid()) {  // stopping: what it delivered goes into the last flush
    if (auto got = next.get(); got.ok()) {
      RETURN_IF_ERROR(Take(std::move(*got), /*redelivered=*/false));
    }
  }
  return Flush();
}

}  // namespace dais::streams
