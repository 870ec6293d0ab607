#include "streams/archive_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace dais::streams {

namespace fs = std::filesystem;

bool ParsePartName(const std::string& name, std::string* consumer, uint64_t* seq) {
  static constexpr std::string_view kPrefix = "part-", kSuffix = ".jsonl.gz";
  if (name.size() <= kPrefix.size() + kSuffix.size() || name.rfind(kPrefix, 0) != 0 ||
      name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
    return false;
  }
  const std::string mid =
      name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  const size_t dash = mid.rfind('-');
  if (dash == std::string::npos || dash == 0 || dash + 1 == mid.size()) return false;
  for (size_t i = dash + 1; i < mid.size(); ++i) {
    if (mid[i] < '0' || mid[i] > '9') return false;
  }
  try {
    *seq = std::stoull(mid.substr(dash + 1));
  } catch (...) {
    return false;
  }
  *consumer = mid.substr(0, dash);
  return true;
}

DurableFile::DurableFile(fs::path tmp, fs::path final_path)
    : tmp_(std::move(tmp)), final_(std::move(final_path)) {}

DurableFile::~DurableFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    std::error_code ec;
    fs::remove(tmp_, ec);
  }
}

Status DurableFile::Open() {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) return Internal("cannot create " + tmp_.string() + ": " + std::strerror(errno));
  return OkStatus();
}

Status DurableFile::Append(std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Internal("cannot write " + tmp_.string() + ": " + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  size_ += bytes.size();
  return OkStatus();
}

Status DurableFile::AppendFile(const fs::path& path) {
  const int in = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return Internal("cannot open " + path.string() + ": " + std::strerror(errno));
  std::vector<char> buf(1 << 20);
  Status s = OkStatus();
  for (;;) {
    const ssize_t n = ::read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      s = Internal("cannot read " + path.string() + ": " + std::strerror(errno));
      break;
    }
    if (n == 0) break;
    s = Append(std::string_view(buf.data(), static_cast<size_t>(n)));
    if (!s.ok()) break;
  }
  ::close(in);
  return s;
}

Status DurableFile::Commit() {
  const int fd = fd_;
  fd_ = -1;
  if (::fsync(fd) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    std::error_code ec;
    fs::remove(tmp_, ec);
    return Internal("cannot sync " + tmp_.string() + ": " + why);
  }
  if (::close(fd) != 0) return Internal("cannot close " + tmp_.string());
  std::error_code ec;
  fs::rename(tmp_, final_, ec);
  if (ec) return Internal("cannot rename " + tmp_.string() + ": " + ec.message());
  return SyncDirectory(final_.parent_path());
}

Status WriteDurably(const fs::path& tmp, const fs::path& final_path, std::string_view bytes) {
  DurableFile f(tmp, final_path);
  if (Status s = f.Open(); !s.ok()) return s;
  if (Status s = f.Append(bytes); !s.ok()) return s;
  return f.Commit();
}

Status SyncDirectory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Internal("cannot open " + dir.string() + ": " + std::strerror(errno));
  const bool ok = ::fsync(fd) == 0;
  const std::string why = ok ? "" : std::strerror(errno);
  ::close(fd);
  if (!ok) return Internal("cannot sync " + dir.string() + ": " + why);
  return OkStatus();
}

}  // namespace dais::streams
