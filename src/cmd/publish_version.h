// Publishing a model version into a file repository, shared by `dais train` and `dais fed serve`:
// a new version appears whole (written in a hidden folder, fsynced, renamed without replacing
// anything), so a server polling the repository never loads half a version.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "dais/status.h"

namespace dais::cmd {

// The newest numbered version folder of `model_dir` holding one of the model files dais trains
// (xgboost.json / .ubj / .model, model.pt): its number (0: none) and that file's name.
int64_t NewestVersion(const std::filesystem::path& model_dir, std::string* file);

bool FsyncPath(const std::filesystem::path& path);
// Writes `text` to `path` and fsyncs it.
bool WriteSynced(const std::filesystem::path& path, const std::string& text);

// Moves the folder `tmp` (its files `file` and metrics.json already written) to `target`:
// fsyncs them, renames with RENAME_NOREPLACE (a version published meanwhile is never replaced;
// AlreadyExists then) and fsyncs the parent. Internal naming the path and errno otherwise.
Status PublishFolder(const std::filesystem::path& tmp, const std::string& file,
                     const std::filesystem::path& target);

}  // namespace dais::cmd
