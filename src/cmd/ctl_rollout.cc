#include "cmd/ctl_rollout.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>

#include "common/mutex.h"
#include "etcd/watch.h"
#include "fmt/format.h"
#include "gateway/rollout.h"
#include "gateway/rollout_start.h"
#include "gateway/route.h"

namespace dais::cmd {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "30s", "500ms", "2m", "1h" -> milliseconds; -1 when malformed.
int64_t ParseDurationMs(const std::string& s) {
  size_t end = 0;
  double v = 0;
  try {
    v = std::stod(s, &end);
  } catch (...) {
    return -1;
  }
  const std::string unit = s.substr(end);
  const double scale = unit == "ms"  ? 1
                       : unit == "s" ? 1e3
                       : unit == "m" ? 6e4
                       : unit == "h" ? 3.6e6
                                     : -1;
  const double ms = v * scale;
  return scale < 0 || !(ms >= 0 && ms <= 1e12) ? -1 : static_cast<int64_t>(ms);
}

// "1%" or "0.01" -> 0.01; -1 when malformed.
double ParseRate(const std::string& s) {
  size_t end = 0;
  double v = 0;
  try {
    v = std::stod(s, &end);
  } catch (...) {
    return -1;
  }
  if (s.substr(end) == "%") return v / 100;
  return s.substr(end).empty() ? v : -1;
}

using Records = gateway::RouteAndRollout;

StatusOr<Records> Read(etcd::Client& c, const std::string& route) {
  return gateway::ReadRouteAndRollout(c, route);
}

Status Write(etcd::Client& c, const Records& read, const std::string& route_name,
             const std::string& rollout, const std::string& route) {
  return gateway::WriteRouteAndRollout(c, read, route_name, rollout, route);
}

int Start(etcd::Client& c, const RolloutCliOptions& o) {
  gateway::Rollout r;
  r.route = o.route;
  r.to = o.to;
  r.steps = o.steps;
  r.interval_ms = ParseDurationMs(o.interval);
  r.max_error_rate = ParseRate(o.max_error_rate);
  r.max_p99_ms = o.max_p99_ms;
  r.min_requests = o.min_requests;
  r.max_psi = o.max_psi;
  r.accuracy_label = o.accuracy_label;
  r.min_accuracy_delta = o.min_accuracy_delta;
  if (r.interval_ms < 0) {
    fmt::print(stderr, "dais ctl rollout start: --interval '{}': e.g. 30s, 500ms, 2m\n",
               o.interval);
    return 2;
  }
  if (r.max_error_rate < 0) {
    fmt::print(stderr, "dais ctl rollout start: --max-error-rate '{}': e.g. 1% or 0.01\n",
               o.max_error_rate);
    return 2;
  }
  if (r.max_p99_ms > 0) {
    const gateway::LimitResolution res = gateway::ResolveP99Limit(r.max_p99_ms);
    if (!res.resolved) {
      fmt::print(stderr,
                 "dais ctl rollout start: warning: --max-p99-ms {:g} is {} of the gateways' "
                 "latency histogram (0.1 ms .. 10 s, bounds within a factor 1.25): a p99 there "
                 "cannot be told apart from the limit\n",
                 r.max_p99_ms, res.Describe());
    }
  }
  auto started = gateway::StartRollout(c, r, NowMs());
  if (!started.ok()) {
    fmt::print(stderr, "dais ctl rollout start: {}\n", started.status().message());
    const StatusCode code = started.status().code();
    return code == StatusCode::kNotFound || code == StatusCode::kAlreadyExists ||
                   code == StatusCode::kInvalidArgument
               ? 2
               : 1;
  }
  fmt::print("rollout of {} v{} -> v{} started: {} % now, steps {} every {}\n", o.route,
             started->from, started->to, started->steps[0], fmt::join(started->steps, ","),
             o.interval);
  return 0;
}

// rollback with no rollout in progress: all of the route's traffic to its stable version.
StatusOr<std::string> RouteToStable(etcd::Client& c, const Records& read,
                                    const gateway::RouteSpec& route, const std::string& name) {
  if (route.stable < 0) {
    return Status(StatusCode::kFailedPrecondition, "route '" + name + "' names no stable version");
  }
  gateway::RouteSpec back = route;
  back.versions = {{route.stable, 100}};
  RETURN_IF_ERROR(Write(c, read, name, "", gateway::RouteToJson(back)));
  return fmt::format("{}: all traffic on the stable v{} (no rollout in progress)", name,
                     route.stable);
}

// Operator decisions are int codes for `dais ctl`: 2 for what the operator got wrong.
int Report(const char* who, const StatusOr<std::string>& done) {
  if (done.ok()) {
    fmt::print("{}\n", *done);
    return 0;
  }
  fmt::print(stderr, "{}: {}\n", who, done.status().message());
  const StatusCode code = done.status().code();
  return code == StatusCode::kNotFound || code == StatusCode::kFailedPrecondition ? 2 : 1;
}

int Status_(etcd::Client& c, const RolloutCliOptions& o) {
  auto read = Read(c, o.route);
  auto r = read.ok() ? gateway::RolloutFromJson(read->rollout) : read.status();
  if (!r.ok()) {
    fmt::print(stderr, "dais ctl rollout status: no rollout of '{}'\n", o.route);
    return 2;
  }
  if (o.output == "json") {
    fmt::print("{}\n", r->ToJson());
    return 0;
  }
  std::string p99 = "p99 unchecked";
  if (r->max_p99_ms > 0) {
    const gateway::LimitResolution res = gateway::ResolveP99Limit(r->max_p99_ms);
    p99 = fmt::format("p99 {:g} ms ({}{})", r->max_p99_ms, res.Describe(),
                      res.resolved ? "" : ": not resolved by the gateways' buckets");
  }
  fmt::print(
      "route {}: v{} -> v{}, {}; step {} of {} ({} %), interval {} ms, limits: errors "
      "{:.2f} %, {}, {}, {}\n",
      r->route, r->from, r->to, r->state, r->step + 1, r->steps.size(),
      r->steps[static_cast<size_t>(r->step)], r->interval_ms, r->max_error_rate * 100, p99,
      r->max_psi > 0 ? fmt::format("score PSI {:g}", r->max_psi) : "scores unchecked",
      r->accuracy_label.empty()
          ? "accuracy unchecked"
          : fmt::format("accuracy on '{}' {:+g}", r->accuracy_label, r->min_accuracy_delta));
  if (!r->reason.empty()) fmt::print("reason: {}\n", r->reason);
  // A p99 is known only to its latency bucket: the gateway's analysis reads the bucket's upper
  // bound, Prometheus interpolates inside it. BUCKET shows which one held it.
  fmt::print("{:<6} {:>7} {:>9} {:>9} {:>9} {:>16} {:>7} {:>7}  {}\n", "STEP", "WEIGHT", "REQUESTS",
             "ERRORS", "P99 MS", "P99 BUCKET MS", "PSI", "ACC +/-", "DECISION");
  for (const auto& h : r->history) {
    std::string bucket = "-";
    if (h.requests > 0 && h.p99_ms > 0) {
      const gateway::LimitResolution b = gateway::ResolveP99Limit(h.p99_ms);
      bucket = std::isinf(b.upper_ms) ? fmt::format("({:g}, +Inf)", b.lower_ms)
                                      : fmt::format("({:g}, {:g}]", b.lower_ms, b.upper_ms);
    }
    fmt::print("{:<6} {:>6}% {:>9} {:>8.2f}% {:>9.1f} {:>16} {:>7} {:>7}  {}\n", h.step + 1,
               h.weight, h.requests, h.error_rate * 100, h.p99_ms, bucket,
               h.psi >= 0 ? fmt::format("{:.3f}", h.psi) : "-",
               h.accuracy_delta >= -1 ? fmt::format("{:+.3f}", h.accuracy_delta) : "-", h.decision);
  }
  return 0;
}

bool Finished(const std::string& state) {
  return state == "promoted" || state == "rolled_back" || state == "aborted";
}

// --watch: the status again at each change of the rollout's record (an etcd watch), until it
// ends: exit 0 when promoted, 1 when rolled back or aborted (as kubectl rollout status).
int WatchStatus(etcd::Client& c, const RolloutCliOptions& o) {
  Mutex mu;
  CondVar changed(&mu);
  int64_t seen = -1, shown = 0;
  etcd::Watcher::Callbacks cb;
  auto bump = [&] {
    MutexLock l(&mu);
    ++seen;
    changed.SignalAll();
  };
  cb.on_snapshot = [&](const etcd::RangeResult&) { bump(); };
  cb.on_events = [&](const std::vector<etcd::Event>&) { bump(); };
  etcd::Watcher watch(&c, gateway::kRolloutsPrefix + o.route, std::move(cb));
  for (;;) {
    {
      MutexLock l(&mu);
      while (seen < shown) changed.Wait();
      shown = seen + 1;
    }
    if (int rc = Status_(c, o); rc != 0) return rc;
    std::fflush(stdout);
    auto read = Read(c, o.route);
    auto r = read.ok() ? gateway::RolloutFromJson(read->rollout) : read.status();
    if (r.ok() && Finished(r->state)) return r->state == "promoted" ? 0 : 1;
  }
}

}  // namespace

