// memory_bench's gRPC search load: `concurrency` calls in flight, each on a connection of its own
// (as wrk's connections for the HTTP row), the queries taken in turn, for `seconds` after a
// one-second warm-up. A grpc++ client with one completion queue on one thread, in the bench's
// process (wrk, for HTTP, is a process of its own).
#pragma once

#include <cstdint>
#include <vector>

struct GrpcLoadResult {
  double qps = -1, p50_us = -1, p99_us = -1;
  int64_t errors = 0;  // calls that did not end OK
};

GrpcLoadResult GrpcSearchLoad(int port, const std::vector<float>& queries, int dim, int nq, int ef,
                              int concurrency, double seconds);
