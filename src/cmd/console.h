// `dais console`: the operator's web page for a cluster (docs/console.md). A role of its own,
// not a port of the scheduler: it can run where the operators are (or several of it), it
// restarts without touching placement, and a busy browser never slows the leader's decisions.
// It reads the control plane from an etcd watch and the live figures from the gateways' and
// nodes' /metrics (console_state.h), pushes both to the page as server-sent events, and takes
// the operator's actions (rollback, pause / resume / promote a rollout, cordon / uncordon /
// drain a node) from a bearer token whose role claim is admin, checked with the gateway's JWT
// verifier. Builds with gRPC only (etcd).
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace dais::cmd {

struct ConsoleCliOptions {
  std::vector<std::string> etcd;
  std::string http_address = "127.0.0.1";
  int http_port = 8090;
  std::string jwks;  // empty: read-only, every action refused
  std::string jwt_issuer;
  std::vector<std::string> jwt_audiences;
  std::string admin_claim = "role=admin";  // claim=value an action needs
  int scrape_ms = 1000;
  std::vector<std::string> scrape;  // more /metrics targets (a dais txn serve)
  std::string prometheus;           // host:port: the live figures and alerts from there
  double p1_p99_ms = 150;
  double p2_miss_ratio = 0.05;
};

CLI::App* AddConsoleCommand(CLI::App* app, ConsoleCliOptions* options);
int RunConsole(const ConsoleCliOptions& options);

}  // namespace dais::cmd
