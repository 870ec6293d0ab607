// TLS on memory buffers: the transport reads and writes the socket, the Engine turns what was
// read into plaintext and plaintext into what to write. No I/O and no threads of its own, so it
// fits a connection that already owns its socket and locking (the gRPC server's Session) and is
// tested without sockets.
//
// Thread-safety: none; one connection's thread (or lock) at a time.
#pragma once

#include <openssl/ssl.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "dais/status.h"
#include "tls/context.h"

namespace dais::tls {

class Engine {
 public:
  // `server`: accepts the handshake; otherwise starts it (call Start) as a client.
  Engine(SslCtxPtr ctx, bool server);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Client side: the ClientHello, appended to *wire.
  Status Start(std::string* wire);
  // Feeds bytes received from the peer. Decrypted application bytes are appended to *plain,
  // bytes to send back (handshake messages, alerts) to *wire. An error: the handshake failed or
  // the records are broken (failure_reason() / failure_detail() say why; *wire may hold the
  // alert to send before closing).
  Status Receive(const uint8_t* data, size_t n, std::string* plain, std::string* wire);
  // Encrypts `plain` into *wire; before the handshake is done it waits and goes out with it.
  Status Send(std::string_view plain, std::string* wire);
  // A close_notify alert, appended to *wire.
  void Shutdown(std::string* wire);

  bool established() const { return established_; }
  // The handshake finished in the last Receive (true once).
  bool TakeJustEstablished() { return std::exchange(just_established_, false); }
  bool peer_closed() const { return peer_closed_; }
  std::string_view alpn() const;
  std::string_view failure_reason() const { return failure_reason_; }
  const std::string& failure_detail() const { return failure_detail_; }
  SSL* ssl() { return ssl_; }

 private:
  Status Fail(unsigned long error);
  void Drain(std::string* wire);
  Status Handshake(std::string* wire);

  SslCtxPtr ctx_;  // the generation this connection was made with (kept while it lives)
  SSL* ssl_;
  BIO* in_;   // owned by ssl_
  BIO* out_;  // owned by ssl_
  bool established_ = false;
  bool just_established_ = false;
  bool peer_closed_ = false;
  std::string waiting_;  // plaintext sent before the handshake finished
  std::string_view failure_reason_;
  std::string failure_detail_;
};

}  // namespace dais::tls
