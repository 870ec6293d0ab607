// The identity backend (Triton's test backend of the same name): OUTPUTn = INPUTn, byte for
// byte. Parameters (config.pbtxt `parameters`, string values, as Triton's):
//   creation_delay_sec  seconds each instance takes to load (a stand-in for a big model's load:
//                       the coordinated-update tests and benchmark use it)
//   execute_delay_ms    milliseconds each batch takes to execute
//   creation_signal     a signal number the process raises when an instance is created (a
//                       stand-in for a model file that crashes its library: the load isolation
//                       tests use it; no real library crash survives dais's model checks)
// Inputs and outputs are paired by position; each output must have its input's datatype.
#include <charconv>
#include <chrono>
#include <csignal>
#include <thread>

#include "dais/backend.h"
#include "fmt/format.h"
#include "runtime/model_config.h"

namespace dais::backends {
namespace {

StatusOr<double> NumberParameter(const inference::ModelConfig& config, const std::string& key) {
  std::string text = runtime::ConfigParameter(config, key);
  if (text.empty()) return 0.0;
  double v = -1;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v < 0) {
    return InvalidArgument(
        fmt::format("parameter {} must be a non-negative number, got '{}'", key, text));
  }
  return v;
}

class IdentityInstance : public BackendInstance {
 public:
  IdentityInstance(const inference::ModelConfig& config, double execute_delay_ms)
      : config_(config), execute_delay_ms_(execute_delay_ms) {}

  Status Execute(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) override {
    if (execute_delay_ms_ > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(execute_delay_ms_));
    }
    outputs->clear();
    for (int i = 0; i < config_.output_size(); ++i) {
      const Tensor& in = inputs[static_cast<size_t>(i)];
      Tensor out;
      out.name = config_.output(i).name();
      out.dtype = in.dtype;
      out.shape = in.shape;
      out.Own(std::vector<char>(in.data.begin(), in.data.end()));
      outputs->push_back(std::move(out));
    }
    return OkStatus();
  }

 private:
  const inference::ModelConfig config_;
  const double execute_delay_ms_;
};

class IdentityBackend : public Backend {
 public:
  std::string_view name() const override { return "identity"; }

  StatusOr<std::unique_ptr<BackendInstance>> CreateInstance(const std::string& version_dir,
                                                            const inference::ModelConfig& config,
                                                            int instance_index) override {
    if (config.output_size() > config.input_size()) {
      return InvalidArgument(
          fmt::format("identity model '{}': {} outputs but {} inputs (OUTPUTn copies INPUTn)",
                      config.name(), config.output_size(), config.input_size()));
    }
    for (int i = 0; i < config.output_size(); ++i) {
      if (config.output(i).data_type() != config.input(i).data_type()) {
        return InvalidArgument(
            fmt::format("identity model '{}': output {} must have the datatype of input {}",
                        config.name(), config.output(i).name(), config.input(i).name()));
      }
    }
    ASSIGN_OR_RETURN(double creation_delay, NumberParameter(config, "creation_delay_sec"));
    ASSIGN_OR_RETURN(double execute_delay, NumberParameter(config, "execute_delay_ms"));
    ASSIGN_OR_RETURN(double creation_signal, NumberParameter(config, "creation_signal"));
    if (creation_signal > 0) std::raise(static_cast<int>(creation_signal));
    if (creation_delay > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(creation_delay));
    }
    return std::unique_ptr<BackendInstance>(new IdentityInstance(config, execute_delay));
  }
};

}  // namespace

std::unique_ptr<Backend> MakeIdentityBackend() { return std::make_unique<IdentityBackend>(); }

}  // namespace dais::backends
