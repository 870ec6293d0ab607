#include "txn/txn_grpc.h"

#include <grpcpp/grpcpp.h>

#include "common/json.h"
#include "txn.pb.h"
#include "txn/coordinator.h"

namespace dais::txn {

using frontends::grpc::ServerCall;

namespace {

constexpr const char* kService = "/dais.txn.v1.Transactions/";

std::string Member(const rapidjson::Value& v, const char* name) {
  if (!v.IsObject() || !v.HasMember(name) || !v[name].IsString()) return "";
  return std::string(v[name].GetString(), v[name].GetStringLength());
}

// The HTTP-style outcome as a gRPC answer: OK with the response, or the error.
void Answer(const std::shared_ptr<ServerCall>& sc, const Outcome& o) {
  rapidjson::Document doc;
  (void)json::ParseJson(o.body, &doc);
  if (o.http_status != 200) {
    std::string reason = Member(doc, "reason");
    std::string error = Member(doc, "error");
    sc->Finish(::grpc::Status(frontends::grpc::CodeOfHttpStatus(o.http_status),
                              reason.empty() ? error : reason + ": " + error));
    return;
  }
  dais::txn::v1::PlaceResponse r;
  r.set_txn_id(Member(doc, "txn_id"));
  r.set_outcome(Member(doc, "outcome").empty() ? Member(doc, "state") : Member(doc, "outcome"));
  r.set_result_json(o.body);
  sc->Reply(r.SerializeAsString());
}

}  // namespace

frontends::grpc::MethodTable MakeTxnGrpcMethods(Coordinator* c) {
  frontends::grpc::MethodTable t;
  t[std::string(kService) + "Place"].unary = [c](std::shared_ptr<ServerCall> sc,
                                                 std::string bytes) {
    dais::txn::v1::PlaceRequest req;
    if (!req.ParseFromString(bytes)) {
      sc->Finish(::grpc::Status(::grpc::StatusCode::INVALID_ARGUMENT,
                                "PlaceRequest: not a valid protobuf message"));
      return;
    }
    CallTrace trace{std::string(sc->Metadata("traceparent").value_or("")),
                    std::string(sc->Metadata("x-request-id").value_or(""))};
    c->Submit(req.type(), req.params_json(), req.idempotency_key(), std::move(trace),
              [sc](Outcome o) {
                sc->AddResponseMetadata("x-request-id", o.request_id);
                Answer(sc, o);
              });
  };
  t[std::string(kService) + "Get"].unary = [c](std::shared_ptr<ServerCall> sc, std::string bytes) {
    dais::txn::v1::GetRequest req;
    if (!req.ParseFromString(bytes) || req.txn_id().empty()) {
      sc->Finish(
          ::grpc::Status(::grpc::StatusCode::INVALID_ARGUMENT, "GetRequest: txn_id is required"));
      return;
    }
    c->Lookup(req.txn_id(), [sc](Outcome o) { Answer(sc, o); });
  };
  return t;
}

}  // namespace dais::txn
