// Fuzzes what the gateway reads from a client before anything is forwarded:
//   - a bearer token (VerifyJwt against a JWKS holding one HS256 key): a failure always names
//     its reason;
//   - a gRPC request message scanned for the model's name and version (proto_fields.h), and the
//     append that rewrites them: the rewritten message must read back the appended values.
//
// Input: byte 0 picks the part; the rest is the token or the message.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gateway/jwt.h"
#include "gateway/proto_fields.h"

namespace {

void Require(bool condition) {
  if (!condition) std::abort();
}

const dais::gateway::Jwks& Keys() {
  static auto keys = dais::gateway::Jwks::Parse(
      R"({"keys":[{"kty":"oct","kid":"k1","alg":"HS256",)"
      R"("k":"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldC0xMjM0"}]})");
  Require(keys.ok());
  return **keys;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] % 2 == 0) {
    dais::gateway::JwtPolicy policy;
    policy.issuer = "https://id.example";
    const auto r =
        dais::gateway::VerifyJwt(rest, Keys(), policy, std::chrono::system_clock::time_point{});
    Require(r.ok || !r.reason.empty());
    return 0;
  }
  auto ref = dais::gateway::ReadModelRef(rest);
  if (!ref.ok()) return 0;
  std::string message(rest);
  dais::gateway::AppendStringField(&message, 1, "model");
  dais::gateway::AppendStringField(&message, 2, ref->version + "7");
  auto again = dais::gateway::ReadModelRef(message);
  Require(again.ok() && again->name == "model" && again->version == ref->version + "7");
  return 0;
}
