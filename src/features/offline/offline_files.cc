#include "features/offline/offline_files.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <unordered_map>
#include <unordered_set>

#include "common/json.h"
#include "features/offline/offline_fields.h"
#include "features/spec/feature_codec.h"
#include "fmt/format.h"

namespace dais::features {
namespace {

using namespace internal;  // NOLINT: the field parsers of offline_fields.h

namespace fs = std::filesystem;

constexpr size_t kChunkBytes = 64 << 10;
constexpr std::string_view kTimestampColumn = "event_timestamp";
constexpr std::string_view kBom = "\xEF\xBB\xBF";
// Most fields a CSV header may have (bounds memory on a line of commas).
constexpr size_t kMaxHeaderFields = 1 << 16;
// ---- Parsers ----

// The shared part: BOM, stop and failure handling, stats, reporting.
class ParserBase : public OfflineParser {
 public:
  ParserBase(std::string name, const GroupSpec& group, KeyType key_type, OfflineRowFn on_row,
             OfflineErrorFn on_error, size_t max_record_bytes)
      : name_(std::move(name)),
        group_(group),
        key_type_(key_type),
        max_record_bytes_(std::max<size_t>(max_record_bytes, 1)),
        on_row_(std::move(on_row)),
        on_error_(std::move(on_error)) {}

  Status Feed(std::string_view data) final {
    if (!status_.ok() || stopped_) return status_;
    stats_.bytes += static_cast<int64_t>(data.size());
    if (!bom_done_) {
      const size_t take = std::min(data.size(), kBom.size() - prefix_.size());
      prefix_.append(data.substr(0, take));
      data.remove_prefix(take);
      if (prefix_.size() < kBom.size()) return OkStatus();
      bom_done_ = true;
      if (prefix_ != kBom) Consume(prefix_);
    }
    if (!data.empty()) Consume(data);
    return status_;
  }

  Status Finish() final {
    if (!status_.ok() || stopped_) return status_;
    if (!bom_done_) {
      bom_done_ = true;
      Consume(prefix_);
    }
    if (!stopped_ && status_.ok()) End();
    return status_;
  }

  bool stopped() const final { return stopped_; }
  const ReadStats& stats() const final { return stats_; }

 protected:
  // Processes bytes; stops early when stopped_ or status_ is set.
  virtual void Consume(std::string_view data) = 0;
  // Input ended: the last record.
  virtual void End() = 0;

  bool done() const { return stopped_ || !status_.ok(); }

  void Bad(int64_t line, std::string_view message) {
    ++stats_.bad_rows;
    if (on_error_) on_error_(line, InvalidArgument(fmt::format("{}:{}: {}", name_, line, message)));
  }
  void Fail(std::string_view message) {
    status_ = InvalidArgument(fmt::format("{}: {}", name_, message));
  }
  void Deliver(OfflineRow&& row) {
    ++stats_.rows;
    if (!on_row_(std::move(row))) stopped_ = true;
  }

  const std::string name_;
  const GroupSpec& group_;
  const KeyType key_type_;
  const size_t max_record_bytes_;

 private:
  OfflineRowFn on_row_;
  OfflineErrorFn on_error_;
  ReadStats stats_;
  Status status_;
  bool stopped_ = false;
  bool bom_done_ = false;
  std::string prefix_;  // the first bytes, until we know whether they are a BOM
};

class CsvParser final : public ParserBase {
 public:
  using ParserBase::ParserBase;

 private:
  enum class State { kFieldStart, kUnquoted, kQuoted, kQuoteInQuoted, kAfterQuote, kSkipLine };

