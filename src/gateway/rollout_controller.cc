#include "gateway/rollout_controller.h"

#include <rapidjson/document.h>

#include <chrono>
#include <cmath>
#include <future>

#include "cluster/keys.h"
#include "common/json.h"
#include "common/logging.h"
#include "fmt/format.h"
#include "gateway/upstream.h"
#include "metrics/registry.h"

namespace dais::gateway {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

RolloutController::RolloutController(std::vector<std::string> etcd_endpoints,
                                     std::function<int64_t()> leader_revision,
                                     std::string leader_key, std::string prometheus,
                                     AccuracySource accuracy)
    : endpoints_(std::move(etcd_endpoints)),
      leader_revision_(std::move(leader_revision)),
      leader_key_(std::move(leader_key)),
      prometheus_(std::move(prometheus)),
      accuracy_(std::move(accuracy)),
      cv_(&mu_) {}

RolloutController::~RolloutController() { Stop(); }

Status RolloutController::Start() {
  ASSIGN_OR_RETURN(client_, etcd::Client::Create({endpoints_}));
  pool_ = std::make_unique<UpstreamPool>(UpstreamOptions{1, 16, 64ull << 20});
  for (auto [prefix, view] :
       {std::pair{kRolloutsPrefix, &rollouts_}, std::pair{kRoutesPrefix, &routes_},
        std::pair{kGatewaysPrefix, &gateways_},
        std::pair{static_cast<const char*>(cluster::kNodesPrefix), &nodes_}}) {
    etcd::Watcher::Callbacks cb;
    cb.on_snapshot = [this, view = view](const etcd::RangeResult& r)
                         DAIS_NO_THREAD_SAFETY_ANALYSIS {
                           MutexLock l(&mu_);
                           view->clear();
                           for (const auto& kv : r.kvs) (*view)[kv.key] = kv.value;
                         };
    cb.on_events = [this, view = view](const std::vector<etcd::Event>& events)
                       DAIS_NO_THREAD_SAFETY_ANALYSIS {
                         MutexLock l(&mu_);
                         for (const auto& e : events) {
                           if (e.type == etcd::Event::Type::kPut) {
                             (*view)[e.kv.key] = e.kv.value;
                             revisions_[e.kv.key] = e.kv.mod_revision;
                           } else {
                             view->erase(e.kv.key);
                             revisions_.erase(e.kv.key);
                           }
                         }
                         cv_.SignalAll();
                       };
    watchers_.push_back(std::make_unique<etcd::Watcher>(client_.get(), prefix, std::move(cb)));
  }
  thread_ = std::thread([this] { Loop(); });
  return OkStatus();
}

void RolloutController::Stop() {
  {
    MutexLock l(&mu_);
    if (stop_) return;
    stop_ = true;
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
  watchers_.clear();
  pool_.reset();
}

StatusOr<std::string> RolloutController::Get(const std::string& address,
                                             const std::string& target) {
  auto p = std::make_shared<std::promise<UpstreamResult>>();
  auto answer = p->get_future();
  UpstreamRequest r;
  r.method = "GET";
  r.target = target;
  r.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  pool_->Send(address, std::move(r),
              [p](UpstreamResult result) { p->set_value(std::move(result)); });
  UpstreamResult result = answer.get();
  if (!result.status.ok()) return result.status;
  if (result.response.status != 200) {
    return Unavailable("GET " + address + target.substr(0, target.find('?')) + ": HTTP " +
                       std::to_string(result.response.status) + " " +
                       result.response.body.substr(0, 200));
  }
  return std::move(result.response.body);
}

StatusOr<double> RolloutController::Query(const std::string& promql) {
  std::string encoded;
  for (unsigned char c : promql) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      encoded += static_cast<char>(c);
    } else {
      encoded += fmt::format("%{:02X}", c);
    }
  }
  ASSIGN_OR_RETURN(std::string body, Get(prometheus_, "/api/v1/query?query=" + encoded));
  rapidjson::Document d;
  RETURN_IF_ERROR(json::ParseJson(body, &d));
  if (!d.IsObject() || !d.HasMember("status") || !d["status"].IsString() ||
      std::string(d["status"].GetString()) != "success" || !d.HasMember("data") ||
      !d["data"].IsObject() || !d["data"].HasMember("result") || !d["data"]["result"].IsArray()) {
    return Unavailable("Prometheus: unexpected answer to '" + promql + "': " + body.substr(0, 200));
  }
  double sum = 0;
  for (const auto& sample : d["data"]["result"].GetArray()) {
    if (!sample.IsObject() || !sample.HasMember("value") || !sample["value"].IsArray() ||
        sample["value"].Size() != 2 || !sample["value"][1].IsString()) {
      continue;
    }
    const double v = std::strtod(sample["value"][1].GetString(), nullptr);
    if (std::isfinite(v)) sum += v;
  }
  return sum;
}

