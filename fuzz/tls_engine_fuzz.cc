// libFuzzer target for tls::Engine (tls/engine.h), the TLS record layer on memory buffers that the
// gRPC server runs on every byte a client sends to a --grpc-use-ssl port: arbitrary bytes in
// chunks must end in a clean error (failure_reason() set) or wait for more, never crash, loop or
// grow without bound. A server context with a self-signed EC certificate made in process (no
// files); byte 0 picks the chunk size (1..256).
// Seeds (fuzz/corpus/tls_engine): a TLS 1.3 ClientHello with ALPN h2 (Python's ssl), a TLS 1.2
// one, plain HTTP, an HTTP/2 preface.
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "tls/context.h"
#include "tls/engine.h"

namespace {

dais::tls::SslCtxPtr MakeServerContext() {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("fuzz"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  X509_sign(cert, key, EVP_sha256());
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_use_certificate(ctx, cert);
  SSL_CTX_use_PrivateKey(ctx, key);
  X509_free(cert);
  EVP_PKEY_free(key);
  return dais::tls::SslCtxPtr(ctx, SSL_CTX_free);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static dais::tls::SslCtxPtr ctx = MakeServerContext();
  if (size < 1) return 0;
  const size_t chunk = 1 + data[0] % 256;
  data += 1;
  size -= 1;
  dais::tls::Engine engine(ctx, /*server=*/true);
  std::string plain, wire;
  for (size_t pos = 0; pos < size; pos += chunk) {
    const size_t n = std::min(chunk, size - pos);
    if (!engine.Receive(data + pos, n, &plain, &wire).ok()) {
      if (engine.failure_reason().empty()) __builtin_trap();  // an error always names its reason
      break;
    }
    if (engine.established()) {
      (void)engine.Send("x", &wire);
    }
  }
  return 0;
}
