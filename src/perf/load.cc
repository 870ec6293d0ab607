#include "perf/load.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "common/mutex.h"
#include "perf/report.h"

namespace dais::perf {
namespace {

using Clock = std::chrono::steady_clock;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

Clock::time_point TimePoint(int64_t ns) {
  return Clock::time_point(
      std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(ns)));
}

constexpr int64_t kProgressNs = 500'000'000;  // progress line period
constexpr int64_t kLateNs = 1'000'000;        // rate mode: "delayed" beyond this
constexpr auto kErrorBackoff = std::chrono::milliseconds(1);

struct Record {
  int64_t end_ns;
  int64_t latency_ns;
  bool ok;
  bool delayed;
};

// Records of one load thread, collected by the coordinator.
struct RecordBuffer {
  Mutex mu;
  std::vector<Record> records DAIS_GUARDED_BY(mu);
};

// Send times of the request-rate mode, shared by the load threads.
class Schedule {
 public:
  Schedule(double rate, bool poisson, uint64_t seed, int64_t start_ns)
      : gap_ns_(1e9 / rate),
        poisson_(poisson),
        exponential_(rate),
        rng_(seed),
        next_ns_(start_ns) {}

  // The next send time (steady clock ns). Thread-safe.
  int64_t Next() {
    MutexLock lock(&mu_);
    const double t = next_ns_;
    next_ns_ += poisson_ ? exponential_(rng_) * 1e9 : gap_ns_;
    return static_cast<int64_t>(t);
  }

 private:
  const double gap_ns_;
  const bool poisson_;
  Mutex mu_;
  std::exponential_distribution<double> exponential_ DAIS_GUARDED_BY(mu_);
  std::mt19937_64 rng_ DAIS_GUARDED_BY(mu_);
  double next_ns_ DAIS_GUARDED_BY(mu_);
};

struct Window {
  int64_t start_ns = 0, end_ns = 0;
  int64_t successes = 0, errors = 0, delayed = 0;
  std::vector<int64_t> latencies_ns;

  void Add(const Record& r) {
    if (r.ok) {
      ++successes;
      latencies_ns.push_back(r.latency_ns);
    } else {
      ++errors;
    }
    if (r.delayed) ++delayed;
  }
};

}  // namespace

struct LoadRunner::Impl {
  LoadOptions o;
  SessionFactory make_session;
  StatsSource stats;
  std::vector<std::unique_ptr<InferSession>> sessions;  // index = load thread

  mutable Mutex error_mu;
  Status first_error DAIS_GUARDED_BY(error_mu);
  bool error_printed = false;   // coordinator only
  bool progress_shown = false;  // coordinator only

  // Per level.
  std::vector<std::unique_ptr<RecordBuffer>> buffers;
  std::vector<Record> carry;  // collected records that belong to a later window
  std::atomic<bool> stopping{false};
  Mutex stop_mu;
  CondVar stop_cv{&stop_mu};
  bool stop DAIS_GUARDED_BY(stop_mu) = false;
  std::vector<bool> finished DAIS_GUARDED_BY(stop_mu);

  void NoteError(const Status& s) {
    if (stopping.load(std::memory_order_relaxed)) return;
    MutexLock lock(&error_mu);
    if (first_error.ok()) first_error = s;
  }

  // Waits until `until` unless stopping. Returns false when stopping.
  // (No analysis: CondVar's DAIS_REQUIRES names its own pointer to stop_mu.)
  bool SleepUnlessStopped(Clock::time_point until) DAIS_NO_THREAD_SAFETY_ANALYSIS {
    MutexLock lock(&stop_mu);
    while (!stop && Clock::now() < until) stop_cv.WaitUntil(until);
    return !stop;
  }

  void Finish(size_t index) {
    MutexLock lock(&stop_mu);
    finished[index] = true;
    stop_cv.SignalAll();
  }

  void ConcurrencyLoop(size_t index, int slots) {
    InferSession* session = sessions[index].get();
    RecordBuffer* buffer = buffers[index].get();
    if (slots > 1) return MultiSlotLoop(index, slots);
    while (!stopping.load(std::memory_order_relaxed)) {
      const int64_t start = NowNs();
      Status s = session->Infer();
      const int64_t end = NowNs();
      {
        MutexLock lock(&buffer->mu);
        buffer->records.push_back(Record{end, end - start, s.ok(), false});
      }
      if (!s.ok()) {
        NoteError(s);
        // Do not spin on a refused connection.
        if (!SleepUnlessStopped(Clock::now() + kErrorBackoff)) break;
      }
    }
    Finish(index);
  }

