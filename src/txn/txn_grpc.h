// The coordinator's gRPC API (proto/txn.proto, service dais.txn.v1.Transactions): Place and Get,
// the same operations as the HTTP API, served by a frontends::grpc::H2Server.
#pragma once

#include "frontends/grpc/h2_connection.h"

namespace dais::txn {

class Coordinator;

// The method table for an H2Server; `coordinator` is borrowed.
frontends::grpc::MethodTable MakeTxnGrpcMethods(Coordinator* coordinator);

}  // namespace dais::txn
