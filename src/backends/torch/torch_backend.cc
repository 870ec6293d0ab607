// LibTorch backend, compatible with Triton's PyTorch backend: platform "pytorch_libtorch" or
// backend "pytorch", <version>/model.pt (or default_model_filename), inputs bound by the
// "<name>__<index>" convention or else by the names of forward()'s arguments, outputs by index.
//
// Threads: one TorchScript module per instance, one call at a time (from its
// instance thread, or an I/O thread running a batch inline; docs/batching.md). The
// intra-op thread pool is process-wide: parameter INTRA_OP_THREAD_COUNT (default 1, so that
// instances, not threads, use the cores; see docs/backends.md).
#include <dlfcn.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "common/logging.h"
#include "dais/backend.h"
#include "runtime/model_config.h"
#include "runtime/tensor_config.h"

namespace dais::backends {
namespace {

StatusOr<torch::ScalarType> TorchType(DataType t) {
  switch (t) {
    case DataType::kBool:
      return torch::kBool;
    case DataType::kUint8:
      return torch::kUInt8;
    case DataType::kInt8:
      return torch::kInt8;
    case DataType::kInt16:
      return torch::kInt16;
    case DataType::kInt32:
      return torch::kInt32;
    case DataType::kInt64:
      return torch::kInt64;
    case DataType::kFp16:
      return torch::kHalf;
    case DataType::kBf16:
      return torch::kBFloat16;
    case DataType::kFp32:
      return torch::kFloat;
    case DataType::kFp64:
      return torch::kDouble;
    default:
      return InvalidArgument("datatype " + std::string(DataTypeName(t)) +
                             " is not supported by the pytorch backend");
  }
}

// Index from "<name>__<index>", or -1.
int ConventionIndex(const std::string& name) {
  auto pos = name.rfind("__");
  if (pos == std::string::npos || pos + 2 >= name.size()) return -1;
  int idx = 0;
  for (size_t i = pos + 2; i < name.size(); ++i) {
    if (!isdigit(static_cast<unsigned char>(name[i]))) return -1;
    idx = idx * 10 + (name[i] - '0');
    if (idx > 10000) return -1;
  }
  return idx;
}

class TorchInstance : public BackendInstance {
 public:
  TorchInstance(torch::jit::Module module, torch::Device device, std::vector<int> arg_of_input,
                std::vector<DataType> output_types, std::vector<std::string> output_names)
      : module_(std::move(module)),
        device_(device),
        arg_of_input_(std::move(arg_of_input)),
        output_types_(std::move(output_types)),
        output_names_(std::move(output_names)) {
    // Outputs named "<name>__<index>" take that element of forward()'s result (Triton's
    // convention, whatever their order in the configuration); otherwise the config's order.
    bool convention = true;
    for (const auto& n : output_names_) convention = convention && ConventionIndex(n) >= 0;
    for (size_t i = 0; i < output_names_.size(); ++i) {
      element_of_output_.push_back(
          convention ? static_cast<size_t>(ConventionIndex(output_names_[i])) : i);
    }
  }