  // One session keeping `slots` requests in flight on its connection.
  void MultiSlotLoop(size_t index, int slots) {
    InferSession* session = sessions[index].get();
    RecordBuffer* buffer = buffers[index].get();
    auto stop = [this] { return stopping.load(std::memory_order_relaxed); };
    auto done = [this, buffer](int64_t start, int64_t end, const Status& s) {
      {
        MutexLock lock(&buffer->mu);
        buffer->records.push_back(Record{end, end - start, s.ok(), false});
      }
      if (!s.ok()) NoteError(s);
    };
    while (!stop()) {
      Status s = session->RunSlots(slots, stop, done);
      if (!s.ok()) {
        NoteError(s);
        if (!SleepUnlessStopped(Clock::now() + kErrorBackoff)) break;
      }
    }
    Finish(index);
  }

  void RateLoop(size_t index, Schedule* schedule) {
    InferSession* session = sessions[index].get();
    RecordBuffer* buffer = buffers[index].get();
    while (true) {
      const int64_t due = schedule->Next();
      if (!SleepUnlessStopped(TimePoint(due))) break;
      const int64_t start = NowNs();
      Status s = session->Infer();
      const int64_t end = NowNs();
      {
        MutexLock lock(&buffer->mu);
        buffer->records.push_back(Record{end, end - start, s.ok(), start - due > kLateNs});
      }
      if (!s.ok()) NoteError(s);
    }
    Finish(index);
  }

  // Moves every collected record ending before `end_ns` into `w` (if given; else drops it) and
  // keeps the later ones for the next window.
  void Collect(int64_t end_ns, Window* w) {
    std::vector<Record> incoming;
    incoming.swap(carry);
    for (auto& b : buffers) {
      MutexLock lock(&b->mu);
      incoming.insert(incoming.end(), b->records.begin(), b->records.end());
      b->records.clear();
    }
    for (const Record& r : incoming) {
      if (r.end_ns >= end_ns) {
        carry.push_back(r);
      } else if (w != nullptr) {
        w->Add(r);
      }
    }
  }

  void ClearProgress() {
    if (progress_shown) {
      std::fputs("\r\033[K", stderr);
      std::fflush(stderr);
      progress_shown = false;
    }
  }

  void ShowProgress(const std::string& line) {
    if (!o.progress) return;
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    std::fflush(stderr);
    progress_shown = true;
  }

  void PrintFirstErrorOnce() {
    if (error_printed) return;
    Status e;
    {
      MutexLock lock(&error_mu);
      e = first_error;
    }
    if (e.ok()) return;
    ClearProgress();
    std::fprintf(stderr, "first error: %s\n", e.message().c_str());
    std::fflush(stderr);
    error_printed = true;
  }

  void ProgressTick(const Level& level, int window, const Window& w, int64_t now) {
    PrintFirstErrorOnce();
    if (!o.progress) return;
    const double secs = static_cast<double>(std::max<int64_t>(now - w.start_ns, 1)) / 1e9;
    const double rate = static_cast<double>(w.successes * o.batch_size) / secs;
    std::vector<int64_t> lat = w.latencies_ns;
    double p99_us = 0;
    if (!lat.empty()) {
      std::sort(lat.begin(), lat.end());
      p99_us = static_cast<double>(Percentile(lat, 99)) / 1000.0;
    }
    ShowProgress(ProgressLine(level, window, rate, p99_us));
  }

  // The requests each worker thread keeps in flight (one thread per slot, or fewer connections
  // each carrying several), with a session per thread.
  StatusOr<std::vector<int>> PrepareSessions(const Level& level) {
    size_t threads = level.concurrency > 0 ? static_cast<size_t>(level.concurrency)
                                           : static_cast<size_t>(o.max_threads);
    std::vector<int> slots(threads, 1);
    if (level.concurrency > 0 && o.connections > 0 && o.connections < level.concurrency) {
      threads = static_cast<size_t>(o.connections);
      slots.assign(threads, static_cast<int>(level.concurrency / o.connections));
      for (int64_t i = 0; i < level.concurrency % o.connections; ++i) ++slots[i];
    }
    if (sessions.size() < threads) sessions.resize(threads);
    for (size_t i = 0; i < threads; ++i) {
      if (!sessions[i]) {
        ASSIGN_OR_RETURN(sessions[i], make_session(static_cast<int>(i)));
      }
      if (sessions[i]->MaxInFlight() < slots[i]) {
        return InvalidArgument(
            "fewer connections than in-flight requests needs a protocol that carries several "
            "requests at once on a connection (gRPC)");
      }
    }
    return slots;
  }

  // The measurement of a level from its last (up to) three windows and the server statistics
  // around them.
  LevelMeasurement Summarize(const Level& level, std::vector<Window>& windows,
                             const std::vector<double>& throughputs, bool stable,
                             const std::vector<std::optional<ServerStats>>& snapshots) {
    LevelMeasurement m;
    m.level = level;
    m.windows = static_cast<int>(windows.size());
    m.stable = stable;
    m.window_throughputs = throughputs;
    const size_t used = std::min<size_t>(3, windows.size());
    for (size_t i = windows.size() - used; i < windows.size(); ++i) {
      Window& w = windows[i];
      m.seconds += static_cast<double>(w.end_ns - w.start_ns) / 1e9;
      m.successes += w.successes;
      m.errors += w.errors;
      m.delayed += w.delayed;
      m.latencies_ns.insert(m.latencies_ns.end(), w.latencies_ns.begin(), w.latencies_ns.end());
    }
    const auto& before = snapshots[snapshots.size() - 1 - used];
    const auto& after = snapshots.back();
    if (before && after) m.server = Delta(*before, *after);
    return m;
  }

