#include "agents/orchestrator.h"

#include <algorithm>

#include "fmt/format.h"

namespace dais::agents {
namespace {

const AgentLoad* LoadOf(const std::map<std::string, AgentLoad>& loads, const std::string& name) {
  auto it = loads.find(name);
  return it == loads.end() || !it->second.reporting ? nullptr : &it->second;
}

bool Paused(const std::map<std::string, AgentControl>& controls, const std::string& name) {
  auto it = controls.find(name);
  return it != controls.end() && it->second.state == "paused";
}

}  // namespace

std::vector<Decision> Orchestrator::Evaluate(int64_t now_ms, const std::vector<AgentSpec>& agents,
                                             const std::map<std::string, AgentLoad>& loads,
                                             const std::map<std::string, AgentControl>& controls) {
  std::vector<Decision> out;
  // The highest priority (lowest rank) with a running agent over its SLA, and its reason.
  int breach_rank = 3;
  std::string why;
  bool calm = true;  // every running agent with an SLA within its margin
  for (const AgentSpec& a : agents) {
    const AgentLoad* load = LoadOf(loads, a.name);
    if (Paused(controls, a.name) || a.sla_p99_ms <= 0 || load == nullptr) continue;
    const double limit = options_.pause_fraction * a.sla_p99_ms;
    if (load->p99_ms > limit && a.PriorityRank() < breach_rank) {
      breach_rank = a.PriorityRank();
      why = fmt::format(
          "agent {} ({} priority) p99 {:.0f} ms > {:g} of its SLA {:g} ms (backlog {})", a.name,
          a.priority, load->p99_ms, options_.pause_fraction, a.sla_p99_ms, load->backlog);
    }
    if (load->p99_ms > options_.calm_fraction * limit) calm = false;
  }
  if (breach_rank < 3) {
    calm_since_ms_ = -1;
    for (const AgentSpec& a : agents) {
      if (a.PriorityRank() > breach_rank && !Paused(controls, a.name)) {
        out.push_back({a.name, {"paused", why}});
      }
    }
    return out;
  }
  // Nothing breached: resume the highest paused priority once all ran calm for calm_ms.
  int resume_rank = 3;
  for (const AgentSpec& a : agents) {
    if (Paused(controls, a.name)) resume_rank = std::min(resume_rank, a.PriorityRank());
  }
  if (resume_rank == 3 || !calm) {
    calm_since_ms_ = calm ? now_ms : -1;
    return out;
  }
  if (calm_since_ms_ < 0) calm_since_ms_ = now_ms;
  if (now_ms - calm_since_ms_ < options_.calm_ms) return out;
  for (const AgentSpec& a : agents) {
    if (a.PriorityRank() == resume_rank && Paused(controls, a.name)) {
      out.push_back({a.name,
                     {"running", fmt::format("every running agent within its SLA (p99 at most "
                                             "{:g} of it) for {} ms",
                                             options_.calm_fraction * options_.pause_fraction,
                                             options_.calm_ms)}});
    }
  }
  calm_since_ms_ = now_ms;  // the next priority down waits a calm period of its own
  return out;
}

}  // namespace dais::agents
