// Offline feature files: reading what a batch job (Spark, pandas) wrote for a feature group, so
// that it can be loaded into the online store. A pure library: files on a local (or mounted)
// file system, no network.
//
// LAYOUT
//   <root>/<group>/dt=YYYY-MM-DD/<name>.csv      CSV with a header line
//   <root>/<group>/dt=YYYY-MM-DD/<name>.jsonl    JSON lines (".json" is read as JSON lines too)
//   either gzip-compressed, with ".gz" appended (what Spark writes with compression "gzip" and
//   pandas with compression="gzip"): decompressed while streaming.
// <group> is the feature group's name; one dt= directory per UTC day (Hive-style partitioning,
// what Spark's df.write.partitionBy("dt") writes). In a partition, files whose name starts with
// '_' or '.' are ignored (Spark's _SUCCESS, .crc files), and so are files with other extensions;
// data files in other compressions (.csv.bz2, .json.snappy, .zst, ...) are an error rather than
// silently skipped.
// Directories under <group> that are not dt=<valid date> are ignored.
//
// COLUMNS (CSV header names, JSON keys; any order, other columns/keys are ignored)
//   <entity>          the group's entity name, e.g. user_id
//   event_timestamp   when the values were true (see TIMESTAMPS)
//   <feature>         one per feature of the group, named as in features.yaml
//
// CSV (RFC 4180; what pandas to_csv(index=False) and Spark .csv(header=True) write)
//   - The first line is the header; in CSV a missing entity, event_timestamp or feature column
//     is an error for the whole file, naming the column. A UTF-8 byte order mark is skipped.
//   - Fields separated by ',', records by LF or CRLF; a field may be quoted with '"' and then
//     holds commas, line breaks and doubled quotes ("" for one "). Blank lines are skipped.
//     Every record must have as many fields as the header.
//   - Scalar feature: a number ("3", "-1.5", "1e-3", "nan", "inf"). BOOL: 0, 1, true, false
//     (any case, so pandas' True/False). Integer types accept integral reals ("3.0").
//   - List feature (shape with more than one element): a JSON array, "[0.1, 0.2]", as pandas
//     writes a column of lists. Nested arrays are flattened (shape [2,2]: [[1,2],[3,4]]);
//     commas are optional, so numpy's "[0.1 0.2]" also reads. The element count must match
//     the shape. A one-element feature accepts both "5" and "[5]".
//   - An empty field is the feature's default (pandas writes NaN/None as an empty field).
//   - Entity id: the text, canonicalised by CanonicalEntityId. For an int64 entity, "42.0" is
//     accepted as 42 when |42| <= 2^53 (pandas writes an int column holding NaN as floats).
// JSON LINES (what pandas to_json(orient="records", lines=True) and Spark .json() write)
//   - One JSON object per line; blank lines are skipped.
//   - Feature values: numbers, true/false (1/0), arrays (flattened, as above), null = default,
//     and a string is read as the CSV field would be. A missing feature key is the default too
//     (Spark omits null fields); a missing entity or event_timestamp key is a bad row.
//   - Entity id: a string, or an integer number (an int64 entity also takes an integral real
//     within 2^53).
// TIMESTAMPS (event_timestamp; the result is unix microseconds)
//   - ISO-8601: "2026-11-29T10:00:00Z", "2026-11-29 10:00:00", "2026-11-29T10:00" or a bare
//     date "2026-11-29" (midnight; pandas drops an all-midnight time), optional fractional
//     seconds (digits past microseconds are truncated), optional offset "Z", "+00:00",
//     "+0100", "-05"; without an offset the time is UTC.
//   - A number (JSON number or numeric text): epoch seconds if |v| < 1e11, milliseconds if
//     |v| < 1e14, microseconds if |v| < 1e17, otherwise nanoseconds (pandas to_json writes
//     milliseconds; an int64 cast of a pandas datetime is nanoseconds). Fractions are kept to
//     the microsecond.
//
// ERRORS
//   A file that cannot be opened, an unknown extension or a bad CSV header fails the whole file
//   (NotFound when it does not exist, InvalidArgument otherwise; Unavailable for a read error
//   part way). A row that does not parse is a bad row: reported through on_error with its line
//   number (1-based; the header is line 1; a CSV record spanning lines reports its first line),
//   counted in ReadStats::bad_rows, and skipped; reading continues. A record longer than
//   kMaxOfflineRecordBytes is a bad row (memory stays bounded). Messages name the file, the line
//   and the column or feature: "part-0.csv:17: feature clicks: expected 4 values, got 3".
//
// Thread-safety: the functions are reentrant; an OfflineParser is used by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dais/status.h"
#include "features/spec/feature_spec.h"

