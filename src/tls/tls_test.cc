#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/status_testing.h"
#include "tls/context.h"
#include "tls/engine.h"

namespace dais::tls {
namespace {

namespace fs = std::filesystem;

// Certificates made once per test binary by scripts/make_certs.sh (as the integration tests do).
const fs::path& Certs() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("dais_tls_test_" + std::to_string(::getpid()));
    const std::string cmd =
        std::string(DAIS_SOURCE_DIR) + "/scripts/make_certs.sh " + d.string() + " >/dev/null";
    if (std::system(cmd.c_str()) != 0) ADD_FAILURE() << "make_certs.sh failed";
    return d;
  }();
  // Registered after `dir` is made, so it runs before `dir` is destroyed.
  static const bool cleanup = (std::atexit([] { fs::remove_all(dir); }), true);
  (void)cleanup;
  return dir;
}

std::string P(const std::string& name) { return (Certs() / name).string(); }

ServerConfig Server(const std::string& leaf = "server") {
  ServerConfig c;
  c.cert_file = P(leaf + ".crt");
  c.key_file = P(leaf + ".key");
  c.alpn = {"h2"};
  c.listener = "test";
  return c;
}

// Carries bytes between the two engines until neither has anything to say. Returns the first
// error of either side (server first).
struct Pair {
  Engine client;
  Engine server;
  std::string to_server, to_client, client_plain, server_plain;
  Status client_status, server_status;

  Pair(SslCtxPtr c, SslCtxPtr s) : client(std::move(c), false), server(std::move(s), true) {}

  void Run() {
    client_status = client.Start(&to_server);
    for (int i = 0; i < 20 && (!to_server.empty() || !to_client.empty()); ++i) {
      std::string in = std::move(to_server);
      to_server.clear();
      if (server_status.ok() && !in.empty()) {
        server_status = server.Receive(reinterpret_cast<const uint8_t*>(in.data()), in.size(),
                                       &server_plain, &to_client);
      }
      in = std::move(to_client);
      to_client.clear();
      if (client_status.ok() && !in.empty()) {
        client_status = client.Receive(reinterpret_cast<const uint8_t*>(in.data()), in.size(),
                                       &client_plain, &to_server);
      }
    }
  }
};

SslCtxPtr Client(ClientConfig c, const std::string& host = "localhost") {
  c.enabled = true;
  auto ctx = MakeClientContext(c);
  EXPECT_OK(ctx.status());
  return *ctx;
}

TEST(Tls, HandshakeAlpnAndDataBothWays) {
  ASSERT_OK_AND_ASSIGN(auto server, ServerContext::Create(Server()));
  ClientConfig cc;
  cc.ca_file = P("ca.crt");
  Pair p(Client(cc), server->Current());
  ASSERT_OK(SetPeerName(p.client.ssl(), "localhost"));
  static const unsigned char kH2[] = "\x02h2";
  SSL_set_alpn_protos(p.client.ssl(), kH2, 3);
  ASSERT_OK(p.client.Send("hello server", &p.to_server));  // waits for the handshake
  p.Run();
  ASSERT_OK(p.server_status);
  ASSERT_OK(p.client_status);
  EXPECT_TRUE(p.server.established());
  EXPECT_TRUE(p.server.TakeJustEstablished());
  EXPECT_FALSE(p.server.TakeJustEstablished());
  EXPECT_EQ(p.server.alpn(), "h2");
  EXPECT_EQ(p.server_plain, "hello server");
  ASSERT_OK(p.server.Send("hello client", &p.to_client));
  p.Run();
  EXPECT_EQ(p.client_plain, "hello client");
  EXPECT_GT(CertificateExpiry(server->Current().get()), 1.7e9);
}

TEST(Tls, AlpnWithoutH2IsRefused) {
  ASSERT_OK_AND_ASSIGN(auto server, ServerContext::Create(Server()));
  ClientConfig cc;
  cc.ca_file = P("ca.crt");
  Pair p(Client(cc), server->Current());
  static const unsigned char kHttp11[] = "\x08http/1.1";
  SSL_set_alpn_protos(p.client.ssl(), kHttp11, 9);
  p.Run();
  EXPECT_FALSE(p.server_status.ok());
  EXPECT_EQ(p.server.failure_reason(), "alpn");
}

TEST(Tls, ClientChecksTheServerName) {
  ASSERT_OK_AND_ASSIGN(auto server, ServerContext::Create(Server()));
  ClientConfig cc;
  cc.ca_file = P("ca.crt");
  Pair p(Client(cc), server->Current());
  ASSERT_OK(SetPeerName(p.client.ssl(), "db.example.com"));
  p.Run();
  EXPECT_FALSE(p.client_status.ok());
  EXPECT_EQ(p.client.failure_reason(), "name_mismatch");
}

