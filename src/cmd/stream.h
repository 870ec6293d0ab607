// `dais stream tail STREAM --redis HOST:PORT`: prints the entries of a Redis stream as they
// arrive, one line each (the feedback stream's record JSON; other streams' fields as JSON).
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace dais::cmd {

struct StreamCliOptions {
  std::string redis = "127.0.0.1:6379";
  std::string stream;
  std::string from = "$";   // "$": new entries only; "0": from the start; or an entry id
  int count = 0;            // stop after this many entries (0: never)
  double timeout_secs = 0;  // stop after this long (0: never)
};

CLI::App* AddStreamCommand(CLI::App* app, StreamCliOptions* options);
int RunStream(CLI::App* command, const StreamCliOptions& options);

}  // namespace dais::cmd