bool RolloutController::QueryPrometheus(const Rollout& r, int64_t now_ms, Figures* out) {
  const int64_t window = std::max<int64_t>(1, (now_ms - r.step_started_ms + 999) / 1000);
  const std::string sel = fmt::format("route=\"{}\",version=\"{}\"", r.route, r.to);
  auto requests =
      Query(fmt::format("sum(increase(dais_gateway_requests_total{{{}}}[{}s]))", sel, window));
  auto errors = Query(fmt::format(
      "sum(increase(dais_gateway_requests_total{{{},code=~\"5..\"}}[{}s]))", sel, window));
  auto p99 =
      Query(fmt::format("histogram_quantile(0.99, sum by (le) "
                        "(increase(dais_gateway_request_duration_seconds_bucket{{{}}}[{}s])))",
                        sel, window));
  for (const auto* q : {&requests, &errors, &p99}) {
    if (!q->ok()) {
      LOG_WARNING("rollouts: {}: {}", r.route, q->status().message());
      return false;
    }
  }
  out->requests = static_cast<int64_t>(std::llround(*requests));
  out->errors = static_cast<int64_t>(std::llround(*errors));
  out->p99_ms = *p99 * 1000.0;
  return true;
}

bool RolloutController::ScrapeRegistered(bool nodes, std::map<std::string, Scrape>* out) {
  std::vector<std::string> addresses;
  {
    MutexLock l(&mu_);
    for (const auto& [key, json] : nodes ? nodes_ : gateways_) {
      rapidjson::Document d;
      if (json::ParseJson(json, &d).ok() && d.IsObject() && d.HasMember("http") &&
          d["http"].IsString()) {
        addresses.push_back(d["http"].GetString());
      }
    }
  }
  std::vector<std::future<UpstreamResult>> answers;
  for (const std::string& a : addresses) {
    auto p = std::make_shared<std::promise<UpstreamResult>>();
    answers.push_back(p->get_future());
    UpstreamRequest r;
    r.method = "GET";
    r.target = "/metrics";
    r.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    pool_->Send(a, std::move(r), [p](UpstreamResult result) { p->set_value(std::move(result)); });
  }
  bool any = false;
  for (size_t i = 0; i < answers.size(); ++i) {
    UpstreamResult r = answers[i].get();
    if (!r.status.ok() || r.response.status != 200) {
      LOG_WARNING("rollouts: {} {} did not answer /metrics: {}", nodes ? "node" : "gateway",
                  addresses[i],
                  r.status.ok() ? "HTTP " + std::to_string(r.response.status) : r.status.message());
      continue;
    }
    (*out)[addresses[i]] = ParseGatewayMetrics(r.response.body);
    any = true;
  }
  return any;
}

