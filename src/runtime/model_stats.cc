#include "runtime/model_stats.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <chrono>
#include <cmath>
#include <cstring>

namespace dais::runtime {
namespace {

std::vector<double> ScoreBuckets() {
  std::vector<double> b;
  for (int i = 1; i <= 10; ++i) b.push_back(i / 10.0);
  return b;
}

// The per-version series (docs/metrics.md), each family declared once: the constructor takes
// its children from here and RemoveMetrics drops them from the same list.
struct VersionFamilies {
  metrics::Family<metrics::Counter>& success;
  metrics::Family<metrics::Counter>& inferences;
  metrics::Family<metrics::Counter>& executions;
  metrics::Family<metrics::Counter>& failures;  // + reason
  metrics::Family<metrics::Histogram>& request;
  metrics::Family<metrics::Histogram>& queue;
  metrics::Family<metrics::Histogram>& input;
  metrics::Family<metrics::Histogram>& infer;
  metrics::Family<metrics::Histogram>& output;
  metrics::Family<metrics::Histogram>& batch_size;
  metrics::Family<metrics::Gauge>& pending;
  metrics::Family<metrics::Gauge>& load_seconds;
  metrics::Family<metrics::Counter>& dispatches;  // + reason
  metrics::Family<metrics::Histogram>& batch_wait;
  metrics::Family<metrics::Histogram>& scores;

  static VersionFamilies& Get() {
    static VersionFamilies f = Make(metrics::Registry::Global());
    return f;
  }