  StatusOr<LevelMeasurement> Run(const Level& level) {
    ASSIGN_OR_RETURN(std::vector<int> slots, PrepareSessions(level));
    const size_t threads = slots.size();
    buffers.clear();
    for (size_t i = 0; i < threads; ++i) buffers.push_back(std::make_unique<RecordBuffer>());
    carry.clear();
    stopping.store(false);
    {
      MutexLock lock(&stop_mu);
      stop = false;
      finished.assign(threads, false);
    }

    std::unique_ptr<Schedule> schedule;
    if (level.rate > 0) {
      schedule = std::make_unique<Schedule>(level.rate, o.poisson, o.seed, NowNs());
    }
    std::vector<std::thread> workers;
    workers.reserve(threads);
    for (size_t i = 0; i < threads; ++i) {
      if (schedule) {
        workers.emplace_back([this, i, s = schedule.get()] { RateLoop(i, s); });
      } else {
        workers.emplace_back([this, i, n = slots[i]] { ConcurrencyLoop(i, n); });
      }
    }

    // Warm-up: results dropped.
    const int64_t warm_end = NowNs() + static_cast<int64_t>(o.warmup_secs * 1e9);
    for (int64_t now = NowNs(); now < warm_end; now = NowNs()) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(std::min(kProgressNs, warm_end - now)));
      PrintFirstErrorOnce();
      ShowProgress(ProgressLine(level, 0, 0, 0));
    }

    std::vector<std::optional<ServerStats>> snapshots;  // [i]: at the start of window i
    snapshots.push_back(stats());
    int64_t window_start = NowNs();
    Collect(window_start, nullptr);
    const int64_t interval_ns = o.measurement_interval_ms * 1'000'000;
    std::vector<Window> windows;
    std::vector<double> throughputs;
    bool stable = false;
    for (int trial = 1; trial <= o.max_trials; ++trial) {
      Window w;
      w.start_ns = window_start;
      w.end_ns = window_start + interval_ns;
      for (int64_t now = NowNs(); now < w.end_ns; now = NowNs()) {
        std::this_thread::sleep_for(
            std::chrono::nanoseconds(std::min(kProgressNs, w.end_ns - now)));
        now = NowNs();
        Collect(std::min(now, w.end_ns), &w);
        ProgressTick(level, trial, w, std::min(now, w.end_ns));
      }
      Collect(w.end_ns, &w);
      snapshots.push_back(stats());
      throughputs.push_back(static_cast<double>(w.successes * o.batch_size) /
                            (static_cast<double>(interval_ns) / 1e9));
      windows.push_back(std::move(w));
      if (IsStable(throughputs, o.stability_percentage)) {
        stable = true;
        break;
      }
      window_start += interval_ns;
    }

    StopWorkers(&workers);
    ClearProgress();
    PrintFirstErrorOnce();

    return Summarize(level, windows, throughputs, stable, snapshots);
  }

  void StopWorkers(std::vector<std::thread>* workers) DAIS_NO_THREAD_SAFETY_ANALYSIS {
    stopping.store(true);
    std::vector<size_t> stuck;
    {
      MutexLock lock(&stop_mu);
      stop = true;
      stop_cv.SignalAll();
      const auto deadline = Clock::now() + std::chrono::milliseconds(o.stop_grace_ms);
      while (std::find(finished.begin(), finished.end(), false) != finished.end() &&
             stop_cv.WaitUntil(deadline)) {
      }
      for (size_t i = 0; i < finished.size(); ++i) {
        if (!finished[i]) stuck.push_back(i);
      }
    }
    for (size_t i : stuck) sessions[i]->Abort();
    for (std::thread& t : *workers) t.join();
    for (size_t i : stuck) sessions[i].reset();  // aborted sessions are finished: make new ones
  }
};

LoadRunner::LoadRunner(LoadOptions options, SessionFactory sessions, StatsSource stats)
    : impl_(std::make_unique<Impl>()) {
  impl_->o = options;
  impl_->make_session = std::move(sessions);
  impl_->stats = std::move(stats);
}

LoadRunner::~LoadRunner() = default;

StatusOr<LevelMeasurement> LoadRunner::Run(const Level& level) { return impl_->Run(level); }

Status LoadRunner::first_error() const {
  MutexLock lock(&impl_->error_mu);
  return impl_->first_error;
}

}  // namespace dais::perf
