#include "cmd/agent_http.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <string_view>

#include "agents/template.h"
#include "common/json.h"
#include "common/logging.h"

namespace dais::cmd {
namespace {

using frontends::http::Response;

Response JsonError(int status, const std::string& message) {
  rapidjson::Value v(message.c_str(), static_cast<rapidjson::SizeType>(message.size()));
  return Response{status, "application/json", "{\"error\":" + agents::ValueJson(v) + "}", {}};
}

// A refusal before any run started (the gateway may try another runtime).
Response Busy(const std::string& message) {
  Response r = JsonError(503, message);
  r.headers.emplace_back("Retry-After", "1");
  r.headers.emplace_back("x-dais-not-run", "1");
  return r;
}

// Constant time: the key is a secret.
bool SameKey(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i % std::max<size_t>(1, b.size())];
  return diff == 0;
}

int StatusOfFailure(StatusCode code) {
  switch (code) {
    case StatusCode::kDeadlineExceeded:
      return 504;
    case StatusCode::kResourceExhausted:  // (a step's server said 429: the agent's tenant's rate)
      return 503;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
      return 422;
    default:
      return 502;
  }
}

}  // namespace

AgentHttpTrigger::AgentHttpTrigger(const agents::AgentSpec& spec, const AgentCliOptions& o,
                                   redis::Client* redis, AgentMetrics* metrics, AgentLive* live,
                                   int workers, size_t queue, std::string key)
    : spec_(spec),
      o_(o),
      redis_(redis),
      metrics_(metrics),
      live_(live),
      max_queue_(queue),
      key_(std::move(key)),
      path_("/v1/agents/" + spec.name + "/runs") {
  for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { Work(); });
}

AgentHttpTrigger::~AgentHttpTrigger() { Close(); }

void AgentHttpTrigger::Close() {
  std::deque<Job> left;
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
    left.swap(queue_);
  }
  cv_.notify_all();
  for (Job& j : left) j.respond(Busy("agent " + spec_.name + " is stopping"));
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

bool AgentHttpTrigger::Handle(const frontends::http::Request& r, frontends::http::Responder& w) {
  if (r.path != path_) return false;
  if (!key_.empty() && !SameKey(r.Header("x-dais-agent-key"), key_)) {
    Response refused = JsonError(401, "the agent's runtime is called through the gateway (POST " +
                                          path_ + " there); direct calls need its key");
    refused.headers.emplace_back("x-dais-not-run", "1");  // (a key the gateway had not seen yet)
    w(std::move(refused));
    return true;
  }
  if (r.method != "POST") {
    w(JsonError(405, path_ + " is a POST (the event's fields as a JSON object)"));
    return true;
  }
  Job job;
  job.arrived = std::chrono::steady_clock::now();
  job.event = std::make_shared<rapidjson::Document>();
  job.event->SetObject();
  const rapidjson::Value& root = *job.event;
  if (!r.body.empty()) {
    if (Status s = json::ParseJson(r.body, job.event.get()); !s.ok() || !root.IsObject()) {
      w(JsonError(400, "the body must be a JSON object of the event's fields" +
                           (s.ok() ? std::string() : ": " + std::string(s.message()))));
      return true;
    }
  }
  const std::string_view key = r.Header("idempotency-key");
  if (key.size() > 200) {
    w(JsonError(400, "Idempotency-Key: at most 200 bytes"));
    return true;
  }
  job.run_id = !key.empty() ? "h:" + std::string(key)
                            : "h" + std::to_string(UnixMs()) + "-" + o_.consumer + "-" +
                                  std::to_string(next_id_.fetch_add(1));
  if (!live_->Admit()) {
    const bool paused = live_->paused();
    metrics_->http_refused->Get({spec_.name, paused ? "paused" : "throttled"}).Increment();
    w(Busy("agent " + spec_.name + " is " + (paused ? "paused" : "throttled") +
           " by the orchestrator (a higher priority needs the resources); retry later"));
    return true;
  }
  job.respond = w;
  // A refusal is answered after the lock is released: the answer may be written inline, and the
  // connection's next (pipelined) request handled inline too, which comes back here.
  std::string refusal;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_) {
      refusal = "agent " + spec_.name + " is stopping";
    } else if (queue_.size() >= max_queue_ + static_cast<size_t>(idle_)) {
      metrics_->http_refused->Get({spec_.name, "busy"}).Increment();
      refusal = "agent " + spec_.name + ": every worker is running and " +
                std::to_string(queue_.size()) + " calls wait; retry later";
    } else {
      queue_.push_back(std::move(job));
    }
  }
  if (!refusal.empty()) {
    live_->Refund();
    w(Busy(refusal));
    return true;
  }
  cv_.notify_one();
  return true;
}

void AgentHttpTrigger::Work() {
  AgentActions actions(Endpoints(o_), redis_);
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    ++idle_;
    cv_.wait(l, [this] { return stop_ || !queue_.empty(); });
    --idle_;
    if (queue_.empty()) return;  // stopping
    Job job = std::move(queue_.front());
    queue_.pop_front();
    l.unlock();
    job.respond(Run(actions, job));
    l.lock();
  }
}

Response AgentHttpTrigger::Run(AgentActions& actions, Job& job) {
  const auto deadline = job.arrived + std::chrono::milliseconds(spec_.run_timeout_ms);
  const rapidjson::Value& event = *job.event;
  agents::RunTrace t = agents::RunAgent(spec_, job.run_id, 1, event, actions, deadline);
  metrics_->Record(t);
  if (t.outcome != "failed") {
    const double latency_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - job.arrived)
            .count();
    live_->RecordRun(latency_ms);
    metrics_->RecordLatency(latency_ms);
  }
  if (auto recorded = redis_->Run(RunRecord(spec_, o_.runs_max_len, t));
      !recorded.ok() || recorded->is_error()) {
    LOG_WARNING("agent {}: run {} not recorded: {}", spec_.name, t.run_id,
                recorded.ok() ? recorded->str : recorded.status().message());
  }
  std::string body = "{\"run_id\":";
  rapidjson::Value id(t.run_id.c_str(), static_cast<rapidjson::SizeType>(t.run_id.size()));
  body += agents::ValueJson(id) + ",\"outcome\":\"" + t.outcome + "\"";
  if (!t.error.empty()) {
    rapidjson::Value e(t.error.c_str(), static_cast<rapidjson::SizeType>(t.error.size()));
    body += ",\"error\":" + agents::ValueJson(e);
  }
  body += ",\"trace\":" + t.ToJson() + ",\"context\":" + t.context + "}";
  return Response{t.outcome == "failed" ? StatusOfFailure(t.error_code) : 200,
                  "application/json",
                  std::move(body),
                  {}};
}

}  // namespace dais::cmd
