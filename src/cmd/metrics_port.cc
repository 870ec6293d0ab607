#include "cmd/metrics_port.h"

#include "metrics/registry.h"

namespace dais::cmd {

std::unique_ptr<frontends::http::Server> MetricsServer(const std::string& address, int port,
                                                       ExtraRoute extra, int max_connections) {
  frontends::http::ServerOptions mo;
  mo.address = address;
  mo.port = port;
  mo.threads = 1;
  mo.listener = "metrics";
  mo.max_connections = max_connections;
  mo.max_body_bytes = 64 << 10;
  return std::make_unique<frontends::http::Server>(
      mo, [extra = std::move(extra)](frontends::http::Request r, frontends::http::Responder w) {
        if (r.method == "GET" && r.path == "/metrics") {
          return w({200,
                    "text/plain; version=0.0.4; charset=utf-8",
                    metrics::Registry::Global().Expose(),
                    {}});
        }
        if (r.method == "GET" && r.path == "/healthz") return w({200, "text/plain", "ok\n", {}});
        if (extra && extra(r, w)) return;
        w({404, "text/plain", "this port serves GET /metrics and /healthz\n", {}});
      });
}

}  // namespace dais::cmd
