// HTTP triggers of agents through the gateway (gateway_impl.h, HandleAgent; docs/agents.md,
// "Triggers"): POST /v1/agents/<name>/runs is authenticated (with --jwks, only the agent's own
// tenant may call it: 403 otherwise), admitted by the tenant's token bucket, and forwarded as it
// came (body, Idempotency-Key, trace headers) to one of the agent's runtimes with the key it
// published (x-dais-agent-key), which answers when the run ended. A runtime that cannot be
// reached, or that refused before running (x-dais-not-run: 503 stopping, busy, paused; 401 a key
// changed by a restart the watch has not delivered yet), is
// skipped for the next; a run that started is never sent twice (a client retries with its
// Idempotency-Key).
#include <algorithm>
#include <memory>

#include "gateway/gateway_impl.h"

namespace dais::gateway {

using frontends::http::Request;
using frontends::http::Responder;
using frontends::http::Response;

namespace {

struct AgentCall {
  Gateway::Impl* g = nullptr;
  std::shared_ptr<const View> view;
  const View::AgentEndpoints* agent = nullptr;  // in `view`
  std::string name;
  size_t next = 0;  // the runtime of the next try
  size_t tried = 0;
  UpstreamRequest request;
  Responder respond;
};

void Finish(const std::shared_ptr<AgentCall>& c, Response r) {
  c->respond(std::move(r));
  c->g->in_flight.fetch_sub(1);
}

void TryAgent(std::shared_ptr<AgentCall> c) {
  if (c->tried >= c->agent->runtimes.size()) {
    return Finish(c, Error(503, "agent " + c->name + ": none of its " +
                                    std::to_string(c->agent->runtimes.size()) +
                                    " runtime(s) could be reached"));
  }
  const View::AgentEndpoints::Runtime& runtime =
      c->agent->runtimes[c->next % c->agent->runtimes.size()];
  const std::string address = runtime.http;
  ++c->next;
  ++c->tried;
  UpstreamRequest request = c->request;  // (kept for a try on another runtime)
  if (!runtime.key.empty()) request.headers.emplace_back("x-dais-agent-key", runtime.key);
  c->g->pool.Send(address, std::move(request), [c, address](UpstreamResult r) {
    if (r.connect_failed) return TryAgent(c);
    // Refused before any run started (stopping, busy, paused): another runtime may take it.
    const bool not_run = r.status.ok() && (r.response.status == 503 || r.response.status == 401) &&
                         std::any_of(r.response.headers.begin(), r.response.headers.end(),
                                     [](const auto& h) { return h.first == "x-dais-not-run"; });
    if (not_run && c->tried < c->agent->runtimes.size()) return TryAgent(c);
    if (!r.status.ok()) {
      const bool late = r.status.code() == StatusCode::kDeadlineExceeded;
      return Finish(c, Error(late ? 504 : 502, "agent " + c->name + " at " + address + ": " +
                                                   std::string(r.status.message())));
    }
    Response out{r.response.status, "application/json", std::move(r.response.body), {}};
    for (auto& [k, v] : r.response.headers) {
      if (k == "content-type") {
        out.content_type = std::move(v);
      } else if (k == "retry-after") {
        out.headers.emplace_back("Retry-After", std::move(v));
      }
    }
    Finish(c, std::move(out));
  });
}

}  // namespace

void Gateway::Impl::HandleAgent(Request request, Responder respond) {
  if (auto loop = RefuseLoop(request.Header(kHopsHeader))) return respond(std::move(*loop));
  std::string tenant;
  if (auto refused = Authenticate(request, &tenant)) {
    return respond(std::move(*refused));
  }
  static const std::string kBase = "/v1/agents/";
  const std::string rest = request.path.substr(kBase.size());
  const size_t slash = rest.find('/');
  if (slash == std::string::npos || slash == 0 || rest.substr(slash) != "/runs") {
    return respond(
        Error(404, request.path + ": an agent's HTTP trigger is /v1/agents/<name>/runs"));
  }
  if (request.method != "POST") {
    return respond(Error(405, request.path + " is a POST (the event's fields as a JSON object)"));
  }
  if (snapshots.load() < kWatchedPrefixes) {
    return respond(Error(503, "the gateway has not read the agents from etcd yet"));
  }
  auto c = std::make_shared<AgentCall>();
  c->g = this;
  c->name = rest.substr(0, slash);
  c->view = Current();
  auto it = c->view->agents.find(c->name);
  if (it == c->view->agents.end() || it->second.runtimes.empty()) {
    return respond(Error(404, "agent " + c->name +
                                  " has no runtime serving an HTTP trigger (trigger.http: true; "
                                  "dais ctl get agents)"));
  }
  if (jwks != nullptr && it->second.tenant != tenant) {
    return respond(Error(403, "tenant '" + tenant + "' may not call agent " + c->name));
  }
  if (auto refused = Admit(*c->view, tenant, "")) return respond(std::move(*refused));
  c->agent = &it->second;
  c->next = Random();
  c->request.method = "POST";
  c->request.target = request.path;
  c->request.headers = ForwardedHeaders(request);
  std::erase_if(c->request.headers,  // (the runtime's key is the gateway's to send)
                [](const auto& h) { return h.first == "x-dais-agent-key"; });
  c->request.body = std::move(request.body);
  // The runtime bounds the run by the agent's run_timeout from the call's arrival; a little
  // more here for the answer to come back.
  c->request.deadline = Clock::now() + std::chrono::milliseconds(c->agent->run_timeout_ms + 2000);
  c->respond = std::move(respond);
  in_flight.fetch_add(1);  // until Finish
  TryAgent(std::move(c));
}

}  // namespace dais::gateway
