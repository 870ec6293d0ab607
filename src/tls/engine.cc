#include "tls/engine.h"

#include <openssl/err.h>

#include <utility>

namespace dais::tls {

Engine::Engine(SslCtxPtr ctx, bool server) : ctx_(std::move(ctx)), ssl_(SSL_new(ctx_.get())) {
  in_ = BIO_new(BIO_s_mem());
  out_ = BIO_new(BIO_s_mem());
  BIO_set_mem_eof_return(in_, -1);  // "no data yet", not end of stream
  SSL_set_bio(ssl_, in_, out_);
  if (server) {
    SSL_set_accept_state(ssl_);
  } else {
    SSL_set_connect_state(ssl_);
  }
}

Engine::~Engine() { SSL_free(ssl_); }

std::string_view Engine::alpn() const {
  const unsigned char* p = nullptr;
  unsigned int n = 0;
  SSL_get0_alpn_selected(ssl_, &p, &n);
  return {reinterpret_cast<const char*>(p), n};
}

void Engine::Drain(std::string* wire) {
  const size_t pending = BIO_ctrl_pending(out_);
  if (pending == 0) return;
  const size_t at = wire->size();
  wire->resize(at + pending);
  const int n = BIO_read(out_, wire->data() + at, static_cast<int>(pending));
  wire->resize(at + (n > 0 ? static_cast<size_t>(n) : 0));
}

Status Engine::Fail(unsigned long error) {
  failure_reason_ = FailureReason(ssl_, error);
  failure_detail_ = DescribeFailure(ssl_, error);
  ERR_clear_error();
  return Unavailable("TLS: " + failure_detail_);
}

Status Engine::Handshake(std::string* wire) {
  ERR_clear_error();
  const int r = SSL_do_handshake(ssl_);
  Drain(wire);
  if (r == 1) {
    established_ = just_established_ = true;
    if (!waiting_.empty()) {
      std::string w = std::move(waiting_);
      waiting_.clear();
      return Send(w, wire);
    }
    return OkStatus();
  }
  const int e = SSL_get_error(ssl_, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return OkStatus();
  return Fail(ERR_peek_last_error());
}

Status Engine::Start(std::string* wire) { return Handshake(wire); }

Status Engine::Receive(const uint8_t* data, size_t n, std::string* plain, std::string* wire) {
  if (n > 0 && BIO_write(in_, data, static_cast<int>(n)) != static_cast<int>(n)) {
    return Internal("TLS: cannot buffer received bytes");
  }
  if (!established_) {
    RETURN_IF_ERROR(Handshake(wire));
    if (!established_) return OkStatus();
  }
  for (;;) {
    // Into a scratch buffer, then appended: growing *plain by a record's worth first would
    // zero-fill 16 KiB per call.
    char buf[16384];
    ERR_clear_error();
    const int r = SSL_read(ssl_, buf, sizeof(buf));
    if (r > 0) {
      plain->append(buf, static_cast<size_t>(r));
      // Nothing more buffered: done, without the extra SSL_read that would say WANT_READ.
      if (BIO_ctrl_pending(in_) == 0 && SSL_pending(ssl_) == 0) {
        Drain(wire);
        return OkStatus();
      }
      continue;
    }
    const int e = SSL_get_error(ssl_, r);
    Drain(wire);  // session tickets, key updates
    if (e == SSL_ERROR_WANT_READ) return OkStatus();
    if (e == SSL_ERROR_ZERO_RETURN) {
      peer_closed_ = true;
      return OkStatus();
    }
    return Fail(ERR_peek_last_error());
  }
}

Status Engine::Send(std::string_view plain, std::string* wire) {
  if (!established_) {
    waiting_.append(plain);
    return OkStatus();
  }
  while (!plain.empty()) {
    ERR_clear_error();
    const int r =
        SSL_write(ssl_, plain.data(), static_cast<int>(std::min<size_t>(plain.size(), 1 << 30)));
    if (r <= 0) return Fail(ERR_peek_last_error());
    plain.remove_prefix(static_cast<size_t>(r));
    Drain(wire);
  }
  return OkStatus();
}

void Engine::Shutdown(std::string* wire) {
  ERR_clear_error();
  if (established_) SSL_shutdown(ssl_);
  Drain(wire);
}

}  // namespace dais::tls
