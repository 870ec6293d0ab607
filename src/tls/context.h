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

  // Handshake admission and accounting. Begin: false when max_handshakes are already running
  // (the caller closes the connection; counted as reason "handshake_limit").
  bool BeginHandshake();
  void HandshakeDone();
  // Ends a failed handshake: counts `reason` and logs `detail` (rate-limited).
  void HandshakeFailed(std::string_view reason, const std::string& peer, const std::string& detail);

  const ServerConfig& config() const { return config_; }

 private:
  struct Metrics;
  explicit ServerContext(ServerConfig config);
  std::string FileStamp() const;

  const ServerConfig config_;
  Metrics* metrics_;
  std::atomic<int> handshakes_{0};
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
