// The coordinator's HTTP API (docs/transactions.md, "API"):
//   POST /v1/txn/<type>   body: the parameters as a JSON object; header Idempotency-Key optional
//   GET  /v1/txn/<txn_id> the logged outcome of a transaction
//   GET  /metrics, GET /health/live, GET /health/ready
#pragma once

#include "frontends/http/http_server.h"

namespace dais::txn {

class Coordinator;

// A handler for frontends::http::Server; `coordinator` is borrowed.
frontends::http::Handler MakeTxnHandler(Coordinator* coordinator);

}  // namespace dais::txn
