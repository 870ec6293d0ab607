#include "runtime/model_version.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/logging.h"
#include "common/thread_name.h"
#include "dais/clock.h"
#include "runtime/cpu_load.h"
#include "runtime/model_config.h"
#include "runtime/tensor_config.h"

namespace dais::runtime {
namespace {

std::string OutputsList(const inference::ModelConfig& config, bool inputs) {
  std::string s;
  int n = inputs ? config.input_size() : config.output_size();
  for (int i = 0; i < n; ++i) {
    if (!s.empty()) s += ", ";
    s += inputs ? config.input(i).name() : config.output(i).name();
  }
  return s;
}

bool DimsMatch(const std::vector<int64_t>& got, size_t offset,
               const google::protobuf::RepeatedField<int64_t>& want) {
  if (got.size() - offset != static_cast<size_t>(want.size())) return false;
  for (int i = 0; i < want.size(); ++i) {
    if (want[i] != -1 && want[i] != got[offset + i]) return false;
  }
  return true;
}

// Byte offsets of the elements of a serialized BYTES tensor.
bool BytesElementOffsets(std::string_view data, std::vector<size_t>* offsets) {
  size_t pos = 0;
  while (pos < data.size()) {
    if (data.size() - pos < 4) return false;
    uint32_t len;
    std::memcpy(&len, data.data() + pos, 4);
    offsets->push_back(pos);
    pos += 4;
    if (data.size() - pos < len) return false;
    pos += len;
  }
  offsets->push_back(pos);
  return true;
}

// Copies rows [row, row + rows) of a [total, ...] tensor into `out`.
Status SliceRows(const Tensor& full, int64_t total, int64_t row, int64_t rows, Tensor* out) {
  if (full.dtype != DataType::kBytes) {
    size_t row_bytes = total > 0 ? full.data.size() / static_cast<size_t>(total) : 0;
    std::vector<char> bytes(full.data.data() + row * row_bytes,
                            full.data.data() + (row + rows) * row_bytes);
    out->Own(std::move(bytes));
    return OkStatus();
  }
  std::vector<size_t> offsets;
  if (!BytesElementOffsets(full.data, &offsets)) {
    return Internal("backend produced a malformed BYTES output '" + full.name + "'");
  }
  size_t elements = offsets.size() - 1;
  size_t per_row = total > 0 ? elements / static_cast<size_t>(total) : 0;
  size_t begin = offsets[row * per_row], end = offsets[(row + rows) * per_row];
  out->Own(std::vector<char>(full.data.data() + begin, full.data.data() + end));
  return OkStatus();
}

void FillWarmupData(const inference::ModelWarmup::Input& spec, const std::string& model_dir,
                    Tensor* t, std::mt19937* rng, Status* status) {
  int64_t count = ElementCount(t->shape);
  if (t->dtype == DataType::kBytes) {
    std::vector<char> bytes(static_cast<size_t>(count) * 5, 0);
    for (int64_t i = 0; i < count; ++i) {
      uint32_t one = 1;
      std::memcpy(bytes.data() + i * 5, &one, 4);
      bytes[i * 5 + 4] = spec.random_data() ? static_cast<char>('a' + (*rng)() % 26) : '0';
    }
    t->Own(std::move(bytes));
    return;
  }
  size_t size = static_cast<size_t>(count) * DataTypeSize(t->dtype);
  char* p = t->Allocate(size);
  if (spec.has_input_data_file() || !spec.input_data_file().empty()) {
    std::string path = model_dir + "/warmup/" + spec.input_data_file();
    std::ifstream f(path, std::ios::binary);
    std::string content((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (!f.good() && !f.eof()) {
      *status = InvalidArgument("warm-up data file '" + path + "' cannot be read");
      return;
    }
    if (content.size() < size) {
      *status = InvalidArgument("warm-up data file '" + path + "' holds " +
                                std::to_string(content.size()) + " bytes, " + std::to_string(size) +
                                " needed");
      return;
    }
    std::memcpy(p, content.data(), size);
  } else if (spec.random_data()) {
    if (t->dtype == DataType::kFp32) {
      std::uniform_real_distribution<float> dist(0.f, 1.f);
      for (int64_t i = 0; i < count; ++i) {
        float v = dist(*rng);
        std::memcpy(p + i * 4, &v, 4);
      }
    } else if (t->dtype == DataType::kFp64) {
      std::uniform_real_distribution<double> dist(0., 1.);
      for (int64_t i = 0; i < count; ++i) {
        double v = dist(*rng);
        std::memcpy(p + i * 8, &v, 8);
      }
    } else {
      // Small non-negative integers (also valid booleans): random bits could be NaN or out of
      // an embedding's range.
      size_t es = DataTypeSize(t->dtype);
      for (int64_t i = 0; i < count; ++i) p[i * es] = static_cast<char>((*rng)() % 2);
    }
  }
}

// A parameter in microseconds (validated at load), or `fallback` when absent.
uint64_t MicrosParameter(const inference::ModelConfig& config, const char* key, uint64_t fallback) {
  const std::string v = ConfigParameter(config, key);
  uint64_t us = 0;
  if (v.empty() || std::from_chars(v.data(), v.data() + v.size(), us).ec != std::errc()) {
    return fallback;
  }
  return us;
}

int InstanceCount(const inference::ModelConfig& config) {
  int instances = 0;
  for (const auto& group : config.instance_group()) instances += std::max(1, group.count());
  return std::max(1, instances);
}

// Longest measured batch of one that may run on the thread that received it, by default. With one
// instance a request that comes meanwhile would wait for the instance anyway, so a longer run on
// the I/O thread costs it nothing; with more, it could have run beside the inline one.
constexpr uint64_t kDefaultInlineMaxUs = 100;
constexpr uint64_t kDefaultInlineMaxUsOneInstance = 1000;

uint64_t InlineMaxUs(const inference::ModelConfig& config) {
  return MicrosParameter(
      config, kInlineExecutionParameter,
      InstanceCount(config) == 1 ? kDefaultInlineMaxUsOneInstance : kDefaultInlineMaxUs);
}

}  // namespace

BatchingOptions BatchingOptionsFromConfig(const inference::ModelConfig& config) {
  BatchingOptions o;
  o.max_batch_size = config.max_batch_size();
  auto policy = [](const inference::ModelQueuePolicy& p) {
    QueuePolicy q;
    q.reject_on_timeout = p.timeout_action() != inference::ModelQueuePolicy::DELAY;
    q.default_timeout_us = p.default_timeout_microseconds();
    q.allow_timeout_override = p.allow_timeout_override();
    q.max_queue_size = p.max_queue_size() > 0 ? p.max_queue_size() : kDefaultMaxQueueSize;
    return q;
  };
  o.default_policy = policy(inference::ModelQueuePolicy());
  if (config.has_dynamic_batching()) {
    const auto& db = config.dynamic_batching();
    o.dynamic = config.max_batch_size() > 0;
    o.preferred_batch_sizes.assign(db.preferred_batch_size().begin(),
                                   db.preferred_batch_size().end());
    o.max_queue_delay_us = db.max_queue_delay_microseconds();
    o.priority_levels = static_cast<uint32_t>(db.priority_levels());
    o.default_priority = static_cast<uint32_t>(db.default_priority_level());
    if (db.has_default_queue_policy()) o.default_policy = policy(db.default_queue_policy());
    for (const auto& [level, p] : db.priority_queue_policy()) {
      o.level_policies[static_cast<uint32_t>(level)] = policy(p);
    }
    o.adaptive = o.dynamic && ConfigParameter(config, kBatchingPolicyParameter) == "adaptive";
    o.cpu_bound = [](uint64_t now_ns) { return CpuLoad::Global().CpuBound(now_ns); };
    if (uint64_t target = MicrosParameter(config, kLatencyTargetParameter, 0); target > 0) {
      o.adaptive_options.latency_target_us = target;
    }
    o.adaptive_options.instances = InstanceCount(config);
  }
  return o;
}

ModelVersion::ModelVersion(std::string name, int64_t version, inference::ModelConfig config)
    : name_(std::move(name)),
      version_(version),
      version_label_(std::to_string(version)),
      config_(std::move(config)),
      stats_(std::make_unique<ModelStats>(name_, version_label_)),
      queue_(BatchingOptionsFromConfig(config_)),
      inline_max_ns_(InlineMaxUs(config_) * 1000) {}

ModelVersion::~ModelVersion() {
  if (!shut_down_) Shutdown();
}

StatusOr<std::shared_ptr<ModelVersion>> ModelVersion::Load(const std::string& model_name,
                                                           int64_t version,
                                                           const std::string& version_dir,
                                                           const inference::ModelConfig& config,
                                                           Backend* backend) {
  uint64_t start = NowNs();
  std::shared_ptr<ModelVersion> mv(new ModelVersion(model_name, version, config));
  int index = 0;
  for (const auto& group : config.instance_group()) {
    int count = group.count() > 0 ? group.count() : 1;
    for (int i = 0; i < count; ++i, ++index) {
      LOG_VERBOSE(1, "model '{}' version {}: creating instance {}", model_name, version, index);
      auto inst = backend->CreateInstance(version_dir, config, index);
      if (!inst.ok()) return inst.status();
      RETURN_IF_ERROR(mv->Warmup(**inst, version_dir));
      mv->instances_.push_back(std::move(inst).value());
    }
  }
  if (mv->instances_.empty()) return InvalidArgument("model '" + model_name + "' has no instances");
  {
    MutexLock lock(&mv->mu_);
    mv->busy_.assign(mv->instances_.size(), 0);
  }
  for (size_t i = 0; i < mv->instances_.size(); ++i) {
    mv->threads_.emplace_back([raw = mv.get(), i] {
      // "mlp_heavy#0": the model (cut to fit) and the instance, as top and perf show threads.
      const std::string index = "#" + std::to_string(i);
      SetThreadName(raw->name_.substr(0, 15 - std::min<size_t>(index.size(), 15)) + index);
      raw->InstanceLoop(i);
    });
  }
  double secs = static_cast<double>(NowNs() - start) * 1e-9;
  mv->stats_->SetLoadDuration(secs);
  LOG_INFO("model '{}' version {} ready: {} instance(s), loaded and warmed up in {:.3f}s",
           model_name, version, mv->instances_.size(), secs);
  return mv;
}

Status ModelVersion::Warmup(BackendInstance& instance, const std::string& version_dir) {
  std::mt19937 rng(42);
  // input_data_file names a file in <model>/warmup/, as in Triton.
  const std::string model_dir = std::filesystem::path(version_dir).parent_path().string();
  const bool batching = config_.max_batch_size() > 0;
  auto run = [&](int64_t batch, const inference::ModelWarmup* w) -> Status {
    std::vector<Tensor> inputs;
    for (const auto& in : config_.input()) {
      Tensor t;
      t.name = in.name();
      t.dtype = ConfigDataType(in.data_type());
      std::vector<int64_t> dims = ModelDims(in);
      if (w != nullptr) {
        auto it = w->inputs().find(in.name());
        if (it == w->inputs().end()) {
          return InvalidArgument("model_warmup '" + w->name() + "' has no input '" + in.name() +
                                 "'");
        }
        dims.assign(it->second.dims().begin(), it->second.dims().end());
      }
      if (batching) dims.insert(dims.begin(), batch);
      for (int64_t& d : dims)
        if (d < 0) d = 1;
      t.shape = dims;
      Status s;
      inference::ModelWarmup::Input spec;
      if (w != nullptr) spec = w->inputs().at(in.name());
      FillWarmupData(spec, model_dir, &t, &rng, &s);
      RETURN_IF_ERROR(s);
      inputs.push_back(std::move(t));
    }
    std::vector<Tensor> outputs;
    const uint64_t start = NowNs();
    RETURN_IF_ERROR(instance.Execute(inputs, &outputs));
    {
      // The first cost the batcher knows (inline execution and the adaptive policy).
      MutexLock lock(&mu_);
      queue_.ObserveWarmup(batching ? batch : 1, NowNs() - start);
    }
    return CheckOutputs(outputs, batching ? batch : -1);
  };
  if (config_.model_warmup_size() == 0) {
    for (const auto& in : config_.input()) {
      for (int64_t d : ModelDims(in))
        if (d < 0) return OkStatus();  // shapes unknown: no default warm-up
    }
    return run(1, nullptr).WithPrefix("warm-up of model '" + name_ + "'");
  }
  for (const auto& w : config_.model_warmup()) {
    int64_t batch = std::max<int64_t>(1, w.batch_size());
    uint32_t count = std::max(1u, w.count());
    LOG_VERBOSE(1, "model '{}': warm-up '{}' x{} at batch {}", name_, w.name(), count, batch);
    for (uint32_t i = 0; i < count; ++i) {
      RETURN_IF_ERROR(
          run(batch, &w).WithPrefix("warm-up '" + w.name() + "' of model '" + name_ + "'"));
    }
  }
  return OkStatus();
}

Status ModelVersion::CheckOutputs(const std::vector<Tensor>& outputs, int64_t batch) const {
  if (outputs.size() != static_cast<size_t>(config_.output_size())) {
    return InvalidArgument("the model produced " + std::to_string(outputs.size()) +
                           " output(s); config.pbtxt declares " +
                           std::to_string(config_.output_size()));
  }
  for (int i = 0; i < config_.output_size(); ++i) {
    const auto& cfg = config_.output(i);
    const Tensor& t = outputs[static_cast<size_t>(i)];
    const DataType want = ConfigDataType(cfg.data_type());
    if (t.dtype != want) {
      return InvalidArgument("output '" + cfg.name() + "': the model produces " +
                             std::string(DataTypeName(t.dtype)) + ", config.pbtxt says " +
                             std::string(DataTypeName(want)));
    }
    // What the model itself must produce: reshape.shape when present (clients see dims).
    std::vector<int64_t> dims =
        cfg.has_reshape()
            ? std::vector<int64_t>(cfg.reshape().shape().begin(), cfg.reshape().shape().end())
            : std::vector<int64_t>(cfg.dims().begin(), cfg.dims().end());
    if (batch >= 0) dims.insert(dims.begin(), batch);
    bool match = dims.size() == t.shape.size();
    for (size_t d = 0; match && d < dims.size(); ++d) match = dims[d] < 0 || dims[d] == t.shape[d];
    if (!match) {
      return InvalidArgument("output '" + cfg.name() + "': the model produces shape " +
                             ShapeToString(t.shape) + ", config.pbtxt says " + ShapeToString(dims) +
                             (batch >= 0 ? " (batch first)" : ""));
    }
  }
  return OkStatus();
}

Status ModelVersion::Validate(InferenceRequest& r) const {
  const bool batching = config_.max_batch_size() > 0;
  std::vector<Tensor> ordered;
  ordered.reserve(config_.input_size());
  for (const Tensor& t : r.inputs) {
    bool known = false;
    for (const auto& in : config_.input()) known = known || in.name() == t.name;
    if (!known) {
      return InvalidArgument("unknown input '" + t.name + "' for model '" + name_ +
                             "' (inputs: " + OutputsList(config_, true) + ")");
    }
  }
  int64_t batch = -1;
  for (const auto& in : config_.input()) {
    auto it = std::find_if(r.inputs.begin(), r.inputs.end(),
                           [&](const Tensor& t) { return t.name == in.name(); });
    if (it == r.inputs.end()) {
      return InvalidArgument("missing input '" + in.name() + "' for model '" + name_ + "'");
    }
    Tensor& t = *it;
    DataType want = ConfigDataType(in.data_type());
    if (t.dtype != want) {
      return InvalidArgument("input '" + t.name + "': datatype " +
                             std::string(DataTypeName(t.dtype)) + " does not match the model's " +
                             std::string(DataTypeName(want)));
    }
    std::vector<int64_t> expected(in.dims().begin(), in.dims().end());
    if (batching) expected.insert(expected.begin(), -1);
    if (batching && t.shape.empty()) {
      return InvalidArgument("input '" + t.name + "': shape " + ShapeToString(t.shape) +
                             " lacks the batch dimension; expected " + ShapeToString(expected));
    }
    if (!DimsMatch(t.shape, batching ? 1 : 0, in.dims())) {
      return InvalidArgument("input '" + t.name + "': shape " + ShapeToString(t.shape) +
                             " does not match the model's " + ShapeToString(expected));
    }
    if (batching) {
      int64_t b = t.shape[0];
      if (b < 1 || b > config_.max_batch_size()) {
        return InvalidArgument("input '" + t.name + "': batch size " + std::to_string(b) +
                               " is outside [1, max_batch_size " +
                               std::to_string(config_.max_batch_size()) + "]");
      }
      if (batch != -1 && b != batch) {
        return InvalidArgument("inputs have different batch sizes (" + std::to_string(batch) +
                               " and " + std::to_string(b) + ")");
      }
      batch = b;
    }
    if (t.dtype != DataType::kBytes) {
      size_t want_bytes = static_cast<size_t>(ElementCount(t.shape)) * DataTypeSize(t.dtype);
      if (t.data.size() != want_bytes) {
        return InvalidArgument("input '" + t.name + "': " + std::to_string(t.data.size()) +
                               " bytes of data for shape " + ShapeToString(t.shape) +
                               ", expected " + std::to_string(want_bytes));
      }
    }
    ordered.push_back(std::move(t));
  }
  for (const RequestedOutput& o : r.outputs) {
    bool known = false;
    for (const auto& out : config_.output()) known = known || out.name() == o.name;
    if (!known) {
      return InvalidArgument("unknown output '" + o.name + "' for model '" + name_ +
                             "' (outputs: " + OutputsList(config_, false) + ")");
    }
  }
  r.inputs = std::move(ordered);
  r.batch_size = batching ? batch : 1;
  return OkStatus();
}

Status ModelVersion::Enqueue(RequestPtr& request) DAIS_NO_THREAD_SAFETY_ANALYSIS {
  if (request->arrival_ns == 0) request->arrival_ns = NowNs();
  if (Status s = Validate(*request); !s.ok()) {
    stats_->RecordFailure(FailReason::kInvalid, NowNs() - request->arrival_ns);
    return s;
  }
  const bool may_run_inline = request->may_run_inline;
  const int64_t rows = request->batch_size;
  MutexLock lock(&mu_);
  if (!accepting_) {
    // Not counted: the version's series may already be gone; the manager retries elsewhere.
    return Unavailable("model '" + name_ + "' version " + version_label_ + " is unloading");
  }
  const int instance = may_run_inline ? InlineInstance(rows) : -1;
  if (Status s = queue_.Push(request, NowNs()); !s.ok()) {
    stats_->RecordFailure(FailReason::kRejected, NowNs() - request->arrival_ns);
    return s;
  }
  if (instance >= 0) {
    std::vector<RequestPtr> batch;
    uint64_t wake = 0;
    DispatchReason reason{};
    if (queue_.NextBatch(NowNs(), &batch, &wake, &reason)) {
      // Run here: no instance thread to wake, and the answer leaves from this thread.
      busy_[static_cast<size_t>(instance)] = 1;
      RunBatch(static_cast<size_t>(instance), batch, reason);
      return OkStatus();
    }
  }
  stats_->SetPending(static_cast<int64_t>(queue_.size()) + executing_);
  // An instance thread waiting for a larger batch under the CPU-bound rule is not woken for
  // every arrival (each wake-up is a context switch, which is what that rule saves).
  if (queue_.WakeOnPush()) cv_.SignalAll();
  return OkStatus();
}

int ModelVersion::InlineInstance(int64_t rows) {
  // Unmeasured (no warm-up ran yet) counts as too long: the first batch shows what it costs.
  const double cost = queue_.EstimatedCostNs(rows);
  if (cost <= 0 || cost > static_cast<double>(inline_max_ns_) || stopping_) return -1;
  if (!queue_.empty()) return -1;
  for (size_t i = 0; i < busy_.size(); ++i) {
    if (!busy_[i]) return static_cast<int>(i);
  }
  return -1;
}

void ModelVersion::RunBatch(size_t index, std::vector<RequestPtr>& batch,
                            DispatchReason reason) DAIS_NO_THREAD_SAFETY_ANALYSIS {
  const uint64_t now = NowNs();
  uint64_t oldest = now;
  for (const RequestPtr& r : batch) oldest = std::min(oldest, r->enqueue_ns);
  stats_->RecordDispatch(reason, now - oldest);
  executing_ += static_cast<int64_t>(batch.size());
  stats_->SetPending(static_cast<int64_t>(queue_.size()) + executing_);
  mu_.Unlock();
  Executed done = ExecuteBatch(instances_[index].get(), batch);
  mu_.Lock();
  // The instance is free before the answers go out: a client's next request, sent on reading
  // its answer, finds it idle.
  busy_[index] = 0;
  if (done.rows > 0) queue_.ObserveExecution(done.rows, done.end_ns - done.start_ns);
  executing_ -= static_cast<int64_t>(batch.size());
  stats_->SetPending(static_cast<int64_t>(queue_.size()) + executing_);
  // Work that queued meanwhile, or a shutdown waiting for this instance: its thread decides.
  if (!queue_.empty() || stopping_) cv_.SignalAll();
  mu_.Unlock();
  Answer(batch, done);
  mu_.Lock();
}

void ModelVersion::Shutdown(bool drain) {
  std::vector<RequestPtr> dropped;
  {
    MutexLock lock(&mu_);
    accepting_ = false;
    stopping_ = true;
    if (!drain) queue_.TakeAll(&dropped);
    cv_.SignalAll();
  }
  for (RequestPtr& r : dropped) {
    Fail(std::move(r), Unavailable("server is shutting down; the request was not run"),
         FailReason::kUnavailable);
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  shut_down_ = true;
}

void ModelVersion::Fail(RequestPtr request, const Status& status, FailReason reason) {
  stats_->RecordFailure(reason, NowNs() - request->arrival_ns);
  if (request->on_complete) request->on_complete(status);
}

void ModelVersion::InstanceLoop(size_t index) DAIS_NO_THREAD_SAFETY_ANALYSIS {
  mu_.Lock();
  while (true) {
    if (busy_[index]) {
      // Claimed by a thread running a batch inline: it signals when it is done. The thread does
      // not exit before then, so Shutdown's join covers inline runs too.
      cv_.Wait();
      continue;
    }
    std::vector<RequestPtr> expired, cancelled;
    queue_.TakeExpired(NowNs(), &expired);
    queue_.TakeCancelled(&cancelled);
    if (!expired.empty() || !cancelled.empty()) {
      stats_->SetPending(static_cast<int64_t>(queue_.size()) + executing_);
      mu_.Unlock();
      for (RequestPtr& r : expired) {
        Fail(std::move(r),
             DeadlineExceeded("request timeout expired after waiting in the queue of model '" +
                              name_ + "'"),
             FailReason::kTimeout);
      }
      for (RequestPtr& r : cancelled) {
        Fail(std::move(r), Cancelled("the client cancelled the request before it ran"),
             FailReason::kCancelled);
      }
      mu_.Lock();
      continue;
    }
    std::vector<RequestPtr> batch;
    uint64_t wake = 0;
    DispatchReason reason{};
    if (queue_.NextBatch(NowNs(), &batch, &wake, &reason)) {
      busy_[index] = 1;
      RunBatch(index, batch, reason);
      continue;
    }
    if (stopping_ && queue_.empty()) break;
    uint64_t deadline = queue_.EarliestDeadline();
    if (wake != 0 && (deadline == 0 || wake < deadline)) deadline = wake;
    if (deadline != 0) {
      cv_.WaitUntil(std::chrono::steady_clock::time_point(std::chrono::nanoseconds(deadline)));
    } else {
      cv_.Wait();
    }
  }
  mu_.Unlock();
}

std::vector<Tensor> ModelVersion::GatherInputs(const std::vector<RequestPtr>& batch,
                                               int64_t total) const {
  const bool batching = config_.max_batch_size() > 0;
  std::vector<Tensor> inputs(config_.input_size());
  for (int i = 0; i < config_.input_size(); ++i) {
    const auto& in = config_.input(i);
    Tensor& t = inputs[i];
    const Tensor& first = batch[0]->inputs[i];
    t.name = first.name;
    t.dtype = first.dtype;
    if (in.has_reshape()) {
      t.shape.assign(in.reshape().shape().begin(), in.reshape().shape().end());
      if (batching) t.shape.insert(t.shape.begin(), total);
    } else {
      t.shape = first.shape;
      if (batching) t.shape[0] = total;
    }
    if (batch.size() == 1 && reinterpret_cast<uintptr_t>(first.data.data()) % 16 == 0) {
      t.data = first.data;  // borrow: no copy for a batch of one whose bytes are aligned
      continue;
    }
    size_t bytes = 0;
    for (const auto& r : batch) bytes += r->inputs[i].data.size();
    char* p = t.Allocate(bytes);
    for (const auto& r : batch) {
      std::memcpy(p, r->inputs[i].data.data(), r->inputs[i].data.size());
      p += r->inputs[i].data.size();
    }
  }
  return inputs;
}

Status ModelVersion::CheckBatchOutputs(const std::vector<Tensor>& outputs, int64_t total) const {
  if (outputs.size() != static_cast<size_t>(config_.output_size())) {
    return Internal("model '" + name_ + "' produced " + std::to_string(outputs.size()) +
                    " outputs, its configuration declares " +
                    std::to_string(config_.output_size()));
  }
  const bool batching = config_.max_batch_size() > 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (batching && (outputs[i].shape.empty() || outputs[i].shape[0] != total)) {
      return Internal("model '" + name_ + "' output '" + config_.output(i).name() + "' has shape " +
                      ShapeToString(outputs[i].shape) + " for a batch of " + std::to_string(total));
    }
  }
  return OkStatus();
}

Status ModelVersion::AddOutput(std::vector<Tensor>& outputs, int index, const InferenceRequest& r,
                               BatchRows rows, bool binary, InferenceResponse* resp) const {
  const bool batching = config_.max_batch_size() > 0;
  const auto& cfg = config_.output(index);
  Tensor& full = outputs[index];
  Tensor out;
  out.name = cfg.name();
  out.dtype = full.dtype;
  if (cfg.has_reshape()) {
    out.shape.assign(cfg.dims().begin(), cfg.dims().end());
    if (batching) out.shape.insert(out.shape.begin(), r.batch_size);
  } else {
    out.shape = full.shape;
    if (batching) out.shape[0] = r.batch_size;
  }
  if (batching && rows.requests > 1) {
    RETURN_IF_ERROR(SliceRows(full, rows.total, rows.first, r.batch_size, &out));
  } else if (full.storage.empty() || full.data.data() != full.storage.data()) {
    out.Own(std::vector<char>(full.data.begin(), full.data.end()));
  } else {
    out.storage = std::move(full.storage);  // the only request: take the bytes
    out.data = std::string_view(out.storage.data(), out.storage.size());
  }
  resp->outputs.push_back(std::move(out));
  resp->output_binary.push_back(binary);
  return OkStatus();
}

StatusOr<ResponsePtr> ModelVersion::ScatterOutputs(std::vector<Tensor>& outputs,
                                                   InferenceRequest& r, BatchRows rows) const {
  auto resp = std::make_unique<InferenceResponse>();
  resp->model_name = name_;
  resp->model_version = version_label_;
  resp->id = r.id;
  resp->parameters = std::move(r.response_parameters);
  if (r.outputs.empty()) {
    for (int i = 0; i < config_.output_size(); ++i) {
      RETURN_IF_ERROR(AddOutput(outputs, i, r, rows, r.binary_output_default, resp.get()));
    }
    return resp;
  }
  for (const RequestedOutput& o : r.outputs) {
    for (int i = 0; i < config_.output_size(); ++i) {
      if (config_.output(i).name() == o.name) {
        RETURN_IF_ERROR(AddOutput(outputs, i, r, rows, o.binary, resp.get()));
      }
    }
  }
  return resp;
}

ModelVersion::Executed ModelVersion::ExecuteBatch(BackendInstance* instance,
                                                  std::vector<RequestPtr>& batch) {
  // Requests whose client went away are answered, not run.
  for (RequestPtr& r : batch) {
    if (r->cancelled && r->cancelled->load(std::memory_order_relaxed)) {
      Fail(std::move(r), Cancelled("the client cancelled the request before it ran"),
           FailReason::kCancelled);
    }
  }
  batch.erase(std::remove(batch.begin(), batch.end(), nullptr), batch.end());
  if (batch.empty()) return {};
  const uint64_t start = NowNs();
  int64_t total = 0;
  for (const auto& r : batch) total += r->batch_size;

  // Compute input: one tensor per config input, rows of every request back to back.
  std::vector<Tensor> inputs = GatherInputs(batch, total);
  const uint64_t infer_start = NowNs();
  std::vector<Tensor> outputs;
  Status status = instance->Execute(inputs, &outputs);
  const uint64_t infer_end = NowNs();
  if (status.ok()) status = CheckBatchOutputs(outputs, total);
  if (!status.ok()) {
    for (RequestPtr& r : batch) Fail(std::move(r), status, FailReason::kBackend);
    return {};
  }

  // Compute output: slice each output per request, keep the requested ones.
  std::vector<ResponsePtr> responses;
  BatchRows rows{total, 0, batch.size()};
  for (RequestPtr& r : batch) {
    StatusOr<ResponsePtr> resp = ScatterOutputs(outputs, *r, rows);
    rows.first += r->batch_size;
    if (!resp.ok()) {
      Fail(std::move(r), resp.status(), FailReason::kBackend);
      responses.push_back(nullptr);
      continue;
    }
    responses.push_back(std::move(resp).value());
  }
  const uint64_t end = NowNs();
  stats_->RecordExecution(total, infer_start - start, infer_end - infer_start, end - infer_end);
  return {total, start, end, std::move(responses)};
}

void ModelVersion::Answer(std::vector<RequestPtr>& batch, Executed& done) {
  for (size_t i = 0; i < batch.size() && i < done.responses.size(); ++i) {
    if (!batch[i]) continue;
    stats_->RecordSuccess(done.end_ns - batch[i]->arrival_ns, done.start_ns - batch[i]->enqueue_ns);
    if (done.responses[i] != nullptr && !done.responses[i]->outputs.empty()) {
      stats_->RecordScores(done.responses[i]->outputs[0], batch[i]->batch_size);
    }
    RequestPtr r = std::move(batch[i]);
    r->on_complete(std::move(done.responses[i]));
  }
}

}  // namespace dais::runtime
