// One loaded version of a model: its backend instances, its dynamic-batching queue, one thread
// per instance, and its statistics.
//
// Concurrency model (docs/architecture.md): frontends call Enqueue from I/O threads; it validates
// the request against the configuration and pushes it into the queue under `mu_`. Every instance
// thread loops: take expired requests, form a batch (BatchQueue::NextBatch), release the lock,
// execute it on its own BackendInstance, answer each request. A backend instance runs one batch
// at a time. Responses are delivered on the thread that ran the batch (the instance thread, or
// the caller's for an inline run).
//
// Lifecycle: Load() creates instances and warms each up before returning, so a version that
// exists is ready. Shutdown() stops admission (new requests get Unavailable), lets the queued
// and executing requests finish, and joins the threads; it is called by the manager when the
// version is unloaded, never from an instance thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "dais/backend.h"
#include "features/spec/feature_spec.h"
#include "model_config.pb.h"
#include "runtime/batch_queue.h"
#include "runtime/model_stats.h"

namespace dais::runtime {

// Queue bound applied when the configuration leaves max_queue_size at 0 (Triton: unbounded).
inline constexpr uint64_t kDefaultMaxQueueSize = 4096;

class ModelVersion {
 public:
  // Creates every instance of every instance_group and runs the warm-up (model_warmup, or one
  // zero-filled batch of 1 when none is configured and the shapes are fixed).
  static StatusOr<std::shared_ptr<ModelVersion>> Load(const std::string& model_name,
                                                      int64_t version,
                                                      const std::string& version_dir,
                                                      const inference::ModelConfig& config,
                                                      Backend* backend);
  ~ModelVersion();
  ModelVersion(const ModelVersion&) = delete;
  ModelVersion& operator=(const ModelVersion&) = delete;

  // Validates the request (input names, datatypes, shapes, requested outputs) and queues it.
  // On success the request is moved away and its callback will be called once (before Enqueue
  // returns when it ran inline). On failure the request is left with the caller, who answers it
  // with the returned status.
  Status Enqueue(RequestPtr& request);

  // Stops admission and joins the instance threads. With `drain`, queued requests run first;
  // without, they are answered Unavailable at once (process exit after --exit-timeout-secs).
  // Executing batches always finish.
  void Shutdown(bool drain = true);

  const std::string& name() const { return name_; }
  int64_t version() const { return version_; }
  const inference::ModelConfig& config() const { return config_; }
  const ModelStats& stats() const { return *stats_; }
  // The model's features.yaml (null when it declares no features). Set once, before the version
  // is published to other threads.
  const features::FeatureSpecPtr& features() const { return features_; }
  void set_features(features::FeatureSpecPtr spec) { features_ = std::move(spec); }

 private:
  ModelVersion(std::string name, int64_t version, inference::ModelConfig config);
  Status Validate(InferenceRequest& request) const;
  Status Warmup(BackendInstance& instance, const std::string& version_dir);
  // The warm-up's outputs against config.pbtxt: count, datatypes, shapes (`batch` first when
  // batching, else -1). A model producing [4] where the config says [7] is refused at load
  // rather than failing (or answering wrongly shaped tensors) at the first request.
  Status CheckOutputs(const std::vector<Tensor>& outputs, int64_t batch) const;
  void InstanceLoop(size_t index);
  // An instance neither executing nor claimed, when the queue holds nothing else and the
  // measured cost of a batch of `rows` is short enough to run on an I/O thread; else -1.
  int InlineInstance(int64_t rows) DAIS_REQUIRES(mu_);
  // Runs a batch taken from the queue on instance `index` (busy_ set by the caller), then
  // records what it cost and frees the instance. Called and returns with mu_ held.
  void RunBatch(size_t index, std::vector<RequestPtr>& batch, DispatchReason reason)
      DAIS_REQUIRES(mu_);
  // Cancelled requests answered; gather inputs, compute, scatter outputs (failed requests
  // answered). Returns the rows executed, when the instance was occupied, and the responses to
  // give with Answer once the instance is released.
  struct Executed {
    int64_t rows = 0;
    uint64_t start_ns = 0, end_ns = 0;
    std::vector<ResponsePtr> responses;  // parallel to the batch (null where already answered)
  };
  Executed ExecuteBatch(BackendInstance* instance, std::vector<RequestPtr>& batch);
  void Answer(std::vector<RequestPtr>& batch, Executed& done);
  // One tensor per config input holding every request's rows back to back (`total` rows).
  std::vector<Tensor> GatherInputs(const std::vector<RequestPtr>& batch, int64_t total) const;
  // Internal when the backend's outputs do not match the config or the batch.
  Status CheckBatchOutputs(const std::vector<Tensor>& outputs, int64_t total) const;
  // Where a request's rows are in the batch's outputs.
  struct BatchRows {
    int64_t total = 0;    // rows in the batch
    int64_t first = 0;    // the request's first row
    size_t requests = 0;  // requests in the batch
  };
  // The request's response: its rows of the outputs it asked for (all by default).
  StatusOr<ResponsePtr> ScatterOutputs(std::vector<Tensor>& outputs, InferenceRequest& request,
                                       BatchRows rows) const;
  Status AddOutput(std::vector<Tensor>& outputs, int index, const InferenceRequest& request,
                   BatchRows rows, bool binary, InferenceResponse* response) const;
  void Fail(RequestPtr request, const Status& status, FailReason reason);

  const std::string name_;
  const int64_t version_;
  const std::string version_label_;
  const inference::ModelConfig config_;
  std::unique_ptr<ModelStats> stats_;
  features::FeatureSpecPtr features_;
  std::vector<std::unique_ptr<BackendInstance>> instances_;
  std::vector<std::thread> threads_;

  Mutex mu_;
  CondVar cv_{&mu_};
  BatchQueue queue_ DAIS_GUARDED_BY(mu_);
  bool accepting_ DAIS_GUARDED_BY(mu_) = true;
  bool stopping_ DAIS_GUARDED_BY(mu_) = false;
  int64_t executing_ DAIS_GUARDED_BY(mu_) = 0;
  std::vector<char> busy_ DAIS_GUARDED_BY(mu_);  // per instance: a batch runs on it
  uint64_t inline_max_ns_ = 0;                   // inline_execution_max_microseconds
  bool shut_down_ = false;                       // only touched by the manager's thread
};

// BatchingOptions from a configuration's max_batch_size and dynamic_batching.
BatchingOptions BatchingOptionsFromConfig(const inference::ModelConfig& config);

}  // namespace dais::runtime
