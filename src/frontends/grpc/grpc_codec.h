// KServe v2 gRPC messages <-> dais requests and responses, and Status -> ::grpc::Status (the one
// place where that mapping happens for gRPC).
#pragma once

#include <grpcpp/support/status.h>

#include "dais/status.h"
#include "grpc_service.pb.h"
#include "runtime/inference_request.h"

namespace dais::frontends::grpc {

// dais's codes are gRPC's codes by construction.
::grpc::Status ToGrpcStatus(const Status& status);

// Fills `request` from `msg`. Inputs given as raw_input_contents borrow from `msg`, which must
// outlive the request; typed `contents` are converted into owned bytes. Mixing the two, a raw
// content count different from the input count, sizes that do not match shapes, unknown
// datatypes and bad parameters are InvalidArgument naming the input and the problem.
Status FromInferRequest(const inference::ModelInferRequest& msg,
                        runtime::InferenceRequest* request);

// Fills `msg` from a response: outputs in raw_output_contents.
void ToInferResponse(const runtime::InferenceResponse& response,
                     inference::ModelInferResponse* msg);

}  // namespace dais::frontends::grpc
