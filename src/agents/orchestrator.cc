#include "agents/orchestrator.h"

#include <algorithm>

#include "fmt/format.h"

namespace dais::agents {
namespace {

const AgentLoad* LoadOf(const std::map<std::string, AgentLoad>& loads, const std::string& name) {
  auto it = loads.find(name);
  return it == loads.end() || !it->second.reporting ? nullptr : &it->second;
}

const std::string& State(const std::map<std::string, AgentControl>& controls,
                         const std::string& name) {
  static const std::string kRunning = "running";
  auto it = controls.find(name);
  return it == controls.end() ? kRunning : it->second.state;
}

}  // namespace

void Orchestrator::Signals(const std::vector<AgentSpec>& agents,
                           const std::map<std::string, AgentLoad>& loads,
                           const std::map<std::string, AgentControl>& controls,
                           const std::map<std::string, NodeLoad>& nodes, Signal worst[3],
                           int* uncalm_rank) const {
  *uncalm_rank = 3;
  const double throttle = std::min(options_.throttle_fraction, options_.pause_fraction);
  for (const AgentSpec& a : agents) {
    const AgentLoad* load = LoadOf(loads, a.name);
    // Only agents that run freely signal or hold a release back: one that gave way (paused or
    // throttled) has a latency that grows with its backlog, by design.
    if (State(controls, a.name) != "running" || a.sla_p99_ms <= 0 || load == nullptr) continue;
    bool calm = true;
    Signal s;
    const std::string who = fmt::format("agent {} ({} priority)", a.name, a.priority);
    if (load->p99_ms > options_.pause_fraction * a.sla_p99_ms) {
      s = {2, fmt::format("{} p99 {:.0f} ms > {:g} of its SLA {:g} ms (backlog {})", who,
                          load->p99_ms, options_.pause_fraction, a.sla_p99_ms, load->backlog)};
    } else if (load->p99_ms > throttle * a.sla_p99_ms) {
      s = {1, fmt::format("{} p99 {:.0f} ms > {:g} of its SLA {:g} ms (backlog {})", who,
                          load->p99_ms, throttle, a.sla_p99_ms, load->backlog)};
    }
    if (load->p99_ms > options_.calm_fraction * throttle * a.sla_p99_ms) calm = false;
    for (const std::string& node : load->nodes) {
      auto n = nodes.find(node);
      if (n == nodes.end() || options_.cpu_busy >= 1) continue;  // (1: the CPU is no signal)
      if (n->second.cpu_busy >= options_.cpu_calm) calm = false;
      if (n->second.cpu_busy >= options_.cpu_busy && s.level == 0) {
        s = {1, fmt::format("node {} CPU {:.0f}% busy (at least {:g}%), where {} runs", node,
                            100 * n->second.cpu_busy, 100 * options_.cpu_busy, who)};
      }
    }
    if (!calm) *uncalm_rank = std::min(*uncalm_rank, a.PriorityRank());
    Signal& w = worst[a.PriorityRank()];
    if (s.level > w.level) w = std::move(s);
  }
}

double Orchestrator::ThrottleRate(const std::string& agent,
                                  const std::map<std::string, AgentControl>& controls) const {
  auto it = running_rate_.find(agent);
  if (it == running_rate_.end()) {
    // Not seen running by this leader (a new one): what the last decision noted, if anything.
    auto c = controls.find(agent);
    return std::max(options_.min_rate, c == controls.end() ? 0 : c->second.rate);
  }
  return std::max(options_.min_rate, options_.throttle_factor * it->second);
}

std::vector<Decision> Orchestrator::Evaluate(int64_t now_ms, const std::vector<AgentSpec>& agents,
                                             const std::map<std::string, AgentLoad>& loads,
                                             const std::map<std::string, AgentControl>& controls,
                                             const std::map<std::string, NodeLoad>& nodes) {
  std::vector<Decision> out;
  for (const AgentSpec& a : agents) {  // the rate each ran at, for a later throttle
    const AgentLoad* load = LoadOf(loads, a.name);
    if (load != nullptr && State(controls, a.name) == "running" && load->window_runs > 0) {
      running_rate_[a.name] =
          static_cast<double>(load->window_runs) * 1000.0 / static_cast<double>(a.sla_window_ms);
    }
  }
  Signal worst[3];
  int uncalm_rank = 3;  // the highest priority with a running agent not calm
  Signals(agents, loads, controls, nodes, worst, &uncalm_rank);
  bool signalled = false;
  for (const AgentSpec& b : agents) {
    const Signal* above = nullptr;  // the worst signal of a higher priority
    for (int r = 0; r < b.PriorityRank(); ++r) {
      if (worst[r].level > 0 && (above == nullptr || worst[r].level > above->level)) {
        above = &worst[r];
      }
    }
    if (above == nullptr) {
      eased_since_ms_.erase(b.name);
      continue;
    }
    signalled = true;
    const std::string& state = State(controls, b.name);
    if (above->level != 1 || state != "paused") eased_since_ms_.erase(b.name);
    if (above->level == 1 && state == "paused") {
      // Paused for a signal that has eased to the throttle's level: throttled once it stayed
      // there for calm_ms (not paused for as long as the signal lasts).
      auto [since, fresh] = eased_since_ms_.emplace(b.name, now_ms);
      if (!fresh && now_ms - since->second >= options_.calm_ms) {
        const double rate = ThrottleRate(b.name, controls);
        out.push_back({b.name,
                       {"throttled",
                        fmt::format("{}, for {} ms (eased from a pause): {:.3g} runs/s", above->why,
                                    options_.calm_ms, rate),
                        rate}});
        eased_since_ms_.erase(since);
      }
    } else if (above->level == 2 && state != "paused") {
      // (the rate it is to get when released to throttled, noted for a later leader)
      out.push_back({b.name, {"paused", above->why, ThrottleRate(b.name, controls)}});
    } else if (above->level == 1 && state == "running") {
      const double rate = ThrottleRate(b.name, controls);
      out.push_back(
          {b.name, {"throttled", fmt::format("{}: {:.3g} runs/s", above->why, rate), rate}});
    }
  }
  if (signalled) {
    calm_since_ms_ = -1;
    return out;
  }
  // No signal: the highest priority that gave way steps back once all ran calm for calm_ms.
  int release_rank = 3;
  for (const AgentSpec& a : agents) {
    if (State(controls, a.name) != "running") {
      release_rank = std::min(release_rank, a.PriorityRank());
    }
  }
  // Calm: every running agent of a higher priority than those to release within its margin.
  const bool calm = uncalm_rank >= release_rank;
  if (release_rank == 3 || !calm) {
    calm_since_ms_ = calm ? now_ms : -1;
    return out;
  }
  if (calm_since_ms_ < 0) calm_since_ms_ = now_ms;
  if (now_ms - calm_since_ms_ < options_.calm_ms) return out;
  const std::string why = fmt::format(
      "every agent within its SLA (p99 at most {:g} of it) and its nodes' CPU below "
      "{:g}% for {} ms",
      options_.calm_fraction * std::min(options_.throttle_fraction, options_.pause_fraction),
      100 * options_.cpu_calm, options_.calm_ms);
  for (const AgentSpec& a : agents) {
    if (a.PriorityRank() != release_rank) continue;
    const std::string& state = State(controls, a.name);
    if (state == "paused") {
      const double rate = ThrottleRate(a.name, controls);
      out.push_back({a.name, {"throttled", fmt::format("{}: {:.3g} runs/s", why, rate), rate}});
    } else if (state == "throttled") {
      out.push_back({a.name, {"running", why, 0}});
    }
  }
  calm_since_ms_ = now_ms;  // the next step waits a calm period of its own
  return out;
}

}  // namespace dais::agents
