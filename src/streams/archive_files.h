// Files of an archive (archiver.h, archive_compact.h): part names, and writing a file durably
// (temporary name, fsync, rename, directory fsync).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "dais/status.h"

namespace dais::streams {

// "part-<consumer>-<seq>.jsonl.gz" -> consumer, seq; false for other names.
bool ParsePartName(const std::string& name, std::string* consumer, uint64_t* seq);

// Writes a file under a temporary name and renames it into place once it is on disk.
class DurableFile {
 public:
  // `tmp` and `final_path` in the same directory.
  DurableFile(std::filesystem::path tmp, std::filesystem::path final_path);
  ~DurableFile();  // without Commit: closes and removes the temporary file
  DurableFile(const DurableFile&) = delete;
  DurableFile& operator=(const DurableFile&) = delete;

  Status Open();
  Status Append(std::string_view bytes);
  // Appends the whole content of another file.
  Status AppendFile(const std::filesystem::path& path);
  // fsync, close, rename to final_path, fsync of the directory.
  Status Commit();
  uint64_t size() const { return size_; }

 private:
  std::filesystem::path tmp_, final_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// DurableFile in one call.
Status WriteDurably(const std::filesystem::path& tmp, const std::filesystem::path& final_path,
                    std::string_view bytes);

// fsync of a directory (after a rename, a removal or a creation in it); Internal naming it when
// the directory cannot be opened or synced.
Status SyncDirectory(const std::filesystem::path& dir);

}  // namespace dais::streams
