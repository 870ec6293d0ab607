// GET /metrics (Prometheus text of the global registry) and GET /healthz on a port of their own,
// for the roles that have no HTTP listener of their own (scheduler, archive).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "frontends/http/http_server.h"

namespace dais::cmd {

// Answers a request the port does not serve itself (true), or leaves it (false: 404).
using ExtraRoute =
    std::function<bool(const frontends::http::Request&, frontends::http::Responder&)>;

// Not started: call Start() (port 0 picks a free one: port() after Start).
// `max_connections`: open connections at once (a role serving more than scrapes on it, such as
// an agent's HTTP trigger, needs room for the calls waiting).
std::unique_ptr<frontends::http::Server> MetricsServer(const std::string& address, int port,
                                                       ExtraRoute extra = nullptr,
                                                       int max_connections = 64);

}  // namespace dais::cmd
