// Vector memory over gRPC: dais.memory.v1.Memory (proto/memory.proto) on the gRPC port, over the
// same memory::MemoryService and rules as the HTTP API (docs/memory.md).
#pragma once

#include "frontends/grpc/h2_connection.h"
#include "memory/memory_service.h"

namespace dais::frontends::grpc {

inline constexpr const char* kMemoryService = "/dais.memory.v1.Memory/";

// Adds Upsert, Delete, Get and Search to `table`, served by `service` (borrowed).
void AddMemoryMethods(MethodTable& table, memory::MemoryService* service);

}  // namespace dais::frontends::grpc
