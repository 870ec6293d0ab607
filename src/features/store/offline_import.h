// Streams offline feature files (offline_files.h) into an online tier: `dais features import`,
// `dais features prewarm`, and standalone `dais serve --feature-offline-root`.
// Memory is bounded: rows are parsed file by file and written in batches, with at most
// `window` batches in flight (the Redis tier pipelines each batch).
#pragma once

#include <functional>
#include <string>
#include <unordered_set>

#include "features/store/online_tier.h"

namespace dais::features {

struct ImportOptions {
  size_t batch_rows = 512;
  int window = 8;  // batches in flight
  // Only these entity ids (canonical) when set (pre-warm of the top entities).
  const std::unordered_set<std::string>* only = nullptr;
  // Called before each batch is sent, with the rows sent so far: may sleep to pace the import
  // (pre-warm's memory-based rate control). Returns false to stop.
  std::function<bool(int64_t rows_sent)> before_batch;
  // Called about once a second and at the end.
  std::function<void(const struct ImportProgress&)> progress;
};

struct ImportProgress {
  std::string group, date;
  int64_t files = 0, rows = 0, written = 0, skipped_older = 0, bad_rows = 0, errors = 0;
  double seconds = 0;
  std::string first_error;
};

// Imports one day's partition of `group` (date "" = the latest). NotFound when there is none.
StatusOr<ImportProgress> ImportPartition(OnlineTier* tier, const FeatureSpec& spec, size_t group,
                                         const std::string& root, const std::string& date,
                                         const ImportOptions& options);

}  // namespace dais::features
