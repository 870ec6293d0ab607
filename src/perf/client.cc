#include "perf/client.h"

#include "perf/http_client.h"
#if DAIS_PERF_WITH_GRPC
#include "perf/grpc_client.h"
#endif

namespace dais::perf {

StatusOr<std::unique_ptr<Client>> MakeClient(const ClientOptions& given) {
  ClientOptions options = given;
  if (options.tls.active() && !options.tls_context) {
    auto ctx = tls::MakeClientContext(options.tls);
    if (!ctx.ok()) return InvalidArgument("TLS: " + std::string(ctx.status().message()));
    options.tls_context = *ctx;
  }
  if (options.protocol == "grpc") {
#if DAIS_PERF_WITH_GRPC
    return MakeGrpcClient(options);
#else
    return Unimplemented("this dais was built without gRPC (DAIS_WITH_GRPC=OFF): use -i http");
#endif
  }
  return MakeHttpClient(options);
}

}  // namespace dais::perf
