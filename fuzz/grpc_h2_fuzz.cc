// libFuzzer target for dais's gRPC transport (frontends/grpc/h2_connection.h): the bytes any
// client can send to the gRPC port, after the HTTP/2 connection preface. nghttp2 parses the
// frames; this exercises what dais does with them: stream bookkeeping, gRPC message framing,
// refusals, answers written later from "another thread" (posted work run between chunks),
// cancellations and the connection's end.
// Input: byte 0 picks the chunk size (1..64); the rest is the stream. The seeds in
// fuzz/corpus/grpc_h2 are what Python grpcio sent for ServerLive (held, answered late),
// ModelInfer (echoed), ModelStreamInfer (echoed per message), ModelMetadata and Health/Check
// (both unknown here: refused).
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "frontends/grpc/h2_connection.h"

namespace {

using dais::frontends::grpc::H2Connection;
using dais::frontends::grpc::H2Options;
using dais::frontends::grpc::MethodTable;
using dais::frontends::grpc::ServerCall;
using dais::frontends::grpc::StreamHandler;

struct Echo : StreamHandler {
  explicit Echo(std::shared_ptr<ServerCall> c) : call(std::move(c)) {}
  void OnMessage(std::string m) override { call->Write(std::move(m)); }
  void OnHalfClose() override { call->Finish(grpc::Status::OK); }
  std::shared_ptr<ServerCall> call;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t chunk = 1 + data[0] % 64;
  std::deque<std::function<void()>> posted;
  std::vector<std::shared_ptr<ServerCall>> held;
  MethodTable methods;
  methods["/inference.GRPCInferenceService/ModelInfer"].unary =
      [](std::shared_ptr<ServerCall> call, std::string req) { call->Reply(std::move(req)); };
  methods["/inference.GRPCInferenceService/ServerLive"].unary =
      [&held](std::shared_ptr<ServerCall> call, std::string) { held.push_back(std::move(call)); };
  methods["/inference.GRPCInferenceService/ModelStreamInfer"].stream =
      [](std::shared_ptr<ServerCall> call) { return std::make_shared<Echo>(std::move(call)); };
  H2Options options;
  options.max_receive_message_bytes = 1 << 16;
  auto conn = std::make_shared<H2Connection>(
      &methods, options, [&posted](std::function<void()> fn) { posted.push_back(std::move(fn)); });
  if (!conn->Start().ok()) return 0;
  std::string in = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  in.append(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string out;
  for (size_t pos = 0; pos < in.size(); pos += chunk) {
    const size_t n = std::min(chunk, in.size() - pos);
    if (!conn->Receive(reinterpret_cast<const uint8_t*>(in.data() + pos), n).ok()) break;
    while (!posted.empty()) {
      auto fn = std::move(posted.front());
      posted.pop_front();
      fn();
    }
    // Held calls are answered late, half with an error.
    for (size_t i = 0; i < held.size(); ++i) {
      if (i % 2) {
        held[i]->Finish(grpc::Status(grpc::StatusCode::INTERNAL, "late\xff%"));
      } else {
        held[i]->Reply("late");
      }
    }
    held.clear();
    out.clear();
    conn->TakeOutput(&out);
  }
  conn->Abort();
  while (!posted.empty()) {
    auto fn = std::move(posted.front());
    posted.pop_front();
    fn();
  }
  return 0;
}
