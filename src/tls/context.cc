#include "tls/context.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <ctime>
#include <fstream>
#include <iterator>

#include "common/logging.h"
#include "metrics/registry.h"

namespace dais::tls {

namespace {

Status FileError(const std::string& what, const std::string& file) {
  return InvalidArgument(what + " '" + file + "': " + OpenSslErrors());
}

// The leaf's validity now: OkStatus, or InvalidArgument saying it expired / is not valid yet.
Status CheckValidity(SSL_CTX* ctx, const std::string& file) {
  X509* leaf = SSL_CTX_get0_certificate(ctx);
  if (leaf == nullptr) return InvalidArgument("no certificate in '" + file + "'");
  if (X509_cmp_current_time(X509_get0_notBefore(leaf)) > 0) {
    return InvalidArgument("certificate '" + file + "' is not valid yet (notBefore is ahead)");
  }
  if (X509_cmp_current_time(X509_get0_notAfter(leaf)) < 0) {
    return InvalidArgument("certificate '" + file + "' has expired");
  }
  return OkStatus();
}

// ALPN wire format: length-prefixed names.
std::string AlpnWire(const std::vector<std::string>& protocols) {
  std::string wire;
  for (const auto& p : protocols) {
    wire.push_back(static_cast<char>(p.size()));
    wire += p;
  }
  return wire;
}

// Picks the first of the server's protocols the client offers; a client that offers ALPN
// without any of them gets the no_application_protocol alert.
int SelectAlpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
               unsigned int inlen, void* arg) {
  const auto* server = static_cast<const std::string*>(arg);
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(
          &selected, outlen, reinterpret_cast<const unsigned char*>(server->data()),
          static_cast<unsigned>(server->size()), in, inlen) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

StatusOr<SslCtxPtr> BuildServerContext(const ServerConfig& c) {
  ERR_clear_error();
  SSL_CTX* raw = SSL_CTX_new(TLS_server_method());
  if (raw == nullptr) return Internal("SSL_CTX_new: " + OpenSslErrors());
  auto alpn = std::make_shared<std::string>(AlpnWire(c.alpn));
  SslCtxPtr ctx(raw, [alpn](SSL_CTX* p) { SSL_CTX_free(p); });
  SSL_CTX_set_min_proto_version(raw, TLS1_2_VERSION);
  SSL_CTX_set_options(
      raw, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(raw, SSL_MODE_RELEASE_BUFFERS);
  const std::string ciphers = c.cipher_list.empty() ? kDefaultCipherList : c.cipher_list;
  if (SSL_CTX_set_cipher_list(raw, ciphers.c_str()) != 1) {
    return InvalidArgument("TLS cipher list '" + ciphers + "': " + OpenSslErrors());
  }
  if (SSL_CTX_use_certificate_chain_file(raw, c.cert_file.c_str()) != 1) {
    return FileError("cannot read the certificate chain", c.cert_file);
  }
  if (SSL_CTX_use_PrivateKey_file(raw, c.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    if (ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH) {
      return FileError("cannot read the private key", c.key_file);
    }
    ERR_clear_error();
  }
  if (SSL_CTX_check_private_key(raw) != 1) {
    return InvalidArgument("private key '" + c.key_file + "' does not match certificate '" +
                           c.cert_file + "'");
  }
  RETURN_IF_ERROR(CheckValidity(raw, c.cert_file));
  if (!c.ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(raw, c.ca_file.c_str(), nullptr) != 1) {
      return FileError("cannot read the CA certificate(s)", c.ca_file);
    }
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(c.ca_file.c_str());
    if (names == nullptr) return FileError("no CA certificate in", c.ca_file);
    SSL_CTX_set_client_CA_list(raw, names);
  } else if (c.require_client_cert) {
    return InvalidArgument("mutual TLS needs the CA of the client certificates (root cert)");
  }
  if (c.require_client_cert) {
    SSL_CTX_set_verify(raw, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  } else if (!c.ca_file.empty()) {
    SSL_CTX_set_verify(raw, SSL_VERIFY_PEER, nullptr);  // a certificate, if sent, must verify
  }
  static const unsigned char kSessionContext[] = "dais";
  SSL_CTX_set_session_id_context(raw, kSessionContext, sizeof(kSessionContext) - 1);
  if (!alpn->empty()) SSL_CTX_set_alpn_select_cb(raw, SelectAlpn, alpn.get());
  return ctx;
}

std::string Stamp(const std::string& file) {
  if (file.empty()) return "-";
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return "missing";
  return std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + ":" +
         std::to_string(st.st_size) + ":" + std::to_string(st.st_ino);
}

}  // namespace

std::string OpenSslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

std::string_view FailureReason(SSL* ssl, unsigned long error) {
  if (error == 0) return "closed";
  if (ERR_GET_LIB(error) != ERR_LIB_SSL) return "other";
  switch (ERR_GET_REASON(error)) {
    case SSL_R_HTTP_REQUEST:
    case SSL_R_HTTPS_PROXY_REQUEST:
      return "http_request";
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_UNKNOWN_PROTOCOL:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
    case SSL_R_RECORD_LENGTH_MISMATCH:
      return "not_tls";
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
      return "no_client_certificate";
    case SSL_R_CERTIFICATE_VERIFY_FAILED: {
      switch (ssl ? SSL_get_verify_result(ssl) : X509_V_OK) {
        case X509_V_ERR_CERT_HAS_EXPIRED:
          return "certificate_expired";
        case X509_V_ERR_CERT_NOT_YET_VALID:
          return "certificate_not_yet_valid";
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
        case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
        case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
        case X509_V_ERR_CERT_UNTRUSTED:
        case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
          return "unknown_ca";
        case X509_V_ERR_HOSTNAME_MISMATCH:
        case X509_V_ERR_IP_ADDRESS_MISMATCH:
          return "name_mismatch";
        default:
          return "bad_certificate";
      }
    }
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
      return "peer_rejected_certificate";
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
      return "no_client_certificate";
    case SSL_R_UNSUPPORTED_PROTOCOL:
    case SSL_R_TLSV1_ALERT_PROTOCOL_VERSION:
    case SSL_R_NO_PROTOCOLS_AVAILABLE:
      return "protocol_version";
    case SSL_R_NO_SHARED_CIPHER:
    case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
      return "no_shared_cipher";
    case SSL_R_NO_APPLICATION_PROTOCOL:
    case SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL:
      return "alpn";
    case SSL_R_UNEXPECTED_EOF_WHILE_READING:
      return "closed";
    default:
      return "other";
  }
}

std::string DescribeFailure(SSL* ssl, unsigned long error) {
  std::string out(FailureReason(ssl, error));
  if (error != 0) {
    char buf[256];
    ERR_error_string_n(error, buf, sizeof(buf));
    out += std::string(": ") + buf;
  }
  if (ssl != nullptr && SSL_get_verify_result(ssl) != X509_V_OK) {
    out += std::string(" (certificate: ") +
           X509_verify_cert_error_string(SSL_get_verify_result(ssl)) + ")";
  }
  return out;
}

double CertificateExpiry(SSL_CTX* ctx) {
  X509* leaf = ctx ? SSL_CTX_get0_certificate(ctx) : nullptr;
  if (leaf == nullptr) return 0;
  struct tm tm {};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(leaf), &tm) != 1) return 0;
  return static_cast<double>(timegm(&tm));
}

namespace {

struct Families {
  metrics::Family<metrics::Counter>& handshakes;
  metrics::Family<metrics::Counter>& failures;
  metrics::Family<metrics::Gauge>& expiry;
  metrics::Family<metrics::Counter>& reloads;
  metrics::Family<metrics::Gauge>& in_progress;
};
Families& Family() {
  static Families* f = [] {
    auto& r = metrics::Registry::Global();
    return new Families{
        r.AddCounter("dais_tls_handshakes_total", "TLS handshakes completed", {"listener"}),
        r.AddCounter("dais_tls_handshake_failures_total",
                     "TLS handshakes refused or failed, by reason", {"listener", "reason"}),
        r.AddGauge("dais_tls_certificate_expiry_timestamp_seconds",
                   "notAfter of the listener's current certificate (Unix time)", {"listener"}),
        r.AddCounter("dais_tls_certificate_reloads_total",
                     "Certificate reloads (SIGHUP or a file change), by result",
                     {"listener", "result"}),
        r.AddGauge("dais_tls_handshakes_in_progress", "TLS handshakes running now", {"listener"}),
    };
  }();
  return *f;
}

}  // namespace

void CountTlsOnPlainPort(const std::string& listener) {
  Family().failures.Get({listener, "tls_on_plain_port"}).Increment();
}

struct ServerContext::Metrics {
  metrics::Counter& handshakes;
  metrics::Family<metrics::Counter>& failures;
  metrics::Gauge& expiry;
  metrics::Counter& reloads_ok;
  metrics::Counter& reloads_failed;
  metrics::Gauge& in_progress;
  const std::string listener;

