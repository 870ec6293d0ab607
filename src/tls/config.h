// What a TLS endpoint or client is configured with (docs/tls.md). Plain structs: the flags of
// each command fill them, tls/context.h turns them into OpenSSL contexts.
#pragma once

#include <string>
#include <vector>

namespace dais::tls {

// A listener's TLS: its certificate chain and key, and for mutual TLS the CA that client
// certificates must chain to. TLS 1.2 and 1.3 only.
struct ServerConfig {
  std::string cert_file;  // PEM certificate chain (leaf first); empty: TLS is off
  std::string key_file;   // PEM private key of the leaf
  std::string ca_file;    // PEM CA certificate(s) client certificates are verified against
  bool require_client_cert = false;  // mutual TLS: no or an unverifiable client certificate fails
  // TLS 1.2 cipher list (OpenSSL syntax); empty: the default below (ECDHE with AES-GCM or
  // ChaCha20-Poly1305 only). TLS 1.3 uses OpenSSL's suites (all AEAD).
  std::string cipher_list;
  // Application protocols, most preferred first ("h2" for gRPC, "http/1.1" for HTTPS). A client
  // that offers ALPN without any of these is refused; one that offers none is accepted.
  std::vector<std::string> alpn;
  std::string listener;  // names the listener in logs and metrics ("http", "grpc", "metrics")
  int handshake_timeout_ms = 10000;  // a handshake not finished by then is closed
  int max_handshakes = 256;          // concurrent handshakes (see BeginHandshake)
  // A new connection's first byte must come within this when half the handshake slots or more
  // are taken (otherwise within handshake_timeout_ms).
  int first_byte_timeout_under_pressure_ms = 1000;

  bool enabled() const { return !cert_file.empty(); }
};

// A client's TLS (Redis, etcd, the gateway's connections to nodes, dais perf).
struct ClientConfig {
  bool enabled = false;
  std::string ca_file;    // PEM CA certificate(s) to verify the server; empty: the system's
  std::string cert_file;  // client certificate for mutual TLS (with key_file)
  std::string key_file;
  // Name checked against the server certificate and sent as SNI; empty: the host dialled.
  std::string server_name;
  bool verify = true;  // false: encrypt without verifying the server (tests, never production)

  // On when asked for, or when a CA or a client certificate is given.
  bool active() const { return enabled || !ca_file.empty() || !cert_file.empty(); }
};

inline constexpr const char* kDefaultCipherList =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

}  // namespace dais::tls
