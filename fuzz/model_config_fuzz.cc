// libFuzzer target for the config.pbtxt path: parse, render, validate, render again, select
// versions. Any crash, sanitizer report, hang or output on stderr from protobuf is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = dais::runtime::ParseModelConfig(text, "fuzz/config.pbtxt");
  if (!config.ok()) return 0;
  (void)dais::runtime::ModelConfigToJson(*config);
  std::vector<std::string> warnings;
  const bool allow_gpu = size % 2 == 0;
  if (dais::runtime::ValidateModelConfig(&*config, "fuzz/config.pbtxt", "fuzz", allow_gpu,
                                         &warnings)
          .ok()) {
    (void)dais::runtime::ModelConfigToJson(*config);
    (void)dais::runtime::SelectVersions(config->version_policy(), {3, 1, 2, 2, 9});
    (void)dais::runtime::ConfigParameter(*config, "model_type");
  }
  return 0;
}