  void Consume(std::string_view data) override {
    for (const char c : data) {
      if (done()) return;
      switch (state_) {
        case State::kFieldStart:
          in_record_ = true;
          if (c == '"') {
            state_ = State::kQuoted;
            last_quoted_ = true;
          } else if (c == ',') {
            NewField();
          } else if (c == '\n') {
            EndLine();
          } else {
            state_ = State::kUnquoted;
            Put(c);
          }
          break;
        case State::kUnquoted:
          if (c == ',') {
            NewField();
          } else if (c == '\n') {
            EndLine();
          } else {
            Put(c);
          }
          break;
        case State::kQuoted:
          if (c == '"') {
            state_ = State::kQuoteInQuoted;
          } else {
            if (c == '\n') ++line_;
            Put(c);
          }
          break;
        case State::kQuoteInQuoted:
          if (c == '"') {  // a doubled quote
            state_ = State::kQuoted;
            Put(c);
            break;
          }
          state_ = State::kAfterQuote;
          [[fallthrough]];
        case State::kAfterQuote:
          if (c == ',') {
            NewField();
          } else if (c == '\n') {
            EndLine();
          } else if (c != '\r') {
            if (error_.empty()) {
              error_ = fmt::format("column {}: text after a closing quote", starts_.size());
            }
            state_ = State::kUnquoted;
            Put(c);
          }
          break;
        case State::kSkipLine:
          if (c == '\n') EndLine();
          break;
      }
    }
  }

  void End() override {
    if (state_ == State::kQuoted && error_.empty()) {
      error_ = fmt::format("column {}: a quoted field has no closing quote", starts_.size());
    }
    if (in_record_) EndRecord();
  }

  void Put(char c) {
    if (rec_.size() >= max_record_bytes_) {
      TooLong();
      return;
    }
    rec_.push_back(c);
  }

  void NewField() {
    const size_t limit = header_done_ ? columns_ : kMaxHeaderFields;
    if (starts_.size() >= limit) {
      if (error_.empty()) {
        error_ = header_done_ ? fmt::format("more fields than the header's {}", columns_)
                              : fmt::format("more than {} columns", kMaxHeaderFields);
      }
      state_ = State::kSkipLine;
      return;
    }
    starts_.push_back(rec_.size());
    state_ = State::kFieldStart;
    last_quoted_ = false;
  }

  void TooLong() {
    if (error_.empty()) error_ = fmt::format("record longer than {} bytes", max_record_bytes_);
    state_ = State::kSkipLine;
  }

  // A line break outside quotes.
  void EndLine() {
    EndRecord();
    ++line_;
    record_line_ = line_;
  }

  std::string_view Field(size_t k) const {
    const size_t b = starts_[k];
    const size_t e = k + 1 < starts_.size() ? starts_[k + 1] : rec_.size();
    return std::string_view(rec_).substr(b, e - b);
  }

  void EndRecord() {
    // A CR before the LF ends an unquoted field; a quoted one drops it in kAfterQuote.
    if (!last_quoted_ && starts_.back() < rec_.size() && rec_.back() == '\r') {
      rec_.pop_back();
    }
    const bool blank = starts_.size() == 1 && rec_.empty() && !last_quoted_ && error_.empty();
    if (!blank) {
      if (!header_done_) {
        Header();
      } else if (!error_.empty()) {
        Bad(record_line_, error_);
      } else {
        Row();
      }
    }
    rec_.clear();
    starts_.assign(1, 0);
    error_.clear();
    last_quoted_ = false;
    in_record_ = false;
    state_ = State::kFieldStart;
  }

  void Header() {
    if (!error_.empty()) {
      Fail(fmt::format("bad header line: {}", error_));
      return;
    }
    header_done_ = true;
    columns_ = starts_.size();
    std::unordered_map<std::string_view, size_t> index;
    std::unordered_set<std::string_view> dups;
    for (size_t k = 0; k < columns_; ++k) {
      if (!index.emplace(Trim(Field(k)), k).second) dups.insert(Trim(Field(k)));
    }
    auto find = [&](std::string_view column, std::string_view what, size_t* out) {
      auto it = index.find(column);
      if (it == index.end()) {
        Fail(fmt::format("missing column \"{}\" ({} of group {})", column, what, group_.name));
        return false;
      }
      if (dups.count(column) != 0) {
        Fail(fmt::format("column \"{}\" appears more than once", column));
        return false;
      }
      *out = it->second;
      return true;
    };
    if (!find(group_.entity, "the entity", &entity_col_)) return;
    if (!find(kTimestampColumn, "the event time", &time_col_)) return;
    feature_cols_.resize(group_.features.size());
    for (size_t k = 0; k < group_.features.size(); ++k) {
      const std::string what = fmt::format("feature {}", group_.features[k].name);
      if (!find(group_.features[k].name, what, &feature_cols_[k])) return;
    }
  }

