// Certificate reload for every TLS listener of the process: on SIGHUP, and when a listener's
// certificate, key or CA file changes (checked every second). A reload that fails keeps the old
// certificate (tls/context.h). Open connections are never touched.
#pragma once

#include <memory>

#include "tls/context.h"

namespace dais::tls {

// Registers `context` (held weakly) and, on the first call, installs the SIGHUP handler and
// starts the watching thread (detached; it lives as long as the process).
void WatchForReload(const std::shared_ptr<ServerContext>& context);

}  // namespace dais::tls