  Status Execute(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) override {
    try {
      c10::InferenceMode guard;
      std::vector<c10::IValue> args(inputs.size());
      for (size_t i = 0; i < inputs.size(); ++i) {
        const Tensor& in = inputs[i];
        ASSIGN_OR_RETURN(torch::ScalarType st, TorchType(in.dtype));
        // from_blob borrows; the runtime keeps `in.data` alive for the call. Forward does not
        // write to its inputs in inference mode.
        at::Tensor t = torch::from_blob(const_cast<char*>(in.data.data()), in.shape,
                                        torch::TensorOptions().dtype(st));
        if (device_.is_cuda()) t = t.to(device_);
        args[arg_of_input_[i]] = std::move(t);
      }
      c10::IValue result = module_.forward(args);
      std::vector<at::Tensor> tensors;
      if (result.isTensor()) {
        tensors.push_back(result.toTensor());
      } else if (result.isTuple()) {
        for (const auto& e : result.toTupleRef().elements()) {
          if (!e.isTensor()) return Internal("forward() returned a tuple holding a non-tensor");
          tensors.push_back(e.toTensor());
        }
      } else if (result.isTensorList()) {
        for (const at::Tensor& t : result.toTensorVector()) tensors.push_back(t);
      } else {
        return Internal("forward() returned " + result.tagKind() + ", expected tensors");
      }
      if (tensors.size() < output_types_.size()) {
        return Internal("forward() returned " + std::to_string(tensors.size()) +
                        " tensors, the configuration declares " +
                        std::to_string(output_types_.size()) + " outputs");
      }
      outputs->clear();
      for (size_t i = 0; i < output_types_.size(); ++i) {
        size_t element = element_of_output_[i];
        if (element >= tensors.size()) {
          return Internal("output '" + output_names_[i] + "' is element " +
                          std::to_string(element) + " of forward()'s result, which has " +
                          std::to_string(tensors.size()));
        }
        at::Tensor t = tensors[element].to(torch::kCPU).contiguous();
        ASSIGN_OR_RETURN(torch::ScalarType want, TorchType(output_types_[i]));
        if (t.scalar_type() != want) {
          return Internal("output '" + output_names_[i] + "' is " +
                          std::string(c10::toString(t.scalar_type())) +
                          " but the configuration declares " +
                          std::string(DataTypeName(output_types_[i])));
        }
        Tensor out;
        out.name = output_names_[i];
        out.dtype = output_types_[i];
        out.shape.assign(t.sizes().begin(), t.sizes().end());
        size_t bytes = t.numel() * t.element_size();
        std::memcpy(out.Allocate(bytes), t.data_ptr(), bytes);
        outputs->push_back(std::move(out));
      }
      return OkStatus();
    } catch (const c10::Error& e) {
      return Internal(std::string("LibTorch: ") + e.what_without_backtrace());
    } catch (const std::exception& e) {
      return Internal(std::string("LibTorch: ") + e.what());
    }
  }

 private:
  torch::jit::Module module_;
  torch::Device device_;
  std::vector<int> arg_of_input_;  // config input i -> forward() argument position
  std::vector<DataType> output_types_;
  std::vector<std::string> output_names_;
  std::vector<size_t> element_of_output_;  // config output i -> element of forward()'s result
};

class TorchBackend : public Backend {
 public:
  std::string_view name() const override { return "pytorch"; }

  StatusOr<std::unique_ptr<BackendInstance>> CreateInstance(const std::string& version_dir,
                                                            const inference::ModelConfig& config,
                                                            int index) override {
    std::string file =
        config.default_model_filename().empty() ? "model.pt" : config.default_model_filename();
    std::string path = version_dir + "/" + file;
    if (!std::filesystem::exists(path)) {
      return InvalidArgument("model file '" + path + "' does not exist");
    }
    SetThreads(config);
    torch::Device device = torch::kCPU;
    int seen = 0;
    for (const auto& g : config.instance_group()) {
      int count = std::max(1, g.count());
      if (index >= seen && index < seen + count &&
          g.kind() == inference::ModelInstanceGroup::KIND_GPU) {
        if (!torch::cuda::is_available()) {
          return InvalidArgument("instance group '" + g.name() +
                                 "' asks for a GPU but this LibTorch has no CUDA device");
        }
        device = torch::Device(torch::kCUDA, g.gpus_size() > 0 ? g.gpus(0) : 0);
      }
      seen += count;
    }
    try {
      torch::jit::Module module = torch::jit::load(path, device);
      module.eval();
      ASSIGN_OR_RETURN(std::vector<int> arg_of_input, BindInputs(module, config, path));
      std::vector<DataType> types;
      std::vector<std::string> names;
      for (const auto& in : config.input())
        RETURN_IF_ERROR(TorchType(runtime::ConfigDataType(in.data_type())).status());
      for (const auto& out : config.output()) {
        types.push_back(runtime::ConfigDataType(out.data_type()));
        names.push_back(out.name());
        RETURN_IF_ERROR(TorchType(types.back()).status());
      }
      return std::unique_ptr<BackendInstance>(new TorchInstance(
          std::move(module), device, std::move(arg_of_input), std::move(types), std::move(names)));
    } catch (const c10::Error& e) {
      return InvalidArgument("cannot load TorchScript model '" + path +
                             "': " + e.what_without_backtrace());
    } catch (const std::exception& e) {
      return InvalidArgument("cannot load TorchScript model '" + path + "': " + e.what());
    }
  }

