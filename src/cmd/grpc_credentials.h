// grpc++'s channel credentials from a client's TLS flags (tls_flags.h AddClientTlsFlags), for
// the commands that call a gRPC service with grpc++ (dais txn's gates, dais fed join).
#pragma once

#include <memory>

#include "dais/status.h"
#include "tls/config.h"

namespace grpc {
class ChannelCredentials;
}

namespace dais::cmd {

// TLS with the CA (and, for mutual TLS, the client certificate and key) of `config`; plain text
// when no TLS flag was given. InvalidArgument naming an unreadable file.
StatusOr<std::shared_ptr<grpc::ChannelCredentials>> GrpcClientCredentials(
    const tls::ClientConfig& config);

}  // namespace dais::cmd