TEST(Tls, ClientRefusesAnUnknownCa) {
  ASSERT_OK_AND_ASSIGN(auto server, ServerContext::Create(Server()));
  ClientConfig cc;
  cc.ca_file = P("other-ca.crt");
  Pair p(Client(cc), server->Current());
  p.Run();
  EXPECT_EQ(p.client.failure_reason(), "unknown_ca");
  EXPECT_EQ(p.server.failure_reason(), "peer_rejected_certificate");
}

TEST(Tls, MutualTlsNeedsAClientCertificateFromTheCa) {
  ServerConfig sc = Server();
  sc.ca_file = P("ca.crt");
  sc.require_client_cert = true;
  ASSERT_OK_AND_ASSIGN(auto server, ServerContext::Create(sc));
  ClientConfig cc;
  cc.ca_file = P("ca.crt");
  {
    Pair p(Client(cc), server->Current());  // no certificate
    p.Run();
    EXPECT_FALSE(p.server_status.ok());
    EXPECT_EQ(p.server.failure_reason(), "no_client_certificate");
  }
  {
    cc.cert_file = P("other.crt");
    cc.key_file = P("other.key");
    Pair p(Client(cc), server->Current());
    p.Run();
    EXPECT_FALSE(p.server_status.ok());
    EXPECT_EQ(p.server.failure_reason(), "unknown_ca");
  }
  {
    cc.cert_file = P("client.crt");
    cc.key_file = P("client.key");
    Pair p(Client(cc), server->Current());
    p.Run();
    ASSERT_OK(p.server_status);
    EXPECT_TRUE(p.server.established());
  }
}

TEST(Tls, PlainTextIsNamed) {
  ASSERT_OK_AND_ASSIGN(auto server, ServerContext::Create(Server()));
  for (std::string text :
       {"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"}) {
    Engine e(server->Current(), true);
    std::string plain, wire;
    EXPECT_FALSE(
        e.Receive(reinterpret_cast<const uint8_t*>(text.data()), text.size(), &plain, &wire).ok());
    EXPECT_EQ(e.failure_reason(), text[0] == 'G' ? "http_request" : "not_tls") << text;
  }
}

TEST(Tls, BadCertificatesAreRefusedAndReloadKeepsTheOldOne) {
  EXPECT_EQ(ServerContext::Create(Server("expired")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ServerContext::Create(Server("future")).status().code(), StatusCode::kInvalidArgument);
  ServerConfig mismatched = Server();
  mismatched.key_file = P("client.key");
  auto s = ServerContext::Create(mismatched);
  EXPECT_NE(s.status().message().find("does not match"), std::string::npos) << s.status().message();

  // A copy of the server's files, replaced by the expired ones: the reload is refused.
  const fs::path dir = Certs() / "reload";
  fs::create_directories(dir);
  fs::copy_file(P("server.crt"), dir / "tls.crt", fs::copy_options::overwrite_existing);
  fs::copy_file(P("server.key"), dir / "tls.key", fs::copy_options::overwrite_existing);
  ServerConfig rc = Server();
  rc.cert_file = (dir / "tls.crt").string();
  rc.key_file = (dir / "tls.key").string();
  ASSERT_OK_AND_ASSIGN(auto ctx, ServerContext::Create(rc));
  SslCtxPtr before = ctx->Current();
  fs::copy_file(P("expired.crt"), dir / "tls.crt", fs::copy_options::overwrite_existing);
  fs::copy_file(P("expired.key"), dir / "tls.key", fs::copy_options::overwrite_existing);
  EXPECT_FALSE(ctx->Reload("test").ok());
  EXPECT_EQ(ctx->Current(), before);
  ctx->ReloadIfChanged();  // the stamp was taken at the failed attempt: nothing to do
  EXPECT_EQ(ctx->Current(), before);
  fs::copy_file(P("future.crt"), dir / "tls.crt", fs::copy_options::overwrite_existing);
  fs::copy_file(P("future.key"), dir / "tls.key", fs::copy_options::overwrite_existing);
  fs::copy_file(P("server.crt"), dir / "tls.crt", fs::copy_options::overwrite_existing);
  fs::copy_file(P("server.key"), dir / "tls.key", fs::copy_options::overwrite_existing);
  ctx->ReloadIfChanged();
  EXPECT_NE(ctx->Current(), before);  // a new generation with the good files
}

}  // namespace
}  // namespace dais::tls
