// `dais archive`: a consumer-group reader of a stream (the feedback stream, txn's event streams)
// that writes its entries to day-partitioned files in the offline store's layout
// (features/offline/offline_files.h), exactly once across crashes (issue 33, part 1):
//
//   <root>/<dataset>/dt=YYYY-MM-DD/part-<consumer>-<seq>.jsonl.gz
//
// One JSON object per line: "entry_id" (the stream's id), "stream", and the entry's fields — a
// field whose value is a JSON object or array (the feedback stream's `record`, txn's `payload`)
// is embedded as JSON, any other as a string. An entry's day is its stream id's time (UTC).
//
// Exactly once. A flush writes each day's entries to a temporary name (".tmp"), fsyncs it,
// renames it into place, fsyncs the directory, and only then acknowledges the entries (XACK),
// retrying the XACK until it succeeds before reading more. So at any moment at most one flush
// of a consumer (its newest `seq`) can hold entries that are still pending in the group. A
// restart removes the consumer's temporary files (half-written parts), reads the ids of the
// newest flush of every consumer, and acknowledges without writing any pending or claimed entry
// it finds there; the rest are archived again. Several archivers share a stream through the
// group; a dead one's entries are claimed (XAUTOCLAIM) after `claim_idle_ms`.
//
// Metrics (docs/metrics.md), labelled by stream and dataset: dais_archive_records_total,
// dais_archive_duplicate_records_total, dais_archive_files_total, dais_archive_bytes_total,
// dais_archive_lag_seconds (how old the oldest entry read and not yet in a file is, by its
// stream id's time), dais_archive_flush_duration_seconds; `dais archive` adds
// dais_archive_lag_entries (the group's XINFO lag). Compaction: archive_compact.h.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "dais/status.h"
#include "streams/event_stream.h"

namespace dais {
class Deflater;
}

namespace dais::streams {

struct ArchiverOptions {
  std::string stream;
  std::string group = "archive";
  std::string consumer;  // stable across restarts (its pending entries are found by it)
  std::string root;      // the offline store's root
  std::string dataset;   // <root>/<dataset>/dt=...
  // A flush when this many entries are buffered, this many bytes, or the oldest has waited this
  // long (rotation by size and age: every flush is one file per day it holds).
  size_t max_records = 50000;
  size_t max_bytes = 64 << 20;
  int max_age_ms = 10000;
  int claim_idle_ms = 30000;
  int read_count = 1000;
  // Return from Run once nothing new arrives and nothing is pending (batch use, tests).
  bool drain = false;
};

struct ArchiverStats {
  uint64_t records = 0;     // written to committed parts
  uint64_t duplicates = 0;  // pending/claimed entries found in a committed part: acknowledged only
  uint64_t files = 0;
  uint64_t bytes = 0;  // compressed, written
};

class Archiver {
 public:
  Archiver(EventStream* stream, ArchiverOptions options);
  ~Archiver();
  // Creates the group, cleans this consumer's temporary files, loads the dedup ids.
  Status Start();
  // Reads, buffers and flushes until Stop (or, with `drain`, until drained). Errors of Redis are
  // retried (logged); an error writing files is returned (nothing acknowledged).
  Status Run();
  void Stop() { stopping_ = true; }
  const ArchiverStats& stats() const { return stats_; }

 private:
  // Adds entries not already committed; acknowledges those that are.
  // `redelivered`: pending or claimed entries, which may be committed or buffered already.
  Status Take(std::vector<Entry> entries, bool redelivered);
  Status Flush();
  // The part that the entry's day goes to (made on first use).
  Deflater* DayPart(const std::string& entry_id);
  Status AckAll(const std::vector<std::string>& ids);
  // Reads the ids of the newest flush of this consumer (`mine`: also removes its temporary
  // files and sets next_seq_) or of every other consumer, into committed_ / others_.
  Status ScanNewest(bool mine);
  std::string DatasetDir() const;
  int ReadCount() const;

  EventStream* stream_;
  const ArchiverOptions options_;
  std::atomic<bool> stopping_{false};
  uint64_t next_seq_ = 1;
  // Ids in this consumer's newest flush: committed_, plus committed_ids_ not yet moved into it.
  std::unordered_set<std::string> committed_;
  std::vector<std::string> committed_ids_;
  std::unordered_set<std::string> others_;        // ids in the other consumers' newest flushes
  std::vector<std::string> buffer_;               // ids taken since the last flush, in order
  std::unordered_set<std::string> buffered_ids_;  // of buffer_, when a redelivery needs them
  // The next flush's part of each day (its entries' JSON lines, compressed as they come), and
  // the one the last entry went to.
  std::map<std::string, std::unique_ptr<Deflater>> parts_;
  int64_t current_day_ = -1;  // days since the epoch
  Deflater* current_part_ = nullptr;
  std::string line_;  // scratch
  size_t buffer_bytes_ = 0;
  int64_t oldest_ms_ = 0;     // steady ms when the buffer's first entry came
  int64_t oldest_id_ms_ = 0;  // the stream time of the buffer's first entry (its id)
  ArchiverStats stats_;
  struct Metrics;
  std::unique_ptr<Metrics> metrics_;
};

// The UTC day ("YYYY-MM-DD") of a stream entry id ("<ms>-<seq>"); empty when it is not one.
std::string DayOfEntryId(const std::string& entry_id);
// The JSON line of an entry (see the file comment).
std::string ArchiveLine(const std::string& stream, const Entry& entry);

}  // namespace dais::streams
