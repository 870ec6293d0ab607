#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include "common/logging.h"
#include "gateway/jwt.h"

namespace dais::gateway {

JwksFile::JwksFile(std::string path) : path_(std::move(path)) {}

Status JwksFile::StatFile(Stamp* stamp) const {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    const int err = errno;
    const std::string message = "JWKS file " + path_ + ": " + std::strerror(err);
    return err == ENOENT ? NotFound(message) : Unavailable(message);
  }
  stamp->size = static_cast<int64_t>(st.st_size);
  stamp->mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  stamp->dev = static_cast<uint64_t>(st.st_dev);
  stamp->ino = static_cast<uint64_t>(st.st_ino);
  return OkStatus();
}

StatusOr<std::shared_ptr<const Jwks>> JwksFile::ReadAndParse(const Stamp& stamp) const {
  const std::string where = "JWKS file " + path_;
  if (stamp.size > kMaxFileBytes) {
    return InvalidArgument(where + ": " + std::to_string(stamp.size) +
                           " bytes, over the limit of " + std::to_string(kMaxFileBytes));
  }
  std::ifstream in(path_, std::ios::binary);
  if (!in) return Unavailable(where + ": cannot open: " + std::strerror(errno));
  std::string text(static_cast<size_t>(kMaxFileBytes) + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return Unavailable(where + ": read failed");
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > static_cast<size_t>(kMaxFileBytes)) {
    return InvalidArgument(where + ": over the limit of " + std::to_string(kMaxFileBytes) +
                           " bytes");
  }
  StatusOr<std::shared_ptr<const Jwks>> jwks = Jwks::Parse(text);
  if (!jwks.ok()) return jwks.status().WithPrefix(where);
  return jwks;
}

Status JwksFile::Load() {
  MutexLock reload(&reload_mu_);
  Stamp stamp;
  RETURN_IF_ERROR(StatFile(&stamp));
  StatusOr<std::shared_ptr<const Jwks>> jwks = ReadAndParse(stamp);
  MutexLock l(&mu_);
  seen_ = stamp;
  if (!jwks.ok()) return jwks.status();
  current_ = std::move(jwks).value();
  return OkStatus();
}

bool JwksFile::ReloadIfChanged() {
  MutexLock reload(&reload_mu_);
  Stamp stamp;
  const Status stat = StatFile(&stamp);
  size_t keys_in_force = 0;
  {
    MutexLock l(&mu_);
    if (seen_ == stamp) return false;  // unchanged (or still missing: warned already)
    seen_ = stamp;
    keys_in_force = current_ ? current_->size() : 0;
  }
  StatusOr<std::shared_ptr<const Jwks>> jwks =
      stat.ok() ? ReadAndParse(stamp) : StatusOr<std::shared_ptr<const Jwks>>(stat);
  if (!jwks.ok()) {
    LOG_WARNING("refusing the changed JWKS file, keeping the {} key(s) in force: {}", keys_in_force,
                jwks.status().message());
    return false;
  }
  LOG_INFO("JWKS file {}: {} key(s) now in force", path_, (*jwks)->size());
  MutexLock l(&mu_);
  current_ = std::move(jwks).value();
  return true;
}

std::shared_ptr<const Jwks> JwksFile::Current() const {
  MutexLock l(&mu_);
  return current_;
}

}  // namespace dais::gateway
