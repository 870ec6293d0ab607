// KServe v2 over gRPC with the generated synchronous stub (inference::GRPCInferenceService):
// sessions share a few channels (each its own HTTP/2 connection); requests carry their tensors
// in raw_input_contents. Built only with DAIS_WITH_GRPC.
#pragma once

#include <memory>

#include "perf/client.h"

namespace dais::perf {

StatusOr<std::unique_ptr<Client>> MakeGrpcClient(const ClientOptions& options);

}  // namespace dais::perf
