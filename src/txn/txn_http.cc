#include "txn/txn_http.h"

#include <memory>

#include "frontends/http/router.h"
#include "metrics/registry.h"
#include "txn/coordinator.h"

namespace dais::txn {

using frontends::http::Request;
using frontends::http::Responder;
using frontends::http::Response;
using frontends::http::RouteParams;

frontends::http::Handler MakeTxnHandler(Coordinator* c) {
  auto router = std::make_shared<frontends::http::Router>();
  router->Add("GET", "/health/live", [](Request&, const RouteParams&, Responder& respond) {
    respond(Response{200, "application/json", "{\"live\":true}", {}});
  });
  router->Add("GET", "/health/ready", [c](Request&, const RouteParams&, Responder& respond) {
    const bool ready = c->Ready();
    respond(Response{ready ? 200 : 503,
                     "application/json",
                     ready ? "{\"ready\":true}" : "{\"ready\":false}",
                     {}});
  });
  router->Add("GET", "/metrics", [](Request&, const RouteParams&, Responder& respond) {
    respond(Response{
        200, "text/plain; version=0.0.4; charset=utf-8", metrics::Registry::Global().Expose(), {}});
  });
  router->Add(
      "POST", "/v1/txn/{type}", [c](Request& req, const RouteParams& p, Responder& respond) {
        CallTrace trace{std::string(req.Header("traceparent")),
                        std::string(req.Header("x-request-id"))};
        c->Submit(p.Get("type"), std::move(req.body), std::string(req.Header("idempotency-key")),
                  std::move(trace), [respond](Outcome o) {
                    Response r{o.http_status, "application/json", std::move(o.body), {}};
                    if (o.http_status == 503) r.headers.emplace_back("Retry-After", "1");
                    r.headers.emplace_back("x-request-id", std::move(o.request_id));
                    respond(std::move(r));
                  });
      });
  router->Add("GET", "/v1/txn/{id}", [c](Request&, const RouteParams& p, Responder& respond) {
    c->Lookup(p.Get("id"), [respond](Outcome o) {
      respond(Response{o.http_status, "application/json", std::move(o.body), {}});
    });
  });
  router->SetNotFoundHint("(dais txn serves POST /v1/txn/<type>, GET /v1/txn/<id>, /metrics)");
  return [router](Request req, Responder respond) { router->Dispatch(req, respond); };
}

}  // namespace dais::txn