  void Row() {
    if (starts_.size() != columns_) {
      Bad(record_line_,
          fmt::format("expected {} fields as in the header, got {}", columns_, starts_.size()));
      return;
    }
    OfflineRow row;
    auto id = EntityFromText(key_type_, Field(entity_col_));
    if (!id.ok()) {
      Bad(record_line_, fmt::format("column {}: {}", group_.entity, id.status().message()));
      return;
    }
    row.entity_id = std::move(id).value();
    auto ts = ParseTimestampUs(Field(time_col_));
    if (!ts.ok()) {
      Bad(record_line_, fmt::format("column {}: {}", kTimestampColumn, ts.status().message()));
      return;
    }
    row.event_time_us = *ts;
    row.payload.reserve(group_.record_bytes);
    for (size_t k = 0; k < group_.features.size(); ++k) {
      Status st = AppendFeatureText(group_.features[k], Field(feature_cols_[k]), &row.payload);
      if (!st.ok()) {
        Bad(record_line_, fmt::format("feature {}: {}", group_.features[k].name, st.message()));
        return;
      }
    }
    Deliver(std::move(row));
  }

  State state_ = State::kFieldStart;
  std::string rec_;                // the fields of the current record, back to back
  std::vector<size_t> starts_{0};  // where each field starts in rec_
  bool last_quoted_ = false;       // the current field was quoted
  bool in_record_ = false;         // bytes of a record not yet ended
  std::string error_;              // why the current record is bad
  int64_t line_ = 1;               // current physical line
  int64_t record_line_ = 1;        // first line of the current record
  bool header_done_ = false;
  size_t columns_ = 0;
  size_t entity_col_ = 0;
  size_t time_col_ = 0;
  std::vector<size_t> feature_cols_;  // column of each feature, in GroupSpec order
};

class JsonLinesParser final : public ParserBase {
 public:
  using ParserBase::ParserBase;

 private:
  void Consume(std::string_view data) override {
    while (!data.empty() && !done()) {
      const size_t nl = data.find('\n');
      const std::string_view part = data.substr(0, nl);
      if (!too_long_) {
        if (line_buf_.size() + part.size() > max_record_bytes_) {
          too_long_ = true;
          line_buf_.clear();
        } else {
          line_buf_.append(part);
        }
      }
      if (nl == std::string_view::npos) return;
      EndLine();
      data.remove_prefix(nl + 1);
    }
  }

  void End() override {
    if (too_long_ || !line_buf_.empty()) EndLine();
  }

  void EndLine() {
    if (too_long_) {
      Bad(line_, fmt::format("line longer than {} bytes", max_record_bytes_));
    } else {
      Line(Trim(line_buf_));
    }
    too_long_ = false;
    line_buf_.clear();
    ++line_;
  }

  void Line(std::string_view text) {
    if (text.empty()) return;
    rapidjson::Document doc;
    if (Status s =
            json::ParseJson<rapidjson::kParseNanAndInfFlag | rapidjson::kParseFullPrecisionFlag>(
                text, &doc);
        !s.ok()) {
      Bad(line_, "invalid JSON: " + s.message());
      return;
    }
    if (!doc.IsObject()) {
      Bad(line_, "expected a JSON object");
      return;
    }
    auto member = [&](std::string_view key) -> const rapidjson::Value* {
      const rapidjson::Value name(
          rapidjson::StringRef(key.data(), static_cast<rapidjson::SizeType>(key.size())));
      const rapidjson::Value& object = doc;  // const iterators: no C++20 reversed-== ambiguity
      auto it = object.FindMember(name);
      return it == object.MemberEnd() ? nullptr : &it->value;
    };
    OfflineRow row;
    const rapidjson::Value* id = member(group_.entity);
    if (id == nullptr || id->IsNull()) {
      Bad(line_, fmt::format("key {}: missing", group_.entity));
      return;
    }
    auto canonical = EntityFromJson(key_type_, *id);
    if (!canonical.ok()) {
      Bad(line_, fmt::format("key {}: {}", group_.entity, canonical.status().message()));
      return;
    }
    row.entity_id = std::move(canonical).value();
    const rapidjson::Value* ts = member(kTimestampColumn);
    StatusOr<int64_t> us = InvalidArgument("missing");
    if (ts != nullptr && ts->IsString()) {
      us = ParseTimestampUs(std::string_view(ts->GetString(), ts->GetStringLength()));
    } else if (ts != nullptr && ts->IsNumber()) {
      us = NumberToUs(ts->IsInt64() ? Scalar::Int(ts->GetInt64()) : Scalar::Real(ts->GetDouble()));
    } else if (ts != nullptr && !ts->IsNull()) {
      us = InvalidArgument("expected a string or a number");
    }
    if (!us.ok()) {
      Bad(line_, fmt::format("key {}: {}", kTimestampColumn, us.status().message()));
      return;
    }
    row.event_time_us = *us;
    row.payload.reserve(group_.record_bytes);
    for (const FeatureDef& f : group_.features) {
      const rapidjson::Value* v = member(f.name);
      Status st = OkStatus();
      if (v == nullptr) {
        row.payload.append(f.default_bytes);
      } else {
        st = AppendFeatureJson(f, *v, &row.payload);
      }
      if (!st.ok()) {
        Bad(line_, fmt::format("feature {}: {}", f.name, st.message()));
        return;
      }
    }
    Deliver(std::move(row));
  }

