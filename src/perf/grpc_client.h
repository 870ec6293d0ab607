// KServe v2 over gRPC: control calls (metadata, configuration, statistics) through the
// generated synchronous stub; inference calls on one lean HTTP/2 connection per session
// (grpc_h2.h), or with --grpc-stub through the stub, sessions sharing a few channels. Requests
// carry their tensors in raw_input_contents. Built only with DAIS_WITH_GRPC.
#pragma once

#include <memory>

#include "perf/client.h"

namespace dais::perf {

StatusOr<std::unique_ptr<Client>> MakeGrpcClient(const ClientOptions& options);

}  // namespace dais::perf
