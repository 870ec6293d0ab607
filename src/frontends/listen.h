// Binding a listening socket and starting the I/O threads, shared by the HTTP/1.1 and the gRPC
// servers (both on Asio).
#pragma once

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <string>
#include <string_view>
#include <thread>

#include "dais/status.h"

namespace dais::frontends {

// Opens `acceptor` on address:port (port 0: a free one) with SO_REUSEADDR and listens.
// InvalidArgument for a malformed address, Unavailable (naming `what`, the address and the
// reason) when it cannot be bound.
inline Status Listen(boost::asio::ip::tcp::acceptor* acceptor, const std::string& address, int port,
                     std::string_view what) {
  namespace net = boost::asio;
  boost::system::error_code ec;
  auto addr = net::ip::make_address(address, ec);
  if (ec) return InvalidArgument("invalid " + std::string(what) + " address '" + address + "'");
  net::ip::tcp::endpoint ep(addr, static_cast<unsigned short>(port));
  acceptor->open(ep.protocol(), ec);
  if (!ec) acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor->bind(ep, ec);
  if (!ec) acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Unavailable("cannot listen for " + std::string(what) + " on " + address + ":" +
                       std::to_string(port) + ": " + ec.message());
  }
  return OkStatus();
}

// I/O threads for `configured` (0: one per core).
inline int IoThreads(int configured) {
  return configured > 0 ? configured
                        : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// Starts a server's I/O: Listen on impl->options.{address,port}, keep impl->ioc running
// (impl->work, an optional work guard), impl->Accept(), then IoThreads(impl->options.threads)
// threads into impl->threads running impl->ioc. Returns the bound port.
template <typename Impl>
StatusOr<int> StartServing(Impl* impl, std::string_view what) {
  RETURN_IF_ERROR(Listen(&impl->acceptor, impl->options.address, impl->options.port, what));
  const int port = impl->acceptor.local_endpoint().port();
  impl->work.emplace(impl->ioc.get_executor());
  impl->Accept();
  for (int i = 0; i < IoThreads(impl->options.threads); ++i) {
    impl->threads.emplace_back([impl] { impl->ioc.run(); });
  }
  return port;
}

}  // namespace dais::frontends