  std::string line_buf_;
  bool too_long_ = false;
  int64_t line_ = 1;
};

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};

}  // namespace

StatusOr<OfflineFormat> OfflineFormatOf(std::string_view path) {
  std::string_view data = path;
  if (EndsWithNoCase(data, ".gz")) data.remove_suffix(3);
  if (EndsWithNoCase(data, ".csv")) return OfflineFormat::kCsv;
  if (EndsWithNoCase(data, ".jsonl") || EndsWithNoCase(data, ".json")) {
    return OfflineFormat::kJsonLines;
  }
  return InvalidArgument(fmt::format(
      "{}: not an offline feature file (expected .csv, .jsonl or .json, optionally .gz)", path));
}

StatusOr<std::unique_ptr<OfflineParser>> OfflineParser::Create(
    OfflineFormat format, std::string name, const FeatureSpec& spec, const GroupSpec& group,
    OfflineRowFn on_row, OfflineErrorFn on_error, size_t max_record_bytes) {
  const EntitySpec* entity = spec.FindEntity(group.entity);
  if (entity == nullptr) {
    return InvalidArgument(
        fmt::format("group {}: entity {} is not in the spec", group.name, group.entity));
  }
  if (!on_row) return InvalidArgument("OfflineParser needs an on_row callback");
  if (format == OfflineFormat::kCsv) {
    return std::unique_ptr<OfflineParser>(new CsvParser(std::move(name), group, entity->key_type,
                                                        std::move(on_row), std::move(on_error),
                                                        max_record_bytes));
  }
  return std::unique_ptr<OfflineParser>(new JsonLinesParser(std::move(name), group,
                                                            entity->key_type, std::move(on_row),
                                                            std::move(on_error), max_record_bytes));
}

StatusOr<std::vector<std::string>> ListPartitions(const std::string& root,
                                                  const std::string& group) {
  const fs::path dir = fs::path(root) / group;
  std::error_code ec;
  if (group.empty() || !fs::is_directory(dir, ec)) {
    return NotFound(
        fmt::format("{}: no such directory (no offline data for group {})", dir.string(), group));
  }
  std::vector<std::string> dates;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() == 13 && name.starts_with("dt=") && IsDate(name.substr(3)) &&
        it->is_directory(ec)) {
      dates.push_back(name.substr(3));
    }
  }
  if (ec) return InvalidArgument(fmt::format("{}: cannot list: {}", dir.string(), ec.message()));
  std::sort(dates.begin(), dates.end());
  return dates;
}

StatusOr<std::vector<std::string>> PartitionFiles(const std::string& root, const std::string& group,
                                                  const std::string& date) {
  if (!IsDate(date)) {
    return InvalidArgument(fmt::format("partition date {} is not YYYY-MM-DD", Quote(date)));
  }
  const fs::path dir = fs::path(root) / group / ("dt=" + date);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return NotFound(fmt::format("{}: no such partition", dir.string()));
  }
  static constexpr std::string_view kCompressed[] = {".bz2", ".snappy",  ".zst", ".zstd",
                                                     ".lz4", ".deflate", ".xz"};
  std::vector<std::string> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '_' || name[0] == '.') continue;
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec)) continue;
    if (OfflineFormatOf(name).ok()) {
      files.push_back(it->path().string());
      continue;
    }
    for (std::string_view z : kCompressed) {
      if (EndsWithNoCase(name, z) &&
          OfflineFormatOf(std::string_view(name).substr(0, name.size() - z.size())).ok()) {
        return InvalidArgument(
            fmt::format("{}: {} compression is not supported (write with compression gzip or none)",
                        it->path().string(), z.substr(1)));
      }
    }
  }
  if (ec) return InvalidArgument(fmt::format("{}: cannot list: {}", dir.string(), ec.message()));
  std::sort(files.begin(), files.end());
  return files;
}

