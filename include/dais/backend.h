// The seam between the runtime and a model runtime (LibTorch, XGBoost, or a test fake).
//
// A Backend creates BackendInstances for one model version. The runtime owns each instance and
// calls it one call at a time, never concurrently: from its instance thread, or from an I/O
// thread that runs a batch inline at light load (docs/batching.md), so a backend must set any
// thread-local state it needs within each call (the PyTorch backend's InferenceMode guard does).
// Backends catch their library's exceptions and return a Status carrying the library's message.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dais/status.h"
#include "dais/tensor.h"
#include "model_config.pb.h"

namespace dais {

class BackendInstance {
 public:
  virtual ~BackendInstance() = default;
  // Runs the model on one batch. `inputs` follow the config's input order; when the model
  // batches (max_batch_size > 0) each is shaped [batch, dims...] (dims after `reshape`).
  // Fills `outputs` in the config's output order, each shaped [batch, ...] when batching.
  // Inputs borrow memory the runtime keeps alive for the call; outputs own their bytes.
  virtual Status Execute(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // Fills what the model files can tell into a config that lacks it (inputs/outputs/
  // max_batch_size), as Triton's auto-complete does. `version_dir` is a version folder.
  virtual Status AutoComplete(const std::string& version_dir, inference::ModelConfig* config) {
    return OkStatus();
  }
  // True when this backend can run KIND_GPU instance groups in this process.
  virtual bool GpuAvailable() const { return false; }
  // Loads one instance of the model stored in `version_dir`. Thread-safe.
  virtual StatusOr<std::unique_ptr<BackendInstance>> CreateInstance(
      const std::string& version_dir, const inference::ModelConfig& config, int instance_index) = 0;
};

// Backends compiled into this binary, by config backend name ("pytorch", "fil").
// Returns nullptr when the backend is unknown or was not built.
Backend* FindBackend(std::string_view backend_name);
// Names of compiled-in backends, for messages.
std::vector<std::string> BackendNames();

}  // namespace dais
