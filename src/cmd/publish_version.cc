#include "cmd/publish_version.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace dais::cmd {

namespace fs = std::filesystem;

int64_t NewestVersion(const fs::path& model_dir, std::string* file) {
  int64_t version = 0;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(model_dir, ec)) {
    const std::string name = d.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos ||
        name.size() > 15) {
      continue;
    }
    for (const char* f : {"xgboost.json", "xgboost.ubj", "xgboost.model", "model.pt"}) {
      if (fs::exists(d.path() / f, ec) && std::stoll(name) > version) {
        version = std::stoll(name);
        *file = f;
      }
    }
  }
  return version;
}

bool FsyncPath(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

bool WriteSynced(const fs::path& path, const std::string& text) {
  {
    std::ofstream out(path);
    out << text;
    if (!out.flush()) return false;
  }
  return FsyncPath(path);
}

Status PublishFolder(const fs::path& tmp, const std::string& file, const fs::path& target) {
  if (!FsyncPath(tmp / file) || !FsyncPath(tmp / "metrics.json") || !FsyncPath(tmp)) {
    return Internal("cannot write " + tmp.string() + ": " + std::strerror(errno));
  }
  // RENAME_NOREPLACE: a version published meanwhile (another trainer) is never replaced, even an
  // empty folder, which a plain rename would.
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(), RENAME_NOREPLACE) != 0) {
    const int err = errno;
    const std::string why = std::strerror(err);
    if (err == EEXIST) return AlreadyExists("cannot publish " + target.string() + ": " + why);
    return Internal("cannot publish " + target.string() + ": " + why);
  }
  if (!FsyncPath(target.parent_path())) {
    return Internal("published " + target.string() +
                    ", but fsync of its folder failed: " + std::strerror(errno));
  }
  return OkStatus();
}

}  // namespace dais::cmd
