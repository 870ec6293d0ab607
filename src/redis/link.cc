#include "redis/link.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ssl/context.hpp>
#include <utility>

#include "redis/resp.h"

namespace dais::redis {

namespace asio = boost::asio;
using boost::system::error_code;

void Link::Established() {
  established_ = true;
  deadline.cancel();
}

void Link::Close() {
  if (closed_) return;
  closed_ = true;
  error_code ignored;
  socket.close(ignored);
  resolver.cancel();
  deadline.cancel();
}

namespace {

// The TLS handshake over link->socket, then on_connected; `report` fails the attempt.
void StartTls(const std::shared_ptr<Link>& link, const std::string& address,
              const std::string& host, const ClientOptions& options,
              std::function<void()> on_connected, std::function<void(Status)> report) {
  SSL_CTX_up_ref(options.tls_context.get());  // the Asio context owns one reference
  asio::ssl::context context(options.tls_context.get());
  link->tls.emplace(link->socket, context);
  const std::string& name = options.tls.server_name.empty() ? host : options.tls.server_name;
  if (options.tls.verify) {
    if (Status s = tls::SetPeerName(link->tls->native_handle(), name); !s.ok()) {
      return report(Unavailable("redis " + address + ": " + std::string(s.message())));
    }
  }
  link->tls->async_handshake(
      asio::ssl::stream_base::client,
      [link, address, report, on_connected = std::move(on_connected)](error_code ec) {
        if (link->closed()) return;
        if (!ec) return on_connected();
        std::string why = ec.message();
        if (ec.category() == asio::error::get_ssl_category()) {
          why = tls::DescribeFailure(link->tls->native_handle(),
                                     static_cast<unsigned long>(ec.value()));
        }
        report(Unavailable("redis " + address + ": TLS handshake: " + why));
      });
}

}  // namespace

void Dial(const std::shared_ptr<Link>& link, const std::string& address,
          const ClientOptions& options, std::function<void()> on_connected,
          std::function<void(Status)> on_failed) {
  const std::chrono::milliseconds timeout = options.connect_timeout;
  // One copy of on_failed shared by the handlers that may fail the attempt.
  auto fail = std::make_shared<std::function<void(Status)>>(std::move(on_failed));
  auto report = [link, fail](Status why) {
    link->Close();
    (*fail)(std::move(why));
  };
  std::string host;
  uint16_t port = 0;
  if (Status s = SplitHostPort(address, &host, &port); !s.ok()) {
    return report(Unavailable("redis " + address + ": " + std::string(s.message())));
  }
  link->deadline.expires_after(timeout);
  link->deadline.async_wait([link, address, timeout, report](error_code ec) {
    // A cancelled wait whose handler was already queued still arrives without an error.
    if (ec || link->closed() || link->established()) return;
    report(Unavailable("redis " + address + ": connect timed out after " +
                       std::to_string(timeout.count()) + " ms"));
  });
  // Once connected: TLS first when configured (options outlives the attempt: its owner's).
  auto connected = [link, address, host, &options, report,
                    on_connected = std::move(on_connected)]() mutable {
    if (!options.tls_context) return on_connected();
    StartTls(link, address, host, options, std::move(on_connected), report);
  };
  link->resolver.async_resolve(
      host, std::to_string(port),
      [link, address, report, connected = std::move(connected)](
          error_code ec, asio::ip::tcp::resolver::results_type results) mutable {
        if (link->closed()) return;
        if (ec) return report(Unavailable("redis " + address + ": resolve: " + ec.message()));
        asio::async_connect(
            link->socket, results,
            [link, address, report, connected = std::move(connected)](
                error_code ec, const asio::ip::tcp::endpoint&) mutable {
              if (link->closed()) return;
              if (ec) {
                return report(Unavailable("redis " + address + ": connect: " + ec.message()));
              }
              error_code ignored;
              link->socket.set_option(asio::ip::tcp::no_delay(true), ignored);
              connected();
            });
      });
}

bool AppendAuth(const ClientOptions& options, std::string* out) {
  if (options.password.empty()) return false;
  Command auth = {"AUTH"};
  if (!options.username.empty()) auth.push_back(options.username);
  auth.push_back(options.password);
  AppendCommand(auth, out);
  return true;
}

bool IsAuthError(std::string_view error) {
  return error.starts_with("WRONGPASS") || error.starts_with("NOAUTH") ||
         error.starts_with("NOPERM") || error.find("AUTH") != std::string_view::npos;
}

Status AuthFailed(const std::string& address, std::string_view error) {
  return Status(StatusCode::kUnauthenticated,
                "redis " + address + ": authentication failed: " + std::string(error));
}

}  // namespace dais::redis
