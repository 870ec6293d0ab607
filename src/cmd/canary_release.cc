#include "cmd/canary_release.h"

#include <fmt/format.h>
#include <rapidjson/document.h>

#include "cluster/keys.h"
#include "common/json.h"
#include "gateway/rollout_start.h"

namespace dais::cmd {
namespace {

// Applies the new version's deployment (a copy of release.deployment); its model.
StatusOr<std::string> ApplyDeployment(etcd::Client& client, const cluster::TrainingRelease& rel,
                                      int64_t version, const ReleaseHooks& hooks) {
  ASSIGN_OR_RETURN(etcd::RangeResult t, client.Get("/dais/deployments/" + rel.deployment));
  if (t.kvs.empty()) return NotFound("release.deployment: no deployment '" + rel.deployment + "'");
  ASSIGN_OR_RETURN(cluster::DeploymentSpec d, cluster::DeploymentFromJson(t.kvs[0].value));
  d.name = fmt::format("{}-v{}", rel.route, version);
  d.version = version;
  const std::string key = "/dais/deployments/" + d.name;
  etcd::Compare absent{key, etcd::Compare::Target::kCreateRevision, etcd::Compare::Op::kEqual, 0,
                       ""};
  ASSIGN_OR_RETURN(etcd::TxnResult r,
                   client.Txn({absent}, {etcd::Op{etcd::Op::Kind::kPut, key,
                                                  cluster::DeploymentToJson(d), 0, false}}));
  if (r.succeeded) {
    hooks.event(fmt::format("deployment {} applied ({} v{})", d.name, d.model, version));
  }
  return d.model;
}

bool VersionReady(etcd::Client& client, const std::string& model, int64_t version) {
  auto r = client.Get(cluster::kInstancesPrefix, /*prefix=*/true);
  if (!r.ok()) return false;
  for (const auto& kv : r->kvs) {
    rapidjson::Document d;
    if (!json::ParseJson(kv.value, &d).ok() || !d.IsObject()) continue;
    auto str = [&d](const char* k) {
      return d.HasMember(k) && d[k].IsString() ? std::string(d[k].GetString()) : "";
    };
    if (str("model") == model && str("version") == std::to_string(version) &&
        str("state") == "READY") {
      return true;
    }
  }
  return false;
}

gateway::Rollout RolloutOf(const cluster::TrainingRelease& rel, int64_t version) {
  gateway::Rollout r;
  r.route = rel.route;
  r.to = version;
  r.steps = rel.steps;
  r.interval_ms = rel.interval_ms;
  r.max_error_rate = rel.max_error_rate;
  r.max_p99_ms = rel.max_p99_ms;
  r.max_psi = rel.max_psi;
  r.min_requests = rel.min_requests;
  r.accuracy_label = rel.accuracy_label;
  r.min_accuracy_delta = rel.min_accuracy_delta;
  return r;
}

}  // namespace

std::string ReleaseByCanary(etcd::Client& client, const cluster::TrainingRelease& rel,
                            int64_t version, const ReleaseHooks& hooks) {
  const int64_t deadline = hooks.now_ms() + rel.ready_timeout_ms;
  std::string model;
  for (;;) {
    if (hooks.stopping()) return "";
    Status s = OkStatus();
    if (model.empty()) {
      auto m = ApplyDeployment(client, rel, version, hooks);
      s = m.status();
      if (m.ok()) model = *m;
    }
    if (s.ok() && VersionReady(client, model, version)) {
      auto started = gateway::StartRollout(client, RolloutOf(rel, version), hooks.now_ms());
      if (started.ok()) {
        return fmt::format("canary rollout of {} v{} -> v{} started", rel.route, started->from,
                           version);
      }
      s = started.status();
      if (s.code() == StatusCode::kAlreadyExists &&
          s.message().find(" is already rolling out v" + std::to_string(version) + " ") !=
              std::string::npos) {
        return fmt::format("canary rollout of {} -> v{} already started", rel.route, version);
      }
      if (s.code() == StatusCode::kNotFound || s.code() == StatusCode::kInvalidArgument) {
        return "release failed: " + s.message();
      }
    }
    if (hooks.now_ms() >= deadline) {
      return "release failed: " + (s.ok() ? fmt::format("no READY instance of {} v{} within {} s",
                                                        model, version, rel.ready_timeout_ms / 1000)
                                          : s.message());
    }
    hooks.waiting(s.ok() ? "waiting for a READY instance" : s.message());
    hooks.sleep_ms(500);
  }
}

}  // namespace dais::cmd
