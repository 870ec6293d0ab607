// OpenSSL contexts for dais's listeners and clients.
//
// ServerContext holds the current generation of a listener's SSL_CTX. A new connection takes the
// current one (shared_ptr) and keeps it for its lifetime, so Reload() swaps certificates for new
// connections while open ones go on with theirs: nothing is dropped. A reload that fails (a
// missing file, a key that does not match, a certificate not valid yet or expired) keeps the old
// generation, logs why and counts it.
//
// Metrics (docs/metrics.md): dais_tls_handshakes_total{listener},
// dais_tls_handshake_failures_total{listener,reason}, dais_tls_certificate_expiry_timestamp_seconds
// {listener}, dais_tls_certificate_reloads_total{listener,result}, dais_tls_handshakes_in_progress
// {listener}.
//
// Thread-safety: every method is thread-safe.
#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <string_view>

#include "common/mutex.h"
#include "dais/status.h"
#include "tls/config.h"

namespace dais::tls {

using SslCtxPtr = std::shared_ptr<SSL_CTX>;

// Why a handshake failed, as a metric label: not_tls (plain text on a TLS port), http_request
// (plain HTTP on a TLS port), no_client_certificate, unknown_ca, certificate_expired,
// certificate_not_yet_valid, bad_certificate, peer_rejected_certificate (the peer's alert about
// ours), protocol_version, no_shared_cipher, alpn, timeout, closed (the peer went away), other.
std::string_view FailureReason(SSL* ssl, unsigned long error);
// A sentence for logs: the reason and OpenSSL's own words.
std::string DescribeFailure(SSL* ssl, unsigned long error);

class ServerContext {
 public:
  // Loads the files; InvalidArgument naming the file and what is wrong with it.
  static StatusOr<std::shared_ptr<ServerContext>> Create(ServerConfig config);
  ~ServerContext();

  // The generation a new connection uses.
  SslCtxPtr Current() const;
  // Reads the files again; on success new connections use them, else the old ones stay (logged,
  // counted). `why` names the trigger in the log ("SIGHUP", "file change").
  Status Reload(std::string_view why);
  // Reloads when a file's modification time or size changed since the last attempt.
  void ReloadIfChanged();

  // One connection's handshake, admitted by BeginHandshake. It is silent until Heard (the
  // client's first byte); Done or Failed end it (the first of them counts; ending an evicted one
  // does nothing). Destroyed unended: counted as failed ("closed"). Called by the connection
  // that owns it (one thread at a time).
  class Handshake {
   public:
    ~Handshake();
    Handshake(const Handshake&) = delete;
    Handshake& operator=(const Handshake&) = delete;
    void Heard();
    void Done();
    // Counts `reason` and logs `detail` (rate-limited).
    void Failed(std::string_view reason, const std::string& peer, const std::string& detail);

   private:
    friend class ServerContext;
    Handshake(ServerContext* ctx, std::function<void()> evict)
        : ctx_(ctx), evict_(std::move(evict)) {}
    ServerContext* ctx_;
    std::function<void()> evict_;  // guarded by ctx_->hs_mu_, as the two below
    bool silent_ = true;
    bool ended_ = false;
    std::list<Handshake*>::iterator pos_;
  };

  // Admits a handshake. At max_handshakes the oldest silent one (no byte received) is closed
  // for it: its `evict` is called (from this thread; it must only schedule the close) and it is
  // counted as reason "evicted" (issue 32: ~260 connections that never sent a ClientHello held
  // every slot for 10 s each). Null when every running handshake has heard from its client (the
  // caller closes the connection; counted as reason "handshake_limit").
  std::unique_ptr<Handshake> BeginHandshake(std::function<void()> evict);
  // How long a new connection may stay silent: handshake_timeout_ms, or under pressure (half the
  // slots taken) first_byte_timeout_under_pressure_ms. A silent one closed by it is counted as
  // reason "silent_timeout".
  int FirstByteTimeoutMs() const;

  const ServerConfig& config() const { return config_; }

 private:
  struct Metrics;
  explicit ServerContext(ServerConfig config);
  std::string FileStamp() const;

  const ServerConfig config_;
  Metrics* metrics_;
  // Ends `h` (hs_mu_ held): the count and the gauge; false if it had ended.
  bool EndLocked(Handshake* h) DAIS_REQUIRES(hs_mu_);

  std::atomic<int> handshakes_{0};
  Mutex hs_mu_;
  std::list<Handshake*> silent_ DAIS_GUARDED_BY(hs_mu_);  // oldest first
  mutable Mutex mu_;
  SslCtxPtr current_ DAIS_GUARDED_BY(mu_);
  std::string stamp_ DAIS_GUARDED_BY(mu_);  // the files' mtimes and sizes at the last attempt
};

// A client context: the server is verified against config.ca_file (or the system's CAs), the
// client presents config.cert_file when set. InvalidArgument naming a bad file.
StatusOr<SslCtxPtr> MakeClientContext(const ClientConfig& config);
// The PEM texts of a client's CA, certificate and key files ("" where none is given; the key
// defaults to the certificate file), for libraries that take PEM strings (grpc++'s
// SslCredentialsOptions). InvalidArgument naming an unreadable file.
struct PemTexts {
  std::string ca, cert, key;
};
StatusOr<PemTexts> ReadPemFiles(const ClientConfig& config);

// Sets SNI and the name (DNS name or IP address) the server certificate must carry on `ssl`.
Status SetPeerName(SSL* ssl, const std::string& host);

// The notAfter of the leaf certificate in `ctx` as Unix seconds (0 when there is none).
double CertificateExpiry(SSL_CTX* ctx);

// A TLS client on a plain-text port (its first byte is a TLS handshake record): counted as
// dais_tls_handshake_failures_total{listener, reason="tls_on_plain_port"}.
void CountTlsOnPlainPort(const std::string& listener);

// Reads every pending OpenSSL error into one line ("" when none).
std::string OpenSslErrors();

}  // namespace dais::tls
