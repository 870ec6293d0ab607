// `dais archive`: archives a stream (the feedback stream, txn's event streams) into the offline
// store's day-partitioned layout, exactly once across crashes (streams/archiver.h,
// docs/learning-loop.md).
#pragma once

#include <string>

#include "streams/archiver.h"
#include "tls/config.h"

namespace CLI {
class App;
}

namespace dais::cmd {

struct ArchiveCliOptions {
  std::string redis = "127.0.0.1:6379";
  tls::ClientConfig redis_tls;
  streams::ArchiverOptions archiver;
};

CLI::App* AddArchiveCommand(CLI::App* app, ArchiveCliOptions* options);
int RunArchive(const ArchiveCliOptions& options);

}  // namespace dais::cmd
