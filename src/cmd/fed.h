// `dais fed serve` (the aggregator) and `dais fed join` (an edge trainer): federated learning of
// a TorchScript model (docs/federated.md). The rounds are fed/aggregator.h; LibTorch training
// is learn/torch_fed.h; the service is proto/fed.proto on dais's gRPC transport, with TLS and
// mutual TLS from the listener flags.
#pragma once

#include <cstdint>
#include <string>

#include "cmd/tls_flags.h"
#include "tls/config.h"

namespace CLI {
class App;
}

namespace dais::cmd {

struct FedServeOptions {
  std::string config;      // federation.yaml, or:
  std::string federation;  // ... the one `dais ctl apply` wrote to --etcd
  std::string state_dir;   // the rounds' state: resumed from after a crash
  std::string address = "0.0.0.0";
  int port = 8011;
  ListenerTlsFlags tls;
  TlsCommonFlags tls_common;
  int retry_after_ms = 200;  // how soon a waiting trainer polls again
  std::string etcd;          // with --federation, or release.strategy canary: the cluster's etcd
};

struct FedJoinOptions {
  std::string aggregator;  // host:port
  std::string federation;
  std::string client;
  std::string data;  // dt=*/*.jsonl.gz rows {"x": [...], "y": c}
  tls::ClientConfig tls;
  bool int8 = false;        // 8-bit updates (plain aggregation only)
  int64_t delay_ms = 0;     // wait this long before sending each update (a slow device)
  int64_t give_up_s = 300;  // exit 1 after this long without reaching the aggregator
};

struct FedCliOptions {
  FedServeOptions serve;
  FedJoinOptions join;
  CLI::App* serve_cmd = nullptr;
  CLI::App* join_cmd = nullptr;
};

CLI::App* AddFedCommand(CLI::App* app, FedCliOptions* options);
// The parsed subcommand's exit status.
int RunFed(const FedCliOptions& options);
// 0: all rounds done; 1: failed; 2: a bad spec or flags.
int RunFedServe(const FedServeOptions& options);
// 0: the federation is done; 1: gave up (unreachable, refused); 2: bad flags or data.
int RunFedJoin(const FedJoinOptions& options);

}  // namespace dais::cmd