namespace dais::features {

// One row of a group: the entity, when, and the group's features packed in GroupSpec order
// (each FeatureDef's byte_size, little-endian, as AppendElement writes), record_bytes in all.
struct OfflineRow {
  std::string entity_id;  // canonical (CanonicalEntityId)
  int64_t event_time_us = 0;
  std::string payload;
};

struct ReadStats {
  int64_t rows = 0;      // rows delivered to on_row
  int64_t bad_rows = 0;  // rows reported to on_error and skipped
  int64_t bytes = 0;     // bytes consumed from the input
};

// Called for each good row; return false to stop reading.
using OfflineRowFn = std::function<bool(OfflineRow&&)>;
// Called for each bad row with its line number and an InvalidArgument naming file and line.
using OfflineErrorFn = std::function<void(int64_t line, const Status&)>;

inline constexpr size_t kMaxOfflineRecordBytes = 16 << 20;

// The dates (YYYY-MM-DD) that have a <root>/<group>/dt=<date> directory, ascending.
// NotFound if <root>/<group> is not a directory.
StatusOr<std::vector<std::string>> ListPartitions(const std::string& root,
                                                  const std::string& group);

// The data files (.csv, .jsonl, .json, each also with .gz) of one partition, full paths sorted
// by name; empty when the partition holds none. NotFound if the partition does not exist;
// InvalidArgument for a malformed date or a data file in another compression.
StatusOr<std::vector<std::string>> PartitionFiles(const std::string& root, const std::string& group,
                                                  const std::string& date);

// Streams one file (format by extension; ".gz" decompressed on the way, a damaged or truncated
// gzip stream is an error naming the file) in fixed-size chunks, never holding more than one
// record and one chunk: on_row for each good row, on_error for each bad one (see ERRORS). Stops
// early, returning the stats so far, when on_row returns false. `group` must belong to `spec`;
// on_error may be empty (bad rows are then only counted).
StatusOr<ReadStats> ReadOfflineFile(const std::string& path, const FeatureSpec& spec,
                                    const GroupSpec& group, const OfflineRowFn& on_row,
                                    const OfflineErrorFn& on_error);

enum class OfflineFormat { kCsv, kJsonLines };

// By extension, after a ".gz": .csv; .jsonl or .json. InvalidArgument naming the file otherwise.
StatusOr<OfflineFormat> OfflineFormatOf(std::string_view path);

// The parser behind ReadOfflineFile, fed from memory in pieces of any size (a record may span
// pieces). Used directly by tests and the fuzzer, and by readers of other byte sources.
class OfflineParser {
 public:
  // `name` is the file name used in messages. `spec`, `group` and the callbacks must outlive
  // the parser. InvalidArgument if the group's entity is not in the spec.
  static StatusOr<std::unique_ptr<OfflineParser>> Create(
      OfflineFormat format, std::string name, const FeatureSpec& spec, const GroupSpec& group,
      OfflineRowFn on_row, OfflineErrorFn on_error,
      size_t max_record_bytes = kMaxOfflineRecordBytes);
  virtual ~OfflineParser() = default;

  // Consumes the next bytes. A non-OK status (bad CSV header) fails the file: later calls return
  // it again. After on_row returned false, further input is ignored.
  virtual Status Feed(std::string_view data) = 0;
  // Ends the input: the last record may lack its line break.
  virtual Status Finish() = 0;
  // True once on_row returned false.
  virtual bool stopped() const = 0;
  virtual const ReadStats& stats() const = 0;
};

// The UTC calendar date of a unix time, "YYYY-MM-DD" (today: UtcDate(now), yesterday:
// UtcDate(now - 86400)).
std::string UtcDate(int64_t unix_seconds);

// An event_timestamp (see TIMESTAMPS) in unix microseconds. InvalidArgument naming the text.
StatusOr<int64_t> ParseTimestampUs(std::string_view text);

}  // namespace dais::features
