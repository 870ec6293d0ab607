// `dais archive`: archives a stream (the feedback stream, txn's event streams) into the offline
// store's day-partitioned layout, exactly once across crashes (streams/archiver.h,
// docs/learning-loop.md).
#pragma once

#include <string>

#include "streams/archive_compact.h"
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
  int metrics_port = -1;
  std::string metrics_address = "127.0.0.1";
  streams::CompactOptions compact;  // `dais archive compact`
};

CLI::App* AddArchiveCommand(CLI::App* app, ArchiveCliOptions* options);
int RunArchive(const ArchiveCliOptions& options, CLI::App* command);

}  // namespace dais::cmd
