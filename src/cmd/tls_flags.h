// TLS flags shared by the commands (docs/tls.md): one shape per listener, after tritonserver's
// gRPC flags (--grpc-use-ssl, --grpc-use-ssl-mutual, --grpc-server-cert, --grpc-server-key,
// --grpc-root-cert), the same for --http-* and --metrics-*; and the client flags of the Redis and
// etcd connections.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "dais/status.h"
#include "tls/config.h"
#include "tls/context.h"

namespace dais::cmd {

struct ListenerTlsFlags {
  bool use_ssl = false;
  bool mutual = false;
  std::string cert, key, root;
};

// Handshake limits and ciphers shared by every TLS listener of the process.
struct TlsCommonFlags {
  int handshake_timeout_ms = 10000;
  int max_handshakes = 256;
  std::string cipher_list;
};

// --<prefix>-use-ssl, --<prefix>-use-ssl-mutual, --<prefix>-server-cert, --<prefix>-server-key,
// --<prefix>-root-cert. `what` names the endpoint in the help ("the gRPC endpoint").
void AddListenerTlsFlags(CLI::App* app, const std::string& prefix, const std::string& what,
                         ListenerTlsFlags* flags);
void AddTlsCommonFlags(CLI::App* app, TlsCommonFlags* flags);

// The listener's TLS context (null when --<prefix>-use-ssl is off), registered for reload on
// SIGHUP and file changes. InvalidArgument naming the flag and the file when it cannot be used.
StatusOr<std::shared_ptr<tls::ServerContext>> ListenerTls(const std::string& prefix,
                                                          const ListenerTlsFlags& flags,
                                                          const TlsCommonFlags& common,
                                                          std::vector<std::string> alpn);

// --<prefix>-tls, --<prefix>-tls-ca, --<prefix>-tls-cert, --<prefix>-tls-key,
// --<prefix>-tls-server-name, --<prefix>-tls-insecure (a client's connections to `what`).
void AddClientTlsFlags(CLI::App* app, const std::string& prefix, const std::string& what,
                       tls::ClientConfig* config);

}  // namespace dais::cmd
