#include "gateway/memory_fanout.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "common/json.h"
#include "gateway/proto_fields.h"
#include "metrics/registry.h"

namespace dais::gateway {
namespace {

using FanOutPtr = std::shared_ptr<MemoryFanOut>;

metrics::Family<metrics::Counter>& Requests() {
  static auto& f = metrics::Registry::Global().AddCounter(
      "dais_gateway_memory_requests_total",
      "Vector memory requests through the gateway by collection (- when unknown), operation "
      "and HTTP status (gRPC codes counted as their HTTP status)",
      {"collection", "op", "code"});
  return f;
}

metrics::Family<metrics::Counter>& Replaced() {
  static auto& f = metrics::Registry::Global().AddCounter(
      "dais_gateway_memory_replica_retries_total",
      "Parts of a vector memory request sent again to another replica of the same shards "
      "(the first could not be reached, failed mid-answer or answered unavailable)",
      {"collection"});
  return f;
}

uint64_t Random() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return rng();
}

// The message field naming a get's or a search's shards (proto/memory.proto).
int ShardsField(const std::string& op) { return op == "search" ? 11 : 4; }

// node -> the shards it is asked for; Unavailable naming a shard with no READY replica left.
StatusOr<std::map<std::string, std::vector<int>>> PlanParts(const MemoryFanOut& f,
                                                            const std::vector<int>& shards,
                                                            const std::set<std::string>& failed) {
  std::map<std::string, std::vector<int>> plan;
  const auto& ports = f.grpc ? f.view->node_grpc : f.view->node_http;
  for (int s : shards) {
    std::vector<std::string> candidates;
    auto it = f.view->memory_ready.find(f.collection->ShardTask(s));
    if (it != f.view->memory_ready.end()) {
      for (const auto& n : it->second) {
        if (!failed.count(n) && ports.count(n)) candidates.push_back(n);
      }
    }
    if (candidates.empty()) {
      return Unavailable("shard " + std::to_string(s) + " of collection " + f.collection->name +
                         " has no READY replica" + (failed.empty() ? "" : " left") +
                         " (dais ctl get collections)");
    }
    // A node already asked for another shard takes this one too: fewer requests.
    auto chosen = std::find_if(candidates.begin(), candidates.end(),
                               [&plan](const std::string& n) { return plan.count(n) > 0; });
    const std::string& node =
        chosen != candidates.end() ? *chosen : candidates[Random() % candidates.size()];
    plan[node].push_back(s);
  }
  if (f.write && !plan.empty()) {
    // Any holder writes every shard's points to the store.
    auto one = *plan.begin();
    one.second = shards;
    return std::map<std::string, std::vector<int>>{std::move(one)};
  }
  return plan;
}

std::string MessageOf(const std::string& json_body) {
  rapidjson::Document d;
  const rapidjson::Value& root = d;
  if (json::ParseJson(json_body, &d).ok() && root.IsObject() && root.HasMember("error") &&
      root["error"].IsString()) {
    return root["error"].GetString();
  }
  return json_body;
}

void Finish(const FanOutPtr& f) DAIS_NO_THREAD_SAFETY_ANALYSIS {
  std::string body;
  int status = 200;
  if (f->error) {
    status = f->error->status;
  } else if (f->single) {
    body = std::move(*f->single);
  } else {
    auto& hits = f->hits;
    if (f->op == "search") {
      const bool higher = f->collection->HigherIsBetter();
      std::stable_sort(hits.begin(), hits.end(), [higher](const auto& a, const auto& b) {
        return higher ? a.first > b.first : a.first < b.first;
      });
      if (hits.size() > static_cast<size_t>(f->k)) hits.resize(static_cast<size_t>(f->k));
    }
    if (f->grpc) {
      for (const auto& h : hits) AppendStringField(&body, 1, h.second);
    } else {
      body = "{\"results\":[";
      for (size_t i = 0; i < hits.size(); ++i) body += (i ? "," : "") + hits[i].second;
      body += "]}";
    }
  }
  Requests().Get({f->collection->name, f->op, std::to_string(status)}).Increment();
  f->g->in_flight.fetch_sub(1);
  if (f->grpc) {
    if (!f->error) return f->grpc->Reply(std::move(body));
    const auto code = f->error->grpc_code >= 0
                          ? static_cast<::grpc::StatusCode>(f->error->grpc_code)
                          : frontends::grpc::CodeOfHttpStatus(f->error->status);
    return f->grpc->Finish(::grpc::Status(code, f->error->message));
  }
  if (!f->error) return f->respond(frontends::http::Response{200, "application/json", body, {}});
  f->respond(f->error->body.empty()
                 ? Error(f->error->status, f->error->message)
                 : frontends::http::Response{
                       f->error->status, "application/json", std::move(f->error->body), {}});
}

// A part's outcome, from either transport.
struct Part {
  bool retry = false;  // not reached, broken mid-answer, or "unavailable": another replica
  std::optional<MemoryFanOut::Failure> failure;
  std::string body;  // the answer when neither
};

// The hits of one answer (JSON or protobuf), appended; false when it does not parse.
bool CollectHits(MemoryFanOut& f, const std::string& body) DAIS_NO_THREAD_SAFETY_ANALYSIS {
  if (f.grpc) {
    Status s = ForEachField(body, [&f](const WireField& w) {
      if (w.field != 1 || w.type != 2) return;
      float score = 0;
      (void)ForEachField(w.bytes, [&score](const WireField& h) {
        if (h.field == 2 && h.type == 5) std::memcpy(&score, h.bytes.data(), 4);
      });
      f.hits.emplace_back(score, std::string(w.bytes));
    });
    return s.ok();
  }
  rapidjson::Document d;
  const rapidjson::Value& root = d;
  if (!json::ParseJson(body, &d).ok() || !root.IsObject() || !root.HasMember("results") ||
      !root["results"].IsArray()) {
    return false;
  }
  for (const auto& hit : root["results"].GetArray()) {
    rapidjson::StringBuffer sb;
    rapidjson::Writer<rapidjson::StringBuffer> w(sb);
    hit.Accept(w);
    const double score =
        hit.HasMember("score") && hit["score"].IsNumber() ? hit["score"].GetDouble() : 0;
    f.hits.emplace_back(score, sb.GetString());
  }
  return true;
}

void SendPart(const FanOutPtr& f, const std::string& node, std::vector<int> shards);

// Merges a part's answer, or sends its shards to other replicas.
void OnPart(const FanOutPtr& f, const std::string& node, const std::vector<int>& shards,
            Part part) {
  std::map<std::string, std::vector<int>> again;
  bool done = false;
  {
    MutexLock l(&f->mu);
    if (part.retry && Clock::now() < f->deadline) {
      f->failed.insert(node);
      auto plan = PlanParts(*f, shards, f->failed);
      if (plan.ok()) {
        again = std::move(*plan);
        f->pending += static_cast<int>(again.size());
        Replaced().Get({f->collection->name}).Increment();
      } else if (!f->error) {
        f->error = MemoryFanOut::Failure{503, -1, std::string(plan.status().message()), ""};
      }
    } else if (part.retry || part.failure) {
      if (!f->error) {
        f->error = part.failure
                       ? *part.failure
                       : MemoryFanOut::Failure{504, -1, "node " + node + ": timed out", ""};
      }
    } else if (f->write) {
      f->single = std::move(part.body);
    } else if (!CollectHits(*f, part.body) && !f->error) {
      f->error = MemoryFanOut::Failure{502, -1, "node " + node + ": an answer without results", ""};
    }
    done = --f->pending == 0;
  }
  for (auto& [n, s] : again) SendPart(f, n, std::move(s));
  if (done) Finish(f);
}

void SendHttp(const FanOutPtr& f, const std::string& node, std::vector<int> shards) {
  UpstreamRequest up;
  up.method = "POST";
  up.target = f->path;
  if (!f->write) {
    up.target += "?shards=";
    for (size_t i = 0; i < shards.size(); ++i) {
      up.target += (i ? "," : "") + std::to_string(shards[i]);
    }
  }
  up.headers = f->headers;
  up.body = f->body;
  up.deadline = f->deadline;
  f->g->pool.Send(
      f->view->node_http.at(node), std::move(up),
      [f, node, shards = std::move(shards)](UpstreamResult r) {
        Part p;
        // Every operation is idempotent (a write again is the same points under a
        // newer sequence); a deadline is not retried (the time is spent).
        const bool timed_out = r.status.code() == StatusCode::kDeadlineExceeded;
        p.retry = (!r.status.ok() && !timed_out) || (r.status.ok() && r.response.status == 503);
        if (timed_out) {
          p.failure = {504, -1, "node " + node + ": " + std::string(r.status.message()), ""};
        } else if (!p.retry && r.response.status != 200) {
          p.failure = {r.response.status, -1, MessageOf(r.response.body),
                       std::move(r.response.body)};
        }
        p.body = std::move(r.response.body);
        OnPart(f, node, shards, std::move(p));
      });
}

void SendGrpc(const FanOutPtr& f, const std::string& node, std::vector<int> shards) {
  std::string message = f->body;
  if (!f->write) AppendPackedVarints(&message, ShardsField(f->op), shards);
  auto answer = std::make_shared<std::string>();
  GrpcCallOptions o;
  o.path = f->method;
  o.metadata = f->metadata;
  o.deadline = f->deadline;
  o.on_message = [answer](std::string m) { *answer = std::move(m); };
  o.on_finish = [f, node, shards, answer](GrpcResult r) {
    Part p;
    p.retry = r.not_sent || (r.code == 14 && !r.timed_out);  // UNAVAILABLE
    if (!p.retry && r.code != 0) p.failure = {HttpOfCode(r.code), r.code, r.message, ""};
    p.body = std::move(*answer);
    OnPart(f, node, shards, std::move(p));
  };
  f->g->grpc.StartUnary(f->view->node_grpc.at(node), std::move(o), std::move(message));
}

void SendPart(const FanOutPtr& f, const std::string& node, std::vector<int> shards) {
  if (f->grpc) return SendGrpc(f, node, std::move(shards));
  SendHttp(f, node, std::move(shards));
}

}  // namespace

void RefuseMemory(const FanOutPtr& f, int status, const std::string& message) {
  {
    MutexLock l(&f->mu);
    f->error = MemoryFanOut::Failure{status, -1, message, ""};
  }
  Finish(f);
}

void StartFanOut(FanOutPtr f) {
  std::vector<int> all;
  for (int s = 0; s < f->collection->shards; ++s) all.push_back(s);
  auto plan = PlanParts(*f, all, {});
  if (!plan.ok()) return RefuseMemory(f, 503, std::string(plan.status().message()));
  {
    MutexLock l(&f->mu);
    f->pending = static_cast<int>(plan->size());
  }
  for (auto& [node, shards] : *plan) SendPart(f, node, std::move(shards));
}

}  // namespace dais::gateway
