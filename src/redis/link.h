// The transport under every Redis connection, shared by Connection (pipelined requests) and
// Subscriber (pub/sub) so that it is written once: one connect attempt's socket and buffers
// (Link), resolve + connect under a deadline that also covers the caller's handshake (Dial), and
// the AUTH that opens every handshake. TLS lives here too (the Link's stream and the handshake at
// the end of Dial), not in its users.
//
// Thread-safety: none. A Link lives on one io_context, and Dial and Link's methods are called on
// the thread that runs it. Dial's handlers hold the Link (shared_ptr); after Close() they call
// nothing.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dais/status.h"
#include "redis/options.h"

namespace dais::redis {

// One connect attempt. Its owner keeps the current one and makes every handler check that it is
// still current, so that a stale completion (after a reconnect) never touches the next attempt.
struct Link {
  explicit Link(boost::asio::io_context* io) : socket(*io), resolver(*io), deadline(*io) {}
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  // The handshake is done: Dial's deadline no longer applies.
  void Established();
  // Final: closes the socket, cancels the resolve and the deadline. Idempotent.
  void Close();
  bool established() const { return established_; }
  bool closed() const { return closed_; }

  // Reads / writes (all of `buffers`) on the socket, through TLS when there is.
  template <class Buffers, class Handler>
  void ReadSome(const Buffers& buffers, Handler&& handler) {
    if (tls) return tls->async_read_some(buffers, std::forward<Handler>(handler));
    socket.async_read_some(buffers, std::forward<Handler>(handler));
  }
  template <class Buffers, class Handler>
  void Write(const Buffers& buffers, Handler&& handler) {
    if (tls) return boost::asio::async_write(*tls, buffers, std::forward<Handler>(handler));
    boost::asio::async_write(socket, buffers, std::forward<Handler>(handler));
  }

  boost::asio::ip::tcp::socket socket;
  boost::asio::ip::tcp::resolver resolver;
  boost::asio::steady_timer deadline;  // armed by Dial
  // With TLS: the session over `socket`, made by Dial; reads and writes go through it.
  std::optional<boost::asio::ssl::stream<boost::asio::ip::tcp::socket&>> tls;
  std::vector<char> read_buf = std::vector<char>(64 * 1024);
  std::string writing;  // the buffer of the write in flight (owned here: it must outlive it)

 private:
  bool established_ = false;
  bool closed_ = false;
};

// Closes the owner's current link, if any, and forgets it: its pending handlers then see that it
// is no longer current.
inline void DropLink(std::shared_ptr<Link>* link) {
  if (*link) (*link)->Close();
  link->reset();
}

// Resolves `address` ("host:port"), connects link->socket (TCP_NODELAY), with
// options.tls_context runs the TLS handshake (the server's name checked), and arms
// link->deadline for options.connect_timeout, which covers all of it and the caller's handshake
// until it calls
// link->Established(). Calls `on_connected` once the TCP connection is up, then the caller writes
// its handshake (AppendAuth first). Calls `on_failed` at most once, after closing the link, with
// Unavailable "redis <address>: resolve: ..." / "connect: ..." / "connect timed out after <n>
// ms" / "TLS handshake: <reason>" (the deadline may pass after on_connected, during the
// handshake). Nothing is called after link->Close().
void Dial(const std::shared_ptr<Link>& link, const std::string& address,
          const ClientOptions& options, std::function<void()> on_connected,
          std::function<void(Status)> on_failed);

// Appends AUTH [username] password to *out when options.password is set; returns whether it did.
bool AppendAuth(const ClientOptions& options, std::string* out);
// An error reply that means the credentials were refused or are missing (WRONGPASS, NOAUTH,
// NOPERM, or one that names AUTH).
bool IsAuthError(std::string_view error);
// Unauthenticated "redis <address>: authentication failed: <error>".
Status AuthFailed(const std::string& address, std::string_view error);

}  // namespace dais::redis
