#include "frontends/grpc/memory_grpc.h"

#include "frontends/grpc/grpc_codec.h"
#include "memory.pb.h"

namespace dais::frontends::grpc {
namespace {

namespace pb = dais::memory::v1;
using memory::MemoryService;

template <typename Req>
bool ParseRequest(const std::string& bytes, Req* req, ServerCall* call) {
  if (req->ParseFromString(bytes)) return true;
  call->Finish(ToGrpcStatus(
      InvalidArgument("the request is not a valid " + req->GetTypeName() + " message")));
  return false;
}

memory::FieldValue FromProto(const pb::Value& v) {
  switch (v.kind_case()) {
    case pb::Value::kStringValue:
      return v.string_value();
    case pb::Value::kNumberValue:
      return v.number_value();
    case pb::Value::kBoolValue:
      return v.bool_value();
    default:
      return std::numeric_limits<double>::quiet_NaN();  // refused by the checks: no value
  }
}

void ToProto(const memory::Payload& payload, google::protobuf::Map<std::string, pb::Value>* out) {
  for (const auto& [name, value] : payload) {
    pb::Value& v = (*out)[name];
    if (const auto* s = std::get_if<std::string>(&value)) {
      v.set_string_value(*s);
    } else if (const auto* d = std::get_if<double>(&value)) {
      v.set_number_value(*d);
    } else {
      v.set_bool_value(std::get<bool>(value));
    }
  }
}

void ToProto(const std::vector<memory::SearchHit>& hits, bool with_score,
             google::protobuf::RepeatedPtrField<pb::Hit>* out) {
  for (const auto& h : hits) {
    pb::Hit* hit = out->Add();
    hit->set_id(h.id);
    if (with_score) hit->set_score(h.score);
    ToProto(h.payload, hit->mutable_payload());
    hit->mutable_vector()->Add(h.vector.begin(), h.vector.end());
  }
}

StatusOr<std::vector<memory::Point>> Points(const pb::UpsertRequest& req,
                                            const memory::CollectionSpec& spec) {
  if (req.points_size() == 0 || static_cast<size_t>(req.points_size()) > memory::kMaxBatch) {
    return InvalidArgument("points: 1 to " + std::to_string(memory::kMaxBatch) +
                           " points are needed");
  }
  std::vector<memory::Point> out;
  out.reserve(req.points_size());
  for (int i = 0; i < req.points_size(); ++i) {
    const pb::Point& in = req.points(i);
    memory::Point p{in.id(), {in.vector().begin(), in.vector().end()}, {}};
    for (const auto& [name, value] : in.payload()) p.payload.emplace_back(name, FromProto(value));
    RETURN_IF_ERROR(memory::CheckPoint(spec, &p, "points[" + std::to_string(i) + "]"));
    out.push_back(std::move(p));
  }
  return out;
}

StatusOr<memory::SearchRequest> Search(const pb::SearchRequest& req,
                                       const memory::CollectionSpec& spec) {
  memory::SearchRequest r;
  r.vector.assign(req.vector().begin(), req.vector().end());
  RETURN_IF_ERROR(memory::CheckVector(spec, &r.vector, "vector"));
  if (req.k() > static_cast<uint32_t>(memory::kMaxK)) {
    return InvalidArgument("k: an integer from 1 to " + std::to_string(memory::kMaxK) +
                           " is needed");
  }
  r.k = req.k() == 0 ? 10 : static_cast<int>(req.k());
  for (const auto& c : req.filter()) {
    r.filter.push_back({c.field(), static_cast<memory::CompareOp>(c.op()), FromProto(c.value())});
  }
  RETURN_IF_ERROR(memory::CheckFilter(spec, r.filter));
  const bool l2 = spec.metric == memory::Metric::kL2;
  if (req.has_min_score() || req.has_max_distance()) {
    if (l2 != req.has_max_distance() || (req.has_min_score() && req.has_max_distance())) {
      return InvalidArgument(std::string("threshold: collection ") + spec.name + " uses metric " +
                             memory::MetricName(spec.metric) + ": give " +
                             (l2 ? "max_distance" : "min_score"));
    }
    r.threshold = l2 ? req.max_distance() : req.min_score();
  }
  if (req.ef() > 4096) return InvalidArgument("ef: an integer from 1 to 4096 is needed");
  r.ef = static_cast<int>(req.ef());
  r.with_payload = !req.without_payload();
  r.with_vector = req.with_vector();
  r.timeout_ms = req.timeout_ms();
  return r;
}

void Upsert(MemoryService* service, std::shared_ptr<ServerCall> call, std::string bytes) {
  pb::UpsertRequest req;
  if (!ParseRequest(bytes, &req, call.get())) return;
  auto spec = service->Spec(req.collection());
  if (!spec.ok()) return call->Finish(ToGrpcStatus(spec.status()));
  auto points = Points(req, **spec);
  if (!points.ok()) return call->Finish(ToGrpcStatus(points.status()));
  const size_t n = points->size();
  service->Upsert(req.collection(), std::move(*points), [call, n](Status s) {
    if (!s.ok()) return call->Finish(ToGrpcStatus(s));
    pb::UpsertResponse resp;
    resp.set_upserted(static_cast<uint32_t>(n));
    call->Reply(resp.SerializeAsString());
  });
}

void Delete(MemoryService* service, std::shared_ptr<ServerCall> call, std::string bytes) {
  pb::DeleteRequest req;
  if (!ParseRequest(bytes, &req, call.get())) return;
  if (req.ids_size() == 0 || static_cast<size_t>(req.ids_size()) > memory::kMaxBatch) {
    return call->Finish(ToGrpcStatus(
        InvalidArgument("ids: 1 to " + std::to_string(memory::kMaxBatch) + " ids are needed")));
  }
  const size_t n = req.ids_size();
  service->Delete(req.collection(), {req.ids().begin(), req.ids().end()}, [call, n](Status s) {
    if (!s.ok()) return call->Finish(ToGrpcStatus(s));
    pb::DeleteResponse resp;
    resp.set_deleted(static_cast<uint32_t>(n));
    call->Reply(resp.SerializeAsString());
  });
}

// A request's `shards` (the gateway's fan-out), each below the collection's shard count.
StatusOr<std::vector<int>> Shards(const google::protobuf::RepeatedField<uint32_t>& shards,
                                  const memory::CollectionSpec& spec) {
  std::vector<int> out;
  for (uint32_t s : shards) {
    if (s >= static_cast<uint32_t>(spec.shards)) {
      return InvalidArgument("shards: " + std::to_string(s) + " is not a shard of " + spec.name +
                             " (0.." + std::to_string(spec.shards - 1) + ")");
    }
    out.push_back(static_cast<int>(s));
  }
  return out;
}

}  // namespace

void AddMemoryMethods(MethodTable& t, MemoryService* service) {
  const std::string base = kMemoryService;
  t[base + "Upsert"].unary = [service](std::shared_ptr<ServerCall> c, std::string b) {
    Upsert(service, std::move(c), std::move(b));
  };
  t[base + "Delete"].unary = [service](std::shared_ptr<ServerCall> c, std::string b) {
    Delete(service, std::move(c), std::move(b));
  };
  t[base + "Get"].unary = [service](std::shared_ptr<ServerCall> call, std::string bytes) {
    pb::GetRequest req;
    if (!ParseRequest(bytes, &req, call.get())) return;
    auto spec = service->Spec(req.collection());
    if (!spec.ok()) return call->Finish(ToGrpcStatus(spec.status()));
    auto shards = Shards(req.shards(), **spec);
    if (!shards.ok()) return call->Finish(ToGrpcStatus(shards.status()));
    auto hits = service->Get(req.collection(), {req.ids().begin(), req.ids().end()},
                             req.with_vector(), *shards);
    if (!hits.ok()) return call->Finish(ToGrpcStatus(hits.status()));
    pb::GetResponse resp;
    ToProto(*hits, false, resp.mutable_results());
    call->Reply(resp.SerializeAsString());
  };
  t[base + "Search"].unary = [service](std::shared_ptr<ServerCall> call, std::string bytes) {
    pb::SearchRequest req;
    if (!ParseRequest(bytes, &req, call.get())) return;
    auto spec = service->Spec(req.collection());
    if (!spec.ok()) return call->Finish(ToGrpcStatus(spec.status()));
    auto r = Search(req, **spec);
    if (!r.ok()) return call->Finish(ToGrpcStatus(r.status()));
    auto shards = Shards(req.shards(), **spec);
    if (!shards.ok()) return call->Finish(ToGrpcStatus(shards.status()));
    r->shards = std::move(*shards);
    service->SearchAsync(req.collection(), std::move(*r),
                         [call](StatusOr<std::vector<memory::SearchHit>> hits) {
                           if (!hits.ok()) return call->Finish(ToGrpcStatus(hits.status()));
                           pb::SearchResponse resp;
                           ToProto(*hits, true, resp.mutable_results());
                           call->Reply(resp.SerializeAsString());
                         });
  };
}

}  // namespace dais::frontends::grpc