StatusOr<std::string> DecideRollout(etcd::Client& c, const std::string& name,
                                    const std::string& verb, const std::string& who) {
  ASSIGN_OR_RETURN(Records read, Read(c, name));
  auto route = gateway::ParseRoute(read.route);
  if (read.route.empty() || !route.ok()) {
    return Status(StatusCode::kNotFound, "no route '" + name + "'");
  }
  auto r = gateway::RolloutFromJson(read.rollout);
  if (verb == "rollback") {
    if (!r.ok() || (r->state != "running" && r->state != "paused" && r->state != "promoted")) {
      return RouteToStable(c, read, *route, name);  // no rollout to end
    }
    const std::string decision = "rolled back by " + who;
    r->history.push_back(
        {r->step, r->steps[static_cast<size_t>(r->step)], 0, 0, 0, -1, -2, decision, NowMs()});
    r->state = "aborted";
    r->reason = decision;
    const gateway::RouteSpec back = gateway::RouteAtWeight(*route, r->from, r->to, 0);
    RETURN_IF_ERROR(Write(c, read, name, r->ToJson(), gateway::RouteToJson(back)));
    return fmt::format("{} rolled back to v{}", name, r->from);
  }
  if (verb != "pause" && verb != "resume" && verb != "promote") {
    return Status(StatusCode::kInvalidArgument,
                  "unknown decision '" + verb + "' (rollback, pause, resume or promote)");
  }
  if (!r.ok()) return Status(StatusCode::kNotFound, "no rollout of '" + name + "'");
  const bool ok = verb == "pause"    ? r->state == "running"
                  : verb == "resume" ? r->state == "paused"
                                     : (r->state == "running" || r->state == "paused");
  if (!ok) {
    return Status(StatusCode::kFailedPrecondition,
                  fmt::format("the rollout of '{}' is {}, not {}", name, r->state,
                              verb == "resume"  ? "paused"
                              : verb == "pause" ? "running"
                                                : "running or paused"));
  }
  const int weight = r->steps[static_cast<size_t>(r->step)];
  const std::string done = verb == "pause" ? "paused" : verb == "resume" ? "resumed" : "promoted";
  const std::string decision = done + " by " + who;
  r->history.push_back({r->step, weight, 0, 0, 0, -1, -2, decision, NowMs()});
  std::string route_json = read.route;
  if (verb == "pause") {
    r->state = "paused";
  } else if (verb == "resume") {
    r->state = "running";
    r->step_started_ms = NowMs();
  } else {
    r->state = "promoted";
    r->reason = decision;
    route_json = gateway::RouteToJson(gateway::RouteAtWeight(*route, r->from, r->to, 100));
  }
  RETURN_IF_ERROR(Write(c, read, name, r->ToJson(), route_json));
  return fmt::format("{}: rollout v{} -> v{} {} at {} %", name, r->from, r->to, done,
                     verb == "promote" ? 100 : weight);
}

