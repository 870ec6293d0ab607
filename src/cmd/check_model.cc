#include "cmd/check_model.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

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
  cmd->add_option("--model-dir", o->model_dir, "The model's folder: <repository>/<model>.");
  cmd->add_option("--model-version", o->version, "The version to load.");
  cmd->add_flag("--zygote", o->zygote,
                "Serve checks for `dais serve`: read '<id> <version> <model dir>' lines on stdin "
                "and run each in a fork of this process (no process start per check).");
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

namespace {

// Loads and warms up one instance of version `version` of the model in `model_dir`, here.
Status CheckOne(const std::string& model_dir, int64_t version, bool allow_gpu) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(model_dir).lexically_normal();
  const std::string name = dir.filename().string();
  ASSIGN_OR_RETURN(runtime::ModelSource src,
                   runtime::ScanModel({dir.parent_path().string()}, name));
  ASSIGN_OR_RETURN(inference::ModelConfig config, runtime::LoadModelConfig(src, allow_gpu));
  Backend* backend = FindBackend(config.backend());
  if (backend == nullptr) {
    return InvalidArgument("backend '" + config.backend() + "' is not in this build");
  }
  // One instance is enough to show that the files load and answer; the server creates the rest.
  inference::ModelConfig one = config;
  one.clear_instance_group();
  if (config.instance_group_size() > 0) {
    *one.add_instance_group() = config.instance_group(0);
    one.mutable_instance_group(0)->set_count(1);
  }
  const std::string version_dir = dir.string() + "/" + std::to_string(version);
  ASSIGN_OR_RETURN(auto loaded,
                   runtime::ModelVersion::Load(name, version, version_dir, one, backend));
  loaded->Shutdown(/*drain=*/false);
  return OkStatus();
}

void WriteLine(const std::string& line) {
  // One write of at most PIPE_BUF bytes: lines of several writers never interleave.
  std::string out = line.substr(0, PIPE_BUF - 1);
  for (char& c : out)
    if (c == '\n') c = ' ';
  out += '\n';
  ssize_t n = ::write(STDOUT_FILENO, out.data(), out.size());
  (void)n;
}

// A check in a child of the zygote: never returns.
[[noreturn]] void RunForkedCheck(const std::string& id, int64_t version,
                                 const std::string& model_dir, bool allow_gpu) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // dies with the zygote (which dies with the server)
  int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null >= 0) ::dup2(null, STDERR_FILENO);  // the load's own log lines are not the server's
  Status s = CheckOne(model_dir, version, allow_gpu);
  if (!s.ok()) WriteLine(id + " error " + s.message());
  ::_exit(s.ok() ? 0 : 2);  // no static destructors: they belong to the zygote
}

// The zygote (load_check_process.h): single-threaded, it has paid the process start and the
// libraries' static initialisation once; each check is a fork of it. Requests on stdin, one per
// line: "<id> <version> <model dir>"; answers on stdout: "0 ready" once, then "<id> pid <pid>",
// "<id> error <reason>" (from the child), then "<id> exit <code>" or "<id> signal <number>".
// Ends at EOF on stdin.
int RunZygote(const CheckModelOptions& o) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  WriteLine("0 ready");  // the libraries' static initialisation is done (ids start at 1)
  std::map<pid_t, std::string> children;
  std::string in;
  bool eof = false;
  while (!eof || !children.empty()) {
    if (eof) {
      for (const auto& [pid, id] : children) ::kill(pid, SIGKILL);
    } else {
      pollfd p{STDIN_FILENO, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) {
        char buf[4096];
        ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
        if (n == 0 || (n < 0 && errno != EINTR)) eof = true;
        if (n > 0) in.append(buf, static_cast<size_t>(n));
      }
    }
    for (size_t nl; (nl = in.find('\n')) != std::string::npos; in.erase(0, nl + 1)) {
      std::istringstream line(in.substr(0, nl));
      std::string id, dir;
      int64_t version = -1;
      line >> id >> version;
      std::getline(line >> std::ws, dir);
      pid_t pid = ::fork();
      if (pid == 0) RunForkedCheck(id, version, dir, o.allow_gpu);
      if (pid < 0) {
        WriteLine(id + " error fork: " + std::strerror(errno));
        WriteLine(id + " exit 2");
        continue;
      }
      children[pid] = id;
      WriteLine(id + " pid " + std::to_string(pid));
    }
    int status = 0;
    for (pid_t pid; (pid = ::waitpid(-1, &status, eof ? 0 : WNOHANG)) > 0;) {
      auto it = children.find(pid);
      if (it == children.end()) continue;
      WriteLine(it->second + (WIFSIGNALED(status)
                                  ? " signal " + std::to_string(WTERMSIG(status))
                                  : " exit " + std::to_string(WEXITSTATUS(status))));
      children.erase(it);
      if (children.empty()) break;
    }
  }
  return 0;
}

}  // namespace

int RunCheckModel(const CheckModelOptions& o) {
  if (o.zygote) return RunZygote(o);
  // Die with the server that started us: a check must not outlive it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  log::SetVerbosity(o.log_verbose);
  if (o.model_dir.empty() || o.version < 0) return Fail("--model-dir and --model-version needed");
  Status s = CheckOne(o.model_dir, o.version, o.allow_gpu);
  return s.ok() ? 0 : Fail(s.message());
}

}  // namespace dais::cmd
