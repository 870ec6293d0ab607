// KServe v2 over HTTP/1.1 with Boost.Beast's synchronous API: one keep-alive connection per
// session (so per load thread) plus one for control calls. Beast stays inside http_client.cc.
#pragma once

#include <memory>

#include "perf/client.h"

namespace dais::perf {

// Resolves the host once; connections are opened on first use. Unavailable if the host does
// not resolve.
StatusOr<std::unique_ptr<Client>> MakeHttpClient(const ClientOptions& options);

}  // namespace dais::perf