void AddRolloutCommands(CLI::App* ctl, RolloutCliOptions* o) {
  CLI::App* rollout = ctl->add_subcommand(
      "rollout",
      "Progressive delivery of a route's new version, analysed and rolled back by itself");
  rollout->require_subcommand(1);
  CLI::App* start = rollout->add_subcommand(
      "start", "Start moving ROUTE to --to in steps (the leading scheduler analyses each step)");
  start->add_option("route", o->route, "The route (alias).")->required();
  start->add_option("--to", o->to, "The new version.")->required();
  start->add_option("--steps", o->steps, "The canary's weight per step, in %, ending at 100.")
      ->delimiter(',')
      ->capture_default_str();
  start->add_option("--interval", o->interval, "How long each step must hold (30s, 500ms, 2m).")
      ->capture_default_str();
  start
      ->add_option("--max-error-rate", o->max_error_rate,
                   "5xx share of the canary that rolls back (1% or 0.01).")
      ->capture_default_str();
  start->add_option("--max-p99-ms", o->max_p99_ms, "Canary p99 that rolls back (0: unchecked).")
      ->capture_default_str();
  start
      ->add_option("--min-requests", o->min_requests,
                   "Canary requests a step needs before it is judged.")
      ->capture_default_str();
  start
      ->add_option("--max-psi", o->max_psi,
                   "Model quality: the population stability index of the canary's scores "
                   "against the stable version's in the same step (the nodes' "
                   "dais_inference_score) that rolls back; 0.25 is the usual 'shifted' reading "
                   "(0: unchecked). Measured while both answer at least --min-requests rows.")
      ->capture_default_str();
  start->add_option("--accuracy-label", o->accuracy_label,
                    "Model quality from outcomes: the label (POST /labels) that judges the "
                    "answers; the canary's live accuracy on its labelled answers is compared with "
                    "the stable version's in the same step (needs dais scheduler "
                    "--feedback-stream and --label-stream). Measured once both have "
                    "--min-requests labelled answers; until then the step waits.");
  start
      ->add_option("--min-accuracy-delta", o->min_accuracy_delta,
                   "With --accuracy-label: the canary's accuracy minus the stable version's below "
                   "this rolls back (e.g. -0.01: at most a point worse; 0: at least as good).")
      ->capture_default_str();
  CLI::App* status = rollout->add_subcommand("status", "The step, the figures, the decisions");
  status->add_option("route", o->route, "The route (alias).")->required();
  status->add_option("-o,--output", o->output, "table or json (the rollout's record)")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  status->add_flag("-w,--watch", o->watch,
                   "Print again at each change until the rollout ends: exit 0 when promoted, 1 "
                   "when rolled back or aborted");
  for (const char* verb : {"pause", "resume", "promote"}) {
    const std::string v = verb;
    CLI::App* c = rollout->add_subcommand(
        verb, v == "pause"    ? "Hold ROUTE's rollout at its current weight (no analysis, no steps)"
              : v == "resume" ? "Go on with a paused rollout (the current step's interval anew)"
                              : "End ROUTE's rollout now: all traffic to the new version");
    c->add_option("route", o->route, "The route (alias).")->required();
  }
  CLI::App* rollback = ctl->add_subcommand(
      "rollback", "Send all of ROUTE's traffic back to the stable version now (ends its rollout)");
  rollback->add_option("route", o->route, "The route (alias).")->required();
}

int RunRolloutCommands(CLI::App* ctl, etcd::Client& client, const RolloutCliOptions& o) {
  if (ctl->get_subcommand("rollback")->parsed()) {
    return Report("dais ctl rollback", DecideRollout(client, o.route, "rollback", "dais ctl"));
  }
  CLI::App* rollout = ctl->get_subcommand("rollout");
  if (!rollout->parsed()) return -1;
  if (rollout->get_subcommand("start")->parsed()) return Start(client, o);
  for (const char* verb : {"pause", "resume", "promote"}) {
    if (rollout->get_subcommand(verb)->parsed()) {
      return Report(("dais ctl rollout " + std::string(verb)).c_str(),
                    DecideRollout(client, o.route, verb, "dais ctl"));
    }
  }
  return o.watch ? WatchStatus(client, o) : Status_(client, o);
}

}  // namespace dais::cmd
