// `dais check-model`: loads and warms up one version of one model in this process, the way
// `dais serve` would (same configuration parsing, backend and warm-up with its output checks),
// then exits: 0 when it loaded, 2 with "check-model: error: <reason>" on stderr when it did not.
// `dais serve` runs it as a child process before loading a version itself
// (--model-load-isolation, cmd/load_check_process.h): a model file that crashes or hangs the
// backend library then takes this short-lived process, not the server. Usable by hand too.
#pragma once

#include <cstdint>
#include <string>

namespace CLI {
class App;
}

namespace dais::cmd {

struct CheckModelOptions {
  std::string model_dir;  // <repository>/<model>
  int64_t version = -1;
  bool allow_gpu = false;
  int log_verbose = 0;
  bool zygote = false;  // serve checks from stdin, each in a fork (load_check_process.h)
};

CLI::App* AddCheckModelCommand(CLI::App* app, CheckModelOptions* options);
int RunCheckModel(const CheckModelOptions& options);

// The line RunCheckModel writes on stderr before it exits with a failure.
inline constexpr const char* kCheckModelErrorPrefix = "check-model: error: ";

}  // namespace dais::cmd
