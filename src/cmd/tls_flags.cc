#include "cmd/tls_flags.h"

#include "tls/reloader.h"

namespace dais::cmd {

void AddListenerTlsFlags(CLI::App* app, const std::string& prefix, const std::string& what,
                         ListenerTlsFlags* f) {
  const std::string p = "--" + prefix;
  app->add_option(p + "-use-ssl", f->use_ssl,
                  "Serve " + what + " over TLS (1.2 and 1.3) with " + p + "-server-cert and " + p +
                      "-server-key.")
      ->capture_default_str();
  app->add_option(p + "-use-ssl-mutual", f->mutual,
                  "Mutual TLS on " + what + ": clients must present a certificate signed by " + p +
                      "-root-cert (implies " + p + "-use-ssl).")
      ->capture_default_str();
  app->add_option(p + "-server-cert", f->cert,
                  "PEM certificate chain of " + what +
                      " (leaf first). Reloaded on SIGHUP and "
                      "when the file changes; a bad new one is refused and the old one kept.");
  app->add_option(p + "-server-key", f->key, "PEM private key of " + p + "-server-cert.");
  app->add_option(p + "-root-cert", f->root,
                  "PEM CA certificate(s) client certificates are verified against (mutual TLS).");
}

void AddTlsCommonFlags(CLI::App* app, TlsCommonFlags* f) {
  app->add_option("--tls-handshake-timeout-ms", f->handshake_timeout_ms,
                  "A TLS handshake not finished within this is closed (counted as reason "
                  "timeout).")
      ->capture_default_str()
      ->check(CLI::Range(100, 600000));
  app->add_option("--tls-max-handshakes", f->max_handshakes,
                  "TLS handshakes running at once per listener; new connections beyond are "
                  "closed at once (reason handshake_limit), so that a flood of half-open "
                  "handshakes cannot take the I/O threads from established connections.")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app->add_option("--tls-cipher-list", f->cipher_list,
                  "TLS 1.2 cipher list in OpenSSL's syntax. Default: ECDHE with AES-GCM or "
                  "ChaCha20-Poly1305 only (TLS 1.3 suites are all AEAD).");
}

StatusOr<std::shared_ptr<tls::ServerContext>> ListenerTls(const std::string& prefix,
                                                          const ListenerTlsFlags& f,
                                                          const TlsCommonFlags& common,
                                                          std::vector<std::string> alpn) {
  const std::string p = "--" + prefix;
  if (!f.use_ssl && !f.mutual) {
    if (!f.cert.empty() || !f.key.empty()) {
      return InvalidArgument(p + "-server-cert / -server-key given without " + p + "-use-ssl");
    }
    return std::shared_ptr<tls::ServerContext>();
  }
  if (f.cert.empty() || f.key.empty()) {
    return InvalidArgument(p + "-use-ssl needs " + p + "-server-cert and " + p + "-server-key");
  }
  if (f.mutual && f.root.empty()) {
    return InvalidArgument(p + "-use-ssl-mutual needs " + p + "-root-cert");
  }
  tls::ServerConfig c;
  c.cert_file = f.cert;
  c.key_file = f.key;
  c.ca_file = f.root;
  c.require_client_cert = f.mutual;
  c.cipher_list = common.cipher_list;
  c.alpn = std::move(alpn);
  c.listener = prefix;
  c.handshake_timeout_ms = common.handshake_timeout_ms;
  c.max_handshakes = common.max_handshakes;
  auto ctx = tls::ServerContext::Create(std::move(c));
  if (!ctx.ok()) return InvalidArgument(p + "-use-ssl: " + std::string(ctx.status().message()));
  tls::WatchForReload(*ctx);
  return ctx;
}

void AddClientTlsFlags(CLI::App* app, const std::string& prefix, const std::string& what,
                       tls::ClientConfig* c) {
  const std::string p = "--" + prefix + "-tls";
  app->add_flag(p, c->enabled, "Connect to " + what + " over TLS.");
  app->add_option(p + "-ca", c->ca_file,
                  "PEM CA certificate(s) " + what +
                      "'s certificate must chain to (default: "
                      "the system's). Implies " +
                      p + ".");
  app->add_option(p + "-cert", c->cert_file,
                  "PEM client certificate for mutual TLS with " + what + ". Implies " + p + ".");
  app->add_option(p + "-key", c->key_file, "PEM private key of " + p + "-cert.");
  app->add_option(p + "-server-name", c->server_name,
                  "Name " + what +
                      "'s certificate must carry, sent as SNI (default: the host "
                      "connected to).");
  app->add_flag("!" + p + "-insecure", c->verify,
                "Do not verify " + what +
                    "'s certificate (encrypts only; for tests, never for "
                    "production).");
}

}  // namespace dais::cmd
