// `dais memory`: the vector memory of a server or gateway from the command line (docs/memory.md):
//   dais memory create -f items.yaml           create a collection (JSON or YAML spec)
//   dais memory load items vectors.jsonl       upsert a file of points in batches, with progress
//   dais memory search items --vector 0.1,...  the nearest points as a table (or --json)
//   dais memory stats [items]                  collections: points, memory, dimension, metric
//   dais memory drop items
// All talk HTTP to --url (default http://127.0.0.1:8000).
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace dais::cmd {

struct MemoryCliOptions {
  std::string url = "http://127.0.0.1:8000";
  std::string token;  // Authorization: Bearer (through a gateway)
  std::string spec_file;
  std::string collection;
  std::string points_file;
  int batch = 1000;
  std::string vector;  // comma-separated
  int k = 10;
  std::string filter;  // JSON
  double min_score = 0;
  bool has_min_score = false;
  bool json = false;
};

CLI::App* AddMemoryCommand(CLI::App* app, MemoryCliOptions* options);
int RunMemory(CLI::App* command, const MemoryCliOptions& options);

}  // namespace dais::cmd