bool RolloutController::SinceBaseline(std::map<std::string, Scrape>& baseline,
                                      std::map<std::string, Scrape> now, bool reset,
                                      Scrape* since) {
  if (reset) {
    baseline = std::move(now);
    return false;
  }
  // Per address, since its baseline; one seen for the first time counts from now on (its
  // history belongs to earlier steps), one that did not answer this round adds nothing.
  for (auto& [address, scrape] : now) {
    auto b = baseline.find(address);
    if (b == baseline.end()) {
      baseline[address] = std::move(scrape);
      continue;
    }
    // Restarted since the baseline: its counters began again at zero, so from now on its
    // baseline is zero (otherwise each series would be judged against the old baseline again
    // once it grew past it, and its histogram's buckets mixed from both).
    if (WentDown(b->second, scrape)) b->second = Scrape{};
    Merge(since, DeltaScrape(b->second, scrape));
  }
  return true;
}

void RolloutController::Loop() DAIS_NO_THREAD_SAFETY_ANALYSIS {
  while (true) {
    std::map<std::string, std::string> rollouts;
    {
      MutexLock l(&mu_);
      if (stop_) return;
      cv_.WaitUntil(std::chrono::steady_clock::now() + std::chrono::milliseconds(250));
      if (stop_) return;
      rollouts = rollouts_;
    }
    const int64_t revision = leader_revision_();
    if (revision == 0) {
      baselines_.clear();  // a later leadership measures afresh
      continue;
    }
    for (const auto& [key, json] : rollouts) {
      auto r = RolloutFromJson(json);
      if (!r.ok()) {
        LOG_WARNING("rollouts: ignoring {}: {}", key, r.status().message());
        continue;
      }
      if (r->state == "running") Step(*r, json, revision);
    }
  }
}

bool RolloutController::Measure(const Rollout& current, int64_t now_ms, Figures* f) {
  Baseline& base = baselines_[current.route];
  const bool reset = base.step != current.step || base.step_started_ms != current.step_started_ms;
  if (reset) {
    base = Baseline{current.step, current.step_started_ms, {}, {}};
    if (current.max_psi > 0) ScrapeRegistered(true, &base.node_scrapes);
  }
  if (!prometheus_.empty()) {
    if (!QueryPrometheus(current, now_ms, f)) return false;
  } else {
    std::map<std::string, Scrape> now;
    if (!ScrapeRegistered(false, &now))
      return false;  // no gateway: nothing measured, nothing decided
    Scrape since;
    if (!SinceBaseline(base.scrapes, std::move(now), reset, &since)) return false;
    *f = Delta(Scrape{}, since, current.route, current.to);
  }
  std::string model = current.route;
  {
    MutexLock l(&mu_);
    auto it = routes_.find(kRoutesPrefix + current.route);
    if (it != routes_.end()) {
      if (auto route = ParseRoute(it->second); route.ok() && !route->model.empty()) {
        model = route->model;
      }
    }
  }
  if (!current.accuracy_label.empty() && accuracy_) {
    auto counts = accuracy_(
        {model, current.to, current.from, current.accuracy_label, current.step_started_ms});
    if (counts.ok()) {
      AddAccuracy(*counts, current.to, current.from, current.min_requests, f);
    } else {
      LOG_WARNING("rollouts: {}: live accuracy: {}", current.route, counts.status().message());
    }
  }
  if (current.max_psi > 0) {
    std::map<std::string, Scrape> now;
    Scrape since;
    if (!reset && ScrapeRegistered(true, &now) &&
        SinceBaseline(base.node_scrapes, std::move(now), false, &since)) {
      AddScores(since, model, current.to, current.from, current.min_requests, f);
    }
  }
  return true;
}