StatusOr<ReadStats> ReadOfflineFile(const std::string& path, const FeatureSpec& spec,
                                    const GroupSpec& group, const OfflineRowFn& on_row,
                                    const OfflineErrorFn& on_error) {
  ASSIGN_OR_RETURN(OfflineFormat format, OfflineFormatOf(path));
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (file == nullptr) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) return NotFound(fmt::format("{}: no such file", path));
    return InvalidArgument(fmt::format("{}: cannot open: {}", path, std::strerror(err)));
  }
  struct stat st;
  if (fstat(fileno(file.get()), &st) == 0 && S_ISDIR(st.st_mode)) {
    return InvalidArgument(fmt::format("{}: is a directory", path));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<OfflineParser> parser,
                   OfflineParser::Create(format, path, spec, group, on_row, on_error));
  std::vector<char> buf(kChunkBytes);
  if (EndsWithNoCase(path, ".gz")) {
    // zlib reads the already opened descriptor (a dup: gzclose closes its own).
    const int fd = dup(fileno(file.get()));
    std::unique_ptr<gzFile_s, GzCloser> gz(fd < 0 ? nullptr : gzdopen(fd, "rb"));
    if (gz == nullptr) {
      if (fd >= 0) close(fd);
      return InvalidArgument(
          fmt::format("{}: cannot open for gzip: {}", path, std::strerror(errno)));
    }
    gzbuffer(gz.get(), kChunkBytes);
    while (!parser->stopped()) {
      const int n = gzread(gz.get(), buf.data(), static_cast<unsigned>(buf.size()));
      if (n < 0) {
        int code = 0;
        const char* why = gzerror(gz.get(), &code);
        return InvalidArgument(fmt::format("{}: not a valid gzip file: {}", path, why));
      }
      if (gzdirect(gz.get())) {  // zlib would pass anything that is not gzip through as is
        return InvalidArgument(fmt::format("{}: named .gz but not gzip data", path));
      }
      if (n > 0) RETURN_IF_ERROR(parser->Feed(std::string_view(buf.data(), n)));
      if (static_cast<size_t>(n) < buf.size()) {
        // gzread stops short at the end of the data, or at a stream cut off before its end.
        int code = 0;
        const char* why = gzerror(gz.get(), &code);
        if (code != Z_OK) {
          return InvalidArgument(fmt::format("{}: not a valid gzip file: {}", path, why));
        }
        if (gzeof(gz.get())) break;
      }
    }
  } else {
    while (!parser->stopped()) {
      const size_t n = std::fread(buf.data(), 1, buf.size(), file.get());
      if (n > 0) RETURN_IF_ERROR(parser->Feed(std::string_view(buf.data(), n)));
      if (n < buf.size()) {
        if (std::ferror(file.get())) {
          return Unavailable(fmt::format("{}: read error: {}", path, std::strerror(errno)));
        }
        break;
      }
    }
  }
  RETURN_IF_ERROR(parser->Finish());
  return parser->stats();
}

StatusOr<int64_t> ParseTimestampUs(std::string_view text) {
  const std::string_view t = Trim(text);
  if (t.empty()) return InvalidArgument("the timestamp is empty");
  if (t.size() >= 10 && t[4] == '-' && t[7] == '-') {
    int64_t us;
    if (ParseIsoUs(t, &us)) return us;
  } else {
    Scalar v;
    if (ParseNumber(t, &v)) return NumberToUs(v);
  }
  return InvalidArgument(fmt::format(
      "{} is not a timestamp (ISO-8601 UTC, or epoch seconds, milliseconds or microseconds)",
      Quote(t)));
}

}  // namespace dais::features