  bool GpuAvailable() const override { return torch::cuda::is_available(); }

 private:
  static StatusOr<std::vector<int>> BindInputs(torch::jit::Module& module,
                                               const inference::ModelConfig& config,
                                               const std::string& path) {
    const auto& schema = module.get_method("forward").function().getSchema();
    std::vector<std::string> arg_names;
    for (size_t i = 1; i < schema.arguments().size(); ++i) {  // 0 is self
      arg_names.push_back(schema.arguments()[i].name());
    }
    const int n = config.input_size();
    std::vector<int> arg_of_input(n, -1);
    bool convention = true;
    for (int i = 0; i < n; ++i) {
      int idx = ConventionIndex(config.input(i).name());
      if (idx < 0 || idx >= n) convention = false;
      arg_of_input[i] = idx;
    }
    if (!convention) {
      for (int i = 0; i < n; ++i) {
        auto it = std::find(arg_names.begin(), arg_names.end(), config.input(i).name());
        if (it == arg_names.end()) {
          return InvalidArgument("input '" + config.input(i).name() +
                                 "' is neither named <name>__<index> nor an argument of " + path +
                                 "'s forward()");
        }
        arg_of_input[i] = static_cast<int>(it - arg_names.begin());
      }
    }
    if (arg_names.size() != static_cast<size_t>(n)) {
      return InvalidArgument(path + ": forward() takes " + std::to_string(arg_names.size()) +
                             " inputs, the configuration declares " + std::to_string(n));
    }
    return arg_of_input;
  }

  static void SetThreads(const inference::ModelConfig& config) {
    static std::atomic<bool> done{false};
    if (done.exchange(true)) return;
    std::string v = runtime::ConfigParameter(config, "INTRA_OP_THREAD_COUNT");
    int threads = v.empty() ? 1 : std::max(1, std::atoi(v.c_str()));
    at::set_num_threads(threads);
    LOG_INFO("pytorch backend: {} intra-op thread(s) per instance", threads);
    SetBlasThreads(threads);
  }

  // LibTorch from Debian does its matrix products in whatever libblas.so.3 the system selects.
  // OpenBLAS (libopenblas0-pthread) runs each product on a pool sized to the machine; instances
  // are dais's unit of parallelism, so the pool gets the intra-op count too. Its serial build is
  // not safe to call from two instance threads at once (it shares buffers without locks), and
  // Debian's default libblas3 is the reference BLAS, 2-18x slower (docs/benchmarks.md): both get
  // a warning naming the library (docs/backends.md).
  static void SetBlasThreads(int threads) {
    using SetThreadsFn = void (*)(int);
    using ConfigFn = char* (*)();
    Dl_info info{};
    void* gemm = dlsym(RTLD_DEFAULT, "sgemm_");
    std::string lib = gemm && dladdr(gemm, &info) && info.dli_fname ? info.dli_fname : "unknown";
    char real[PATH_MAX];
    if (lib != "unknown" && realpath(lib.c_str(), real)) lib = real;
    auto set = reinterpret_cast<SetThreadsFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
    auto config = reinterpret_cast<ConfigFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
    if (lib.find("openblas") == std::string::npos || !set || !config) {
      LOG_WARNING(
          "pytorch backend: BLAS is {}, not OpenBLAS: if it is Debian's reference "
          "libblas3, matrix products run 2-18x slower; install libopenblas0-pthread",
          lib);
      return;
    }
    std::string build = config();
    if (build.find("SINGLE_THREADED") != std::string::npos) {
      LOG_WARNING(
          "pytorch backend: BLAS is {} ({}), not safe for two instances at once; "
          "install libopenblas0-pthread",
          build, lib);
      return;
    }
    set(threads);
    LOG_INFO("pytorch backend: BLAS is {} ({}), {} thread(s) per product", build, lib, threads);
  }
};

}  // namespace

std::unique_ptr<Backend> MakeTorchBackend() { return std::make_unique<TorchBackend>(); }

}  // namespace dais::backends
