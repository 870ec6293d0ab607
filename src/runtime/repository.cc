#include "runtime/repository.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/logging.h"
#include "dais/backend.h"
#include "runtime/model_config.h"

namespace dais::runtime {
namespace fs = std::filesystem;
namespace {

bool IsVersionDir(const fs::directory_entry& e, int64_t* version) {
  if (!e.is_directory()) return false;
  std::string n = e.path().filename().string();
  if (n.empty() || n.size() > 18 || !std::all_of(n.begin(), n.end(), ::isdigit)) return false;
  *version = std::stoll(n);
  return true;
}

std::string Fingerprint(const fs::path& dir, const std::string& config_text) {
  std::vector<std::string> parts;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    auto mtime = fs::last_write_time(it->path(), ec).time_since_epoch().count();
    parts.push_back(fs::relative(it->path(), dir).string() + ":" +
                    std::to_string(it->file_size(ec)) + ":" + std::to_string(mtime));
  }
  std::sort(parts.begin(), parts.end());
  std::string fp = std::to_string(std::hash<std::string>{}(config_text));
  for (const auto& p : parts) fp += "|" + p;
  return fp;
}

// Guesses the backend of a model without config.pbtxt from its files.
std::string GuessFilModelType(const fs::path& version_dir) {
  if (fs::exists(version_dir / "xgboost.json")) return "xgboost_json";
  if (fs::exists(version_dir / "xgboost.ubj")) return "xgboost_ubj";
  if (fs::exists(version_dir / "xgboost.model")) return "xgboost";
  return "";
}

}  // namespace

StatusOr<std::vector<std::string>> ListModels(const std::vector<std::string>& repositories) {
  std::vector<std::string> names;
  for (const auto& repo : repositories) {
    std::error_code ec;
    if (!fs::is_directory(repo, ec)) {
      return InvalidArgument("model repository '" + repo + "' is not a directory");
    }
    for (const auto& e : fs::directory_iterator(repo, ec)) {
      std::string n = e.path().filename().string();
      if (e.is_directory() && !n.empty() && n[0] != '.') names.push_back(n);
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

StatusOr<ModelSource> ScanModel(const std::vector<std::string>& repositories,
                                const std::string& name) {
  ModelSource src;
  src.name = name;
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    return InvalidArgument("invalid model name '" + name + "'");
  }
  for (const auto& repo : repositories) {
    fs::path dir = fs::path(repo) / name;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    if (!src.dir.empty()) {
      return InvalidArgument("model '" + name + "' exists in two repositories: '" + src.dir +
                             "' and '" + dir.string() + "'");
    }
    src.dir = dir.string();
  }
  if (src.dir.empty()) return NotFound("model '" + name + "' is not in the model repository");
  fs::path config_path = fs::path(src.dir) / "config.pbtxt";
  if (fs::exists(config_path)) {
    std::ifstream f(config_path);
    std::stringstream ss;
    ss << f.rdbuf();
    src.has_config = true;
    src.config_text = ss.str();
  }
  fs::path features_path = fs::path(src.dir) / "features.yaml";
  if (fs::exists(features_path)) {
    std::ifstream f(features_path);
    std::stringstream ss;
    ss << f.rdbuf();
    src.features_text = ss.str();
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(src.dir, ec)) {
    int64_t v;
    if (IsVersionDir(e, &v)) {
      src.versions[v] = Fingerprint(e.path(), src.config_text + "\n" + src.features_text);
    }
  }
  return src;
}

StatusOr<inference::ModelConfig> LoadModelConfig(const ModelSource& src, bool allow_gpu) {
  std::string path = src.dir + "/config.pbtxt";
  inference::ModelConfig config;
  if (src.has_config) {
    ASSIGN_OR_RETURN(config, ParseModelConfig(src.config_text, path));
  }
  if (config.input_size() == 0 && config.output_size() == 0 && !src.versions.empty()) {
    // Auto-complete, as Triton does for backends that can tell the signature.
    fs::path latest = fs::path(src.dir) / std::to_string(src.versions.rbegin()->first);
    if (config.backend().empty() && config.platform().empty()) {
      std::string type = GuessFilModelType(latest);
      if (!type.empty()) {
        config.set_backend("fil");
        (*config.mutable_parameters())["model_type"].set_string_value(type);
      }
    }
    Backend* backend = FindBackend(config.backend());
    if (backend != nullptr) {
      RETURN_IF_ERROR(backend->AutoComplete(latest.string(), &config)
                          .WithPrefix("completing the configuration of model '" + src.name + "'"));
      LOG_INFO("model '{}': configuration completed from the model file", src.name);
    } else if (!src.has_config) {
      return InvalidArgument("model '" + src.name + "' has no config.pbtxt in '" + src.dir +
                             "' and its backend cannot be told from its files");
    }
  }
  std::vector<std::string> warnings;
  RETURN_IF_ERROR(ValidateModelConfig(&config, path, src.name, allow_gpu, &warnings));
  for (const auto& w : warnings) LOG_WARNING("{}", w);
  return config;
}

}  // namespace dais::runtime