  explicit Metrics(const std::string& l)
      : handshakes(Family().handshakes.Get({l})),
        failures(Family().failures),
        expiry(Family().expiry.Get({l})),
        reloads_ok(Family().reloads.Get({l, "ok"})),
        reloads_failed(Family().reloads.Get({l, "error"})),
        in_progress(Family().in_progress.Get({l})),
        listener(l) {}
};

ServerContext::ServerContext(ServerConfig config)
    : config_(std::move(config)), metrics_(new Metrics(config_.listener)) {}

ServerContext::~ServerContext() { delete metrics_; }

StatusOr<std::shared_ptr<ServerContext>> ServerContext::Create(ServerConfig config) {
  std::shared_ptr<ServerContext> c(new ServerContext(std::move(config)));
  const std::string stamp = c->FileStamp();
  ASSIGN_OR_RETURN(SslCtxPtr ctx, BuildServerContext(c->config_));
  c->metrics_->expiry.Set(CertificateExpiry(ctx.get()));
  MutexLock lock(&c->mu_);
  c->current_ = std::move(ctx);
  c->stamp_ = stamp;
  return c;
}

std::string ServerContext::FileStamp() const {
  return Stamp(config_.cert_file) + "|" + Stamp(config_.key_file) + "|" + Stamp(config_.ca_file);
}

SslCtxPtr ServerContext::Current() const {
  MutexLock lock(&mu_);
  return current_;
}

Status ServerContext::Reload(std::string_view why) {
  const std::string stamp = FileStamp();
  auto ctx = BuildServerContext(config_);
  {
    MutexLock lock(&mu_);
    stamp_ = stamp;
    if (ctx.ok()) current_ = *ctx;
  }
  if (!ctx.ok()) {
    metrics_->reloads_failed.Increment();
    LOG_ERROR("TLS on {}: reload ({}) refused, keeping the current certificate: {}",
              config_.listener, why, ctx.status().message());
    return ctx.status();
  }
  const double expiry = CertificateExpiry(ctx->get());
  metrics_->expiry.Set(expiry);
  metrics_->reloads_ok.Increment();
  LOG_INFO("TLS on {}: certificate reloaded ({}); valid until {:.0f} (Unix time)", config_.listener,
           why, expiry);
  return OkStatus();
}

void ServerContext::ReloadIfChanged() {
  {
    MutexLock lock(&mu_);
    if (FileStamp() == stamp_) return;
  }
  (void)Reload("file change");
}

std::unique_ptr<ServerContext::Handshake> ServerContext::BeginHandshake(
    std::function<void()> evict) {
  std::function<void()> evicted;
  std::unique_ptr<Handshake> h(new Handshake(this, std::move(evict)));
  {
    MutexLock lock(&hs_mu_);
    if (handshakes_.load() >= config_.max_handshakes) {
      if (silent_.empty()) {
        metrics_->failures.Get({config_.listener, "handshake_limit"}).Increment();
        LOG_WARNING(
            "TLS on {}: {} handshakes already running, none silent; closing a new "
            "connection",
            config_.listener, config_.max_handshakes);
        return nullptr;
      }
      Handshake* oldest = silent_.front();
      evicted = std::move(oldest->evict_);
      EndLocked(oldest);
      metrics_->failures.Get({config_.listener, "evicted"}).Increment();
    }
    handshakes_.fetch_add(1);
    h->pos_ = silent_.insert(silent_.end(), h.get());
  }
  metrics_->in_progress.Add(1);
  if (evicted) evicted();
  return h;
}

bool ServerContext::EndLocked(Handshake* h) {
  if (h->ended_) return false;
  h->ended_ = true;
  if (h->silent_) silent_.erase(h->pos_);
  h->silent_ = false;
  h->evict_ = nullptr;
  handshakes_.fetch_sub(1);
  metrics_->in_progress.Add(-1);
  return true;
}

int ServerContext::FirstByteTimeoutMs() const {
  return handshakes_.load() * 2 >= config_.max_handshakes
             ? std::min(config_.handshake_timeout_ms, config_.first_byte_timeout_under_pressure_ms)
             : config_.handshake_timeout_ms;
}

ServerContext::Handshake::~Handshake() {
  MutexLock lock(&ctx_->hs_mu_);
  if (ctx_->EndLocked(this))
    ctx_->metrics_->failures.Get({ctx_->config_.listener, "closed"}).Increment();
}

void ServerContext::Handshake::Heard() {
  MutexLock lock(&ctx_->hs_mu_);
  if (!silent_ || ended_) return;
  silent_ = false;
  ctx_->silent_.erase(pos_);
  evict_ = nullptr;
}

void ServerContext::Handshake::Done() {
  {
    MutexLock lock(&ctx_->hs_mu_);
    if (!ctx_->EndLocked(this)) return;
  }
  ctx_->metrics_->handshakes.Increment();
}

void ServerContext::Handshake::Failed(std::string_view reason, const std::string& peer,
                                      const std::string& detail) {
  {
    MutexLock lock(&ctx_->hs_mu_);
    if (!ctx_->EndLocked(this)) return;
  }
  ctx_->metrics_->failures.Get({ctx_->config_.listener, std::string(reason)}).Increment();
  // The peer's address without its port, so that a flood from one address is rate-limited.
  LOG_INFO("TLS handshake on {} from {} failed: {}", ctx_->config_.listener, peer, detail);
}

StatusOr<SslCtxPtr> MakeClientContext(const ClientConfig& c) {
  ERR_clear_error();
  SSL_CTX* raw = SSL_CTX_new(TLS_client_method());
  if (raw == nullptr) return Internal("SSL_CTX_new: " + OpenSslErrors());
  SslCtxPtr ctx(raw, SSL_CTX_free);
  SSL_CTX_set_min_proto_version(raw, TLS1_2_VERSION);
  SSL_CTX_set_options(raw, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  if (SSL_CTX_set_cipher_list(raw, kDefaultCipherList) != 1) {
    return Internal("TLS cipher list: " + OpenSslErrors());
  }
  if (!c.ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(raw, c.ca_file.c_str(), nullptr) != 1) {
      return FileError("cannot read the CA certificate(s)", c.ca_file);
    }
  } else if (SSL_CTX_set_default_verify_paths(raw) != 1) {
    return Internal("the system's CA certificates: " + OpenSslErrors());
  }
  if (!c.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(raw, c.cert_file.c_str()) != 1) {
      return FileError("cannot read the client certificate chain", c.cert_file);
    }
    const std::string& key = c.key_file.empty() ? c.cert_file : c.key_file;
    if (SSL_CTX_use_PrivateKey_file(raw, key.c_str(), SSL_FILETYPE_PEM) != 1) {
      return FileError("cannot read the client private key", key);
    }
    if (SSL_CTX_check_private_key(raw) != 1) {
      return InvalidArgument("client key '" + key + "' does not match '" + c.cert_file + "'");
    }
  }
  SSL_CTX_set_verify(raw, c.verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  return ctx;
}

StatusOr<PemTexts> ReadPemFiles(const ClientConfig& c) {
  auto read = [](const std::string& path, const char* what, std::string* out) -> Status {
    if (path.empty()) return OkStatus();
    std::ifstream in(path, std::ios::binary);
    if (!in) return InvalidArgument(std::string("cannot read the ") + what + " '" + path + "'");
    out->assign(std::istreambuf_iterator<char>(in), {});
    return OkStatus();
  };
  PemTexts t;
  RETURN_IF_ERROR(read(c.ca_file, "CA certificate(s)", &t.ca));
  RETURN_IF_ERROR(read(c.cert_file, "client certificate", &t.cert));
  if (!c.cert_file.empty()) {
    RETURN_IF_ERROR(read(c.key_file.empty() ? c.cert_file : c.key_file, "client key", &t.key));
  }
  return t;
}

Status SetPeerName(SSL* ssl, const std::string& host) {
  in6_addr a6{};
  in_addr a4{};
  const bool ip =
      inet_pton(AF_INET, host.c_str(), &a4) == 1 || inet_pton(AF_INET6, host.c_str(), &a6) == 1;
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  if (ip) {
    if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1) {
      return InvalidArgument("TLS peer address '" + host + "'");
    }
    return OkStatus();
  }
  SSL_set_tlsext_host_name(ssl, host.c_str());
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  if (SSL_set1_host(ssl, host.c_str()) != 1) {
    return InvalidArgument("TLS peer name '" + host + "'");
  }
  return OkStatus();
}

}  // namespace dais::tls
