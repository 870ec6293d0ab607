#include "features/store/offline_import.h"

#include <chrono>

#include "common/logging.h"
#include "common/mutex.h"
#include "features/offline/offline_files.h"
#include "fmt/format.h"

namespace dais::features {

namespace {

// Tracks the batches in flight and their results.
class Window {
 public:
  explicit Window(int size) : size_(size) {}
  // CondVar waits: the analysis cannot tie cv_ to mu_ (CondVar holds a Mutex*).
  void Acquire() DAIS_NO_THREAD_SAFETY_ANALYSIS {
    MutexLock l(&mu_);
    while (in_flight_ >= size_) cv_.Wait();
    ++in_flight_;
  }
  void Release(int64_t written, int64_t older, int64_t errors, const std::string& error) {
    MutexLock l(&mu_);
    --in_flight_;
    written_ += written;
    older_ += older;
    errors_ += errors;
    if (first_error_.empty()) first_error_ = error;
    cv_.SignalAll();
  }
  void Drain() DAIS_NO_THREAD_SAFETY_ANALYSIS {
    MutexLock l(&mu_);
    while (in_flight_ > 0) cv_.Wait();
  }
  void Fill(ImportProgress* p) {
    MutexLock l(&mu_);
    p->written = written_;
    p->skipped_older = older_;
    p->errors = errors_;
    if (p->first_error.empty()) p->first_error = first_error_;
  }

 private:
  const int size_;
  Mutex mu_;
  CondVar cv_{&mu_};
  int in_flight_ DAIS_GUARDED_BY(mu_) = 0;
  int64_t written_ DAIS_GUARDED_BY(mu_) = 0, older_ DAIS_GUARDED_BY(mu_) = 0,
                   errors_ DAIS_GUARDED_BY(mu_) = 0;
  std::string first_error_ DAIS_GUARDED_BY(mu_);
};

}  // namespace

StatusOr<ImportProgress> ImportPartition(OnlineTier* tier, const FeatureSpec& spec,
                                         size_t group_index, const std::string& root,
                                         const std::string& date_in, const ImportOptions& options) {
  const GroupSpec& group = spec.groups[group_index];
  std::string date = date_in;
  if (date.empty()) {
    ASSIGN_OR_RETURN(auto dates, ListPartitions(root, group.name));
    if (dates.empty()) {
      return NotFound(fmt::format("{}/{} has no dt=YYYY-MM-DD partition", root, group.name));
    }
    date = dates.back();
  }
  ASSIGN_OR_RETURN(auto files, PartitionFiles(root, group.name, date));
  ImportProgress p;
  p.group = group.name;
  p.date = date;
  auto start = std::chrono::steady_clock::now();
  auto last_report = start;
  Window window(std::max(1, options.window));
  std::vector<TierWrite> batch;
  bool stopped = false;
  int64_t sent = 0;
  auto report = [&](bool final) {
    auto now = std::chrono::steady_clock::now();
    if (!final && now - last_report < std::chrono::seconds(1)) return;
    last_report = now;
    window.Fill(&p);
    p.seconds = std::chrono::duration<double>(now - start).count();
    if (options.progress) options.progress(p);
  };
  auto flush = [&]() {
    if (batch.empty()) return;
    if (options.before_batch && !options.before_batch(sent)) {
      stopped = true;
      batch.clear();
      return;
    }
    sent += static_cast<int64_t>(batch.size());
    window.Acquire();
    tier->Write(std::move(batch), std::chrono::steady_clock::now() + std::chrono::seconds(30),
                [&window](std::vector<StatusOr<bool>> results) {
                  int64_t w = 0, o = 0, e = 0;
                  std::string err;
                  for (const auto& r : results) {
                    if (!r.ok()) {
                      ++e;
                      if (err.empty()) err = r.status().message();
                    } else {
                      (*r ? w : o)++;
                    }
                  }
                  window.Release(w, o, e, err);
                });
    batch = {};
    report(false);
  };
  for (const auto& file : files) {
    if (stopped) break;
    ++p.files;
    auto stats = ReadOfflineFile(
        file, spec, group,
        [&](OfflineRow&& row) {
          if (options.only && !options.only->count(row.entity_id)) return true;
          ++p.rows;
          TierWrite w;
          w.key = RecordKey(spec, group, row.entity_id);
          w.group = &group;
          w.event_time_us = row.event_time_us;
          w.payload = std::move(row.payload);
          batch.push_back(std::move(w));
          if (batch.size() >= options.batch_rows) flush();
          return !stopped;
        },
        [&](int64_t line, const Status& s) {
          ++p.bad_rows;
          if (p.bad_rows <= 10) LOG_WARNING("{}", s.message());  // names file and line
        });
    if (!stats.ok()) {
      window.Drain();
      return stats.status();
    }
  }
  flush();
  window.Drain();
  report(true);
  return p;
}

}  // namespace dais::features