void RolloutController::Step(const Rollout& current, const std::string& json, int64_t revision) {
  const int64_t now_ms = NowMs();
  Figures f;
  if (!Measure(current, now_ms, &f)) return;
  const Decision d = Decide(current, f, now_ms);
  if (d.kind == Decision::kWait) return;
  std::string route_json;
  int64_t route_revision = 0, rollout_revision = 0;
  {
    MutexLock l(&mu_);
    auto it = routes_.find(kRoutesPrefix + current.route);
    if (it != routes_.end()) route_json = it->second;
    auto r = revisions_.find(kRoutesPrefix + current.route);
    if (r != revisions_.end()) route_revision = r->second;
    auto o = rollouts_.find(kRolloutsPrefix + current.route);
    if (o == rollouts_.end() || o->second != json) {
      return;  // changed while it was measured (dais ctl rollback...): next round decides
    }
    rollout_revision = revisions_[kRolloutsPrefix + current.route];
  }
  auto route = ParseRoute(route_json);
  if (!route.ok()) {
    LOG_WARNING("rollouts: route {} is gone or invalid ({}): rollout left as is", current.route,
                route.status().message());
    return;
  }
  Rollout next = current;
  const int weight = current.steps[static_cast<size_t>(current.step)];
  const char* decision = d.kind == Decision::kRollBack  ? "rolled back"
                         : d.kind == Decision::kPromote ? "promoted"
                                                        : "next step";
  next.history.push_back({current.step, weight, f.requests, f.error_rate(), f.p99_ms, f.psi,
                          f.accuracy_measured() ? f.canary_accuracy - f.stable_accuracy : -2,
                          decision, now_ms});
  int new_weight = 0;
  if (d.kind == Decision::kRollBack) {
    next.state = "rolled_back";
    next.reason = d.reason;
  } else if (d.kind == Decision::kPromote) {
    next.state = "promoted";
    next.reason = d.reason;
    new_weight = 100;
  } else {
    next.step = current.step + 1;
    next.step_started_ms = now_ms;
    new_weight = next.steps[static_cast<size_t>(next.step)];
  }
  const RouteSpec out = RouteAtWeight(*route, current.from, current.to, new_weight);
  // Leadership, and neither record changed since read: an operator's rollback or route edit
  // made meanwhile is never overwritten.
  using etcd::Compare;
  const std::vector<Compare> unchanged = {
      {leader_key_, Compare::Target::kCreateRevision, Compare::Op::kEqual, revision, ""},
      {kRoutesPrefix + current.route, Compare::Target::kModRevision, Compare::Op::kEqual,
       route_revision, ""},
      {kRolloutsPrefix + current.route, Compare::Target::kModRevision, Compare::Op::kEqual,
       rollout_revision, ""}};
  auto txn = client_->Txn(
      unchanged,
      {etcd::Op{etcd::Op::Kind::kPut, kRolloutsPrefix + current.route, next.ToJson(), 0, false},
       etcd::Op{etcd::Op::Kind::kPut, kRoutesPrefix + current.route, RouteToJson(out), 0, false}});
  if (!txn.ok() || !txn->succeeded) {
    LOG_WARNING("rollouts: {}: the write did not go through ({}); again next round", current.route,
                txn.ok() ? "not the leader any more, or the route or rollout changed"
                         : txn.status().message());
    return;
  }
  static metrics::Family<metrics::Counter>& decisions = metrics::Registry::Global().AddCounter(
      "dais_rollout_decisions_total",
      "Rollout steps decided by the leading scheduler: next_step, promoted, rolled_back",
      {"route", "decision"});
  decisions
      .Get({current.route, d.kind == Decision::kRollBack  ? "rolled_back"
                           : d.kind == Decision::kPromote ? "promoted"
                                                          : "next_step"})
      .Increment();
  if (d.kind == Decision::kRollBack) {
    LOG_WARNING("rollouts: {}: v{} rolled back to v{}: {}", current.route, current.to, current.from,
                d.reason);
  } else {
    LOG_INFO("rollouts: {}: v{} {} at {} % ({})", current.route, current.to, decision, new_weight,
             d.reason);
  }
}

}  // namespace dais::gateway