 private:
  static VersionFamilies Make(metrics::Registry& r) {
    const std::vector<std::string> l = {"model", "version"};
    auto latency = [&](const char* name, const char* help) -> metrics::Family<metrics::Histogram>& {
      return r.AddHistogram(name, help, l, metrics::LatencyBuckets());
    };
    return VersionFamilies{
        r.AddCounter("dais_inference_request_success_total", "Successful inference requests.", l),
        r.AddCounter("dais_inference_count_total", "Inferences performed (a batch of n counts n).",
                     l),
        r.AddCounter("dais_inference_exec_count_total", "Model executions (batches) performed.", l),
        r.AddCounter("dais_inference_request_failure_total",
                     "Failed inference requests, by reason.", {"model", "version", "reason"}),
        latency("dais_request_duration_seconds",
                "End-to-end inference request duration inside the server."),
        latency("dais_queue_duration_seconds", "Time requests waited in the queue."),
        latency("dais_compute_input_duration_seconds", "Time to assemble a batch's input tensors."),
        latency("dais_compute_infer_duration_seconds", "Time the backend spent executing a batch."),
        latency("dais_compute_output_duration_seconds",
                "Time to split a batch's outputs into responses."),
        r.AddHistogram("dais_batch_size", "Size of executed batches.", l,
                       metrics::PowerOfTwoBuckets(1024)),
        r.AddGauge("dais_pending_requests", "Requests queued or executing for the model version.",
                   l),
        r.AddGauge("dais_model_load_duration_seconds",
                   "Time the last load of the model version took (incl. warm-up).", l),
        r.AddCounter("dais_batch_dispatches_total",
                     "Batches that left the queue, by the batcher's reason (docs/batching.md).",
                     {"model", "version", "reason"}),
        latency("dais_batch_wait_seconds",
                "How long the oldest request of each dispatched batch had waited for it."),
        r.AddHistogram("dais_inference_score",
                       "Scores answered, one per row: the last value of the first output when it "
                       "is FP32/FP64 with 1 or 2 values per row (a binary classifier's p). Ten "
                       "bins of 0.1: what a quality-gated rollout compares (PSI).",
                       l, ScoreBuckets()),
    };
  }
};

constexpr FailReason kFailReasons[] = {FailReason::kInvalid,     FailReason::kRejected,
                                       FailReason::kTimeout,     FailReason::kBackend,
                                       FailReason::kUnavailable, FailReason::kCancelled};

double Seconds(uint64_t ns) { return static_cast<double>(ns) * 1e-9; }

uint64_t WallMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

const char* FailReasonLabel(FailReason reason) {
  switch (reason) {
    case FailReason::kInvalid:
      return "invalid_request";
    case FailReason::kRejected:
      return "queue_full";
    case FailReason::kTimeout:
      return "timeout";
    case FailReason::kBackend:
      return "backend_error";
    case FailReason::kUnavailable:
      return "unavailable";
    case FailReason::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

ModelStats::ModelStats(const std::string& m, const std::string& v) : model_(m), version_(v) {
  VersionFamilies& f = VersionFamilies::Get();
  success_total_ = &f.success.Get({m, v});
  inference_total_ = &f.inferences.Get({m, v});
  exec_total_ = &f.executions.Get({m, v});
  request_seconds_ = &f.request.Get({m, v});
  queue_seconds_ = &f.queue.Get({m, v});
  input_seconds_ = &f.input.Get({m, v});
  infer_seconds_ = &f.infer.Get({m, v});
  output_seconds_ = &f.output.Get({m, v});
  batch_size_ = &f.batch_size.Get({m, v});
  pending_ = &f.pending.Get({m, v});
  load_seconds_ = &f.load_seconds.Get({m, v});
  for (size_t i = 0; i < std::size(kAllDispatchReasons); ++i) {
    dispatches_[i] = &f.dispatches.Get({m, v, DispatchReasonLabel(kAllDispatchReasons[i])});
  }
  batch_wait_seconds_ = &f.batch_wait.Get({m, v});
  scores_ = &f.scores.Get({m, v});
}

void ModelStats::RecordScores(const Tensor& t, int64_t rows) {
  if ((t.dtype != DataType::kFp32 && t.dtype != DataType::kFp64) || t.shape.empty()) return;
  const size_t width = t.dtype == DataType::kFp32 ? sizeof(float) : sizeof(double);
  if (rows <= 0 || t.data.size() % (static_cast<size_t>(rows) * width) != 0) return;
  const size_t per_row = t.data.size() / static_cast<size_t>(rows) / width;
  if (per_row != 1 && per_row != 2) return;
  for (int64_t i = 0; i < rows; ++i) {
    const size_t at = (static_cast<size_t>(i) * per_row + per_row - 1) * width;
    double v = 0;
    if (t.dtype == DataType::kFp32) {
      float f = 0;
      std::memcpy(&f, t.data.data() + at, sizeof(f));
      v = f;
    } else {
      std::memcpy(&v, t.data.data() + at, sizeof(v));
    }
    if (std::isfinite(v)) scores_->Observe(v);
  }
}

void ModelStats::RecordDispatch(DispatchReason reason, uint64_t wait_ns) {
  dispatches_[static_cast<size_t>(reason)]->Increment();
  batch_wait_seconds_->Observe(Seconds(wait_ns));
}

void ModelStats::RecordSuccess(uint64_t request_ns, uint64_t queue_ns) {
  success.Add(request_ns);
  queue.Add(queue_ns);
  success_total_->Increment();
  request_seconds_->Observe(Seconds(request_ns));
  queue_seconds_->Observe(Seconds(queue_ns));
}

void ModelStats::RecordFailure(FailReason reason, uint64_t request_ns) {
  fail.Add(request_ns);
  VersionFamilies::Get().failures.Get({model_, version_, FailReasonLabel(reason)}).Increment();
}

void ModelStats::RecordExecution(int64_t batch_size, uint64_t input_ns, uint64_t infer_ns,
                                 uint64_t output_ns) {
  compute_input.Add(input_ns);
  compute_infer.Add(infer_ns);
  compute_output.Add(output_ns);
  inference_count.fetch_add(static_cast<uint64_t>(batch_size), std::memory_order_relaxed);
  execution_count.fetch_add(1, std::memory_order_relaxed);
  last_inference_ms.store(WallMs(), std::memory_order_relaxed);
  inference_total_->Increment(static_cast<double>(batch_size));
  exec_total_->Increment();
  input_seconds_->Observe(Seconds(input_ns));
  infer_seconds_->Observe(Seconds(infer_ns));
  output_seconds_->Observe(Seconds(output_ns));
  batch_size_->Observe(static_cast<double>(batch_size));
  MutexLock lock(&mu_);
  BatchStat& b = batch_stats_[batch_size];
  ++b.count;
  b.input_ns += input_ns;
  b.infer_ns += infer_ns;
  b.output_ns += output_ns;
}

void ModelStats::RemoveMetrics(const std::string& m, const std::string& v) {
  VersionFamilies& f = VersionFamilies::Get();
  for (auto* family : {&f.success, &f.inferences, &f.executions}) family->Remove({m, v});
  for (auto* family : {&f.request, &f.queue, &f.input, &f.infer, &f.output, &f.batch_size,
                       &f.batch_wait, &f.scores}) {
    family->Remove({m, v});
  }
  for (auto* family : {&f.pending, &f.load_seconds}) family->Remove({m, v});
  for (FailReason r : kFailReasons) f.failures.Remove({m, v, FailReasonLabel(r)});
  for (DispatchReason r : kAllDispatchReasons) f.dispatches.Remove({m, v, DispatchReasonLabel(r)});
}

std::map<int64_t, BatchStat> ModelStats::BatchStats() const {
  MutexLock lock(&mu_);
  return batch_stats_;
}

std::string ModelStats::ToJson(const std::string& model, const std::string& version) const {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  auto duration = [&w](const char* key, uint64_t count, uint64_t ns) {
    w.Key(key);
    w.StartObject();
    w.Key("count");
    w.Uint64(count);
    w.Key("ns");
    w.Uint64(ns);
    w.EndObject();
  };
  auto stat = [&duration](const char* key, const DurationStat& d) {
    duration(key, d.count.load(std::memory_order_relaxed), d.ns.load(std::memory_order_relaxed));
  };
  w.StartObject();
  w.Key("name");
  w.String(model.c_str());
  w.Key("version");
  w.String(version.c_str());
  w.Key("last_inference");
  w.Uint64(last_inference_ms.load());
  w.Key("inference_count");
  w.Uint64(inference_count.load());
  w.Key("execution_count");
  w.Uint64(execution_count.load());
  w.Key("inference_stats");
  w.StartObject();
  stat("success", success);
  stat("fail", fail);
  stat("queue", queue);
  stat("compute_input", compute_input);
  stat("compute_infer", compute_infer);
  stat("compute_output", compute_output);
  duration("cache_hit", 0, 0);
  duration("cache_miss", 0, 0);
  w.EndObject();
  w.Key("batch_stats");
  w.StartArray();
  for (const auto& [size, b] : BatchStats()) {
    w.StartObject();
    w.Key("batch_size");
    w.Int64(size);
    duration("compute_input", b.count, b.input_ns);
    duration("compute_infer", b.count, b.infer_ns);
    duration("compute_output", b.count, b.output_ns);
    w.EndObject();
  }
  w.EndArray();
  w.Key("memory_usage");
  w.StartArray();
  w.EndArray();
  w.EndObject();
  return sb.GetString();
}

}  // namespace dais::runtime
