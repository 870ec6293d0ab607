// `dais archive compact`: merges an archive's small parts (archiver.h) into fewer, larger files,
// so that a dataset's day holds a bounded number of files however often the archivers flush.
//
// In each dt= directory of <root>/<dataset>, every part "part-<consumer>-<seq>.jsonl.gz" except
// each consumer's newest flush (the parts of its highest seq, over all days: a restarted archiver
// reads their ids to skip what it already wrote, so they stay as they are) is merged, together
// with earlier "compacted-*.jsonl.gz" files smaller than the target, into files
// "compacted-<ms>-<n>.jsonl.gz" of about `target_bytes` (compressed). Lines are copied as they
// are (the entry ids stay).
//
// Crash safety, per day: an intent file ".compact-intent" lists the sources and the targets and
// is fsynced before anything else; the targets are written under temporary names, fsynced and
// renamed; then the sources are removed and the intent last. A compaction that finds an intent
// (the previous one died) finishes it when every target is in place (removes the sources) and
// otherwise undoes it (removes the targets and temporary files): no line is lost or doubled once
// it has run. Readers that list a day while a compaction is between its renames and its removals
// can see a line twice; they dedup by entry_id (the trainer does). One compaction at a time per
// dataset (an exclusive flock on <root>/<dataset>/.compact.lock; a second one fails at once).
#pragma once

#include <cstdint>
#include <string>

#include "dais/status.h"

namespace dais::streams {

struct CompactOptions {
  std::string root;
  std::string dataset;
  uint64_t target_bytes = 128ull << 20;  // compressed size of a compacted file
  // Only days with at least this many compactable files (a day already compact is left alone).
  int min_files = 2;
};

struct CompactStats {
  uint64_t days = 0;          // days compacted
  uint64_t files_before = 0;  // sources merged
  uint64_t files_after = 0;   // files written
  uint64_t bytes_before = 0;
  uint64_t bytes_after = 0;
  uint64_t recovered = 0;  // intents of an earlier, interrupted compaction finished or undone
};

StatusOr<CompactStats> CompactArchive(const CompactOptions& options);

}  // namespace dais::streams
