#include "cmd/check_model.h"

#include <sys/prctl.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <filesystem>

#include "common/logging.h"
#include "dais/backend.h"
#include "runtime/model_config.h"
#include "runtime/model_version.h"
#include "runtime/repository.h"

namespace dais::cmd {

CLI::App* AddCheckModelCommand(CLI::App* app, CheckModelOptions* o) {
  CLI::App* cmd = app->add_subcommand(
      "check-model",
      "Load and warm up one model version the way `dais serve` does, then exit (0: it loads; "
      "2: it does not, the reason on stderr). `dais serve` runs this in a child process before "
      "loading a version itself (--model-load-isolation).");
  cmd->add_option("--model-dir", o->model_dir, "The model's folder: <repository>/<model>.")
      ->required();
  cmd->add_option("--model-version", o->version, "The version to load.")->required();
  cmd->add_option("--allow-gpu", o->allow_gpu, "Allow KIND_GPU instance groups.")
      ->capture_default_str();
  cmd->add_option("--log-verbose", o->log_verbose, "Verbose logging level.")->capture_default_str();
  return cmd;
}

namespace {

int Fail(const std::string& reason) {
  std::fprintf(stderr, "%s%s\n", kCheckModelErrorPrefix, reason.c_str());
  std::fflush(stderr);
  return 2;
}

}  // namespace

int RunCheckModel(const CheckModelOptions& o) {
  // Die with the server that started us: a check must not outlive it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  log::SetVerbosity(o.log_verbose);
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(o.model_dir).lexically_normal();
  const std::string name = dir.filename().string();
  auto src = ScanModel({dir.parent_path().string()}, name);
  if (!src.ok()) return Fail(src.status().message());
  auto config = LoadModelConfig(*src, o.allow_gpu);
  if (!config.ok()) return Fail(config.status().message());
  Backend* backend = FindBackend(config->backend());
  if (backend == nullptr) return Fail("backend '" + config->backend() + "' is not in this build");
  // One instance is enough to show that the files load and answer; the server creates the rest.
  inference::ModelConfig one = *config;
  one.clear_instance_group();
  if (config->instance_group_size() > 0) {
    *one.add_instance_group() = config->instance_group(0);
    one.mutable_instance_group(0)->set_count(1);
  }
  const std::string version_dir = dir.string() + "/" + std::to_string(o.version);
  auto loaded = ModelVersion::Load(name, o.version, version_dir, one, backend);
  if (!loaded.ok()) return Fail(loaded.status().message());
  (*loaded)->Shutdown(/*drain=*/false);
  return 0;
}

}  // namespace dais::cmd
