#include "cluster/nvml.h"

#include <dlfcn.h>

#include <sstream>

namespace dais::cluster {
namespace {

// The few NVML declarations used (nvml.h, stable ABI since the _v2 entry points).
using NvmlReturn = int;  // 0: NVML_SUCCESS
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct Nvml {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*count)(unsigned int*) = nullptr;
  NvmlReturn (*handle)(unsigned int, NvmlDevice*) = nullptr;
  NvmlReturn (*name)(NvmlDevice, char*, unsigned int) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  const char* (*error)(NvmlReturn) = nullptr;
};

template <typename F>
bool Bind(void* lib, const char* symbol, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, symbol));
  return *out != nullptr;
}

}  // namespace

std::string ShortGpuModel(const std::string& nvml_name) {
  std::istringstream in(nvml_name);
  std::vector<std::string> words;
  for (std::string w; in >> w;) {
    if (w != "NVIDIA" && w != "Tesla" && w != "GeForce" && w != "Quadro") words.push_back(w);
  }
  if (words.empty()) return nvml_name;
  std::string model = words[0].substr(0, words[0].find('-'));
  if ((model == "RTX" || model == "GTX") && words.size() > 1) {
    model += words[1].substr(0, words[1].find('-'));
  }
  return model;
}

StatusOr<std::vector<Gpu>> DiscoverGpus() {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr)
    return NotFound("no NVML (libnvidia-ml.so.1: " + std::string(dlerror()) + ")");
  Nvml n;
  if (!Bind(lib, "nvmlInit_v2", &n.init) || !Bind(lib, "nvmlShutdown", &n.shutdown) ||
      !Bind(lib, "nvmlDeviceGetCount_v2", &n.count) ||
      !Bind(lib, "nvmlDeviceGetHandleByIndex_v2", &n.handle) ||
      !Bind(lib, "nvmlDeviceGetName", &n.name) ||
      !Bind(lib, "nvmlDeviceGetMemoryInfo", &n.memory) || !Bind(lib, "nvmlErrorString", &n.error)) {
    dlclose(lib);
    return Unavailable("NVML: libnvidia-ml.so.1 lacks an entry point (driver too old?)");
  }
  auto fail = [&n](const char* call, NvmlReturn r) {
    return Unavailable(std::string("NVML: ") + call + ": " + (n.error ? n.error(r) : "error") +
                       " (code " + std::to_string(r) + ")");
  };
  if (NvmlReturn r = n.init(); r != 0) {
    Status s = fail("nvmlInit_v2", r);
    dlclose(lib);
    return s;
  }
  std::vector<Gpu> gpus;
  Status status;
  unsigned int count = 0;
  if (NvmlReturn r = n.count(&count); r != 0) status = fail("nvmlDeviceGetCount_v2", r);
  for (unsigned int i = 0; status.ok() && i < count; ++i) {
    NvmlDevice device = nullptr;
    char name[96] = {};
    NvmlMemory memory{};
    if (NvmlReturn r = n.handle(i, &device); r != 0) {
      status = fail("nvmlDeviceGetHandleByIndex_v2", r);
    } else if (NvmlReturn r2 = n.name(device, name, sizeof(name)); r2 != 0) {
      status = fail("nvmlDeviceGetName", r2);
    } else if (NvmlReturn r3 = n.memory(device, &memory); r3 != 0) {
      status = fail("nvmlDeviceGetMemoryInfo", r3);
    } else {
      gpus.push_back({ShortGpuModel(name), static_cast<int64_t>(memory.total >> 20)});
    }
  }
  n.shutdown();
  dlclose(lib);
  if (!status.ok()) return status;
  return gpus;
}

}  // namespace dais::cluster
