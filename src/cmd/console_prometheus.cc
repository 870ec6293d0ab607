// `dais console --prometheus`: the live figures from a Prometheus's HTTP API (console_state.h).

#include <fmt/format.h>

#include <cmath>
#include <future>

#include "cmd/console_state.h"
#include "common/json.h"
#include "gateway/upstream.h"

namespace dais::cmd {
namespace {

using Labels = std::map<std::string, std::string>;
using Vector = std::vector<std::pair<Labels, double>>;

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (const unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

std::string Member(const rapidjson::Value& v, const char* key) {
  return v.IsObject() && v.HasMember(key) && v[key].IsString() ? v[key].GetString() : "";
}

// GET `target` of Prometheus's API: the "data" member of a successful answer.
StatusOr<rapidjson::Document> Api(gateway::UpstreamPool& pool, const std::string& address,
                                  const std::string& target, std::chrono::milliseconds timeout) {
  auto p = std::make_shared<std::promise<gateway::UpstreamResult>>();
  auto answer = p->get_future();
  gateway::UpstreamRequest r;
  r.method = "GET";
  r.target = target;
  r.deadline = std::chrono::steady_clock::now() + timeout;
  pool.Send(address, std::move(r),
            [p](gateway::UpstreamResult res) { p->set_value(std::move(res)); });
  gateway::UpstreamResult res = answer.get();
  if (!res.status.ok()) {
    return Status(StatusCode::kUnavailable, "Prometheus at " + address + " did not answer: " +
                                                std::string(res.status.message()));
  }
  rapidjson::Document d;
  if (!json::ParseJson(res.response.body, &d).ok() || !d.IsObject() ||
      Member(d, "status") != "success" || !d.HasMember("data")) {
    return Status(StatusCode::kUnavailable,
                  fmt::format("Prometheus at {} answered HTTP {} to {}: {}", address,
                              res.response.status, target, res.response.body.substr(0, 200)));
  }
  rapidjson::Document data;
  data.CopyFrom(d["data"], data.GetAllocator());
  return data;
}

StatusOr<Vector> Query(gateway::UpstreamPool& pool, const std::string& address,
                       const std::string& promql, std::chrono::milliseconds timeout) {
  ASSIGN_OR_RETURN(rapidjson::Document data,
                   Api(pool, address, "/api/v1/query?query=" + UrlEncode(promql), timeout));
  Vector out;
  if (!data.HasMember("result") || !data["result"].IsArray()) return out;
  for (const auto& s : data["result"].GetArray()) {
    if (!s.IsObject() || !s.HasMember("value") || !s["value"].IsArray() || s["value"].Size() != 2 ||
        !s["value"][1].IsString()) {
      continue;
    }
    Labels labels;
    if (s.HasMember("metric") && s["metric"].IsObject()) {
      for (const auto& l : s["metric"].GetObject()) {
        if (l.value.IsString()) labels[l.name.GetString()] = l.value.GetString();
      }
    }
    double v = NAN;
    try {
      v = std::stod(s["value"][1].GetString());
    } catch (...) {
    }
    out.emplace_back(std::move(labels), v);
  }
  return out;
}

// The one value of an aggregated query; `none` when it has no series.
double Scalar(const Vector& v, double none) { return v.empty() ? none : v.front().second; }

}  // namespace

StatusOr<ConsoleSample> QueryPrometheus(gateway::UpstreamPool& pool, const std::string& address,
                                        std::chrono::milliseconds timeout) {
  ConsoleSample sample;
  sample.source = "prometheus";
  auto q = [&](const std::string& promql) { return Query(pool, address, promql, timeout); };
  const std::string by = "sum by (route, version) ";
  ASSIGN_OR_RETURN(Vector rps, q(by + "(rate(dais_gateway_requests_total[30s]))"));
  ASSIGN_OR_RETURN(Vector errors,
                   q(by + "(rate(dais_gateway_requests_total{code=~\"5..\"}[30s]))"));
  const std::string buckets =
      "sum by (le, route, version) (rate(dais_gateway_request_duration_seconds_bucket[30s]))";
  ASSIGN_OR_RETURN(Vector p50, q("histogram_quantile(0.5, " + buckets + ")"));
  ASSIGN_OR_RETURN(Vector p99, q("histogram_quantile(0.99, " + buckets + ")"));
  auto key = [](const Labels& l) {
    auto get = [&](const char* k) { return l.count(k) ? l.at(k) : std::string(); };
    return std::pair{get("route"), get("version")};
  };
  for (const auto& [l, v] : rps) sample.series[key(l)].rps = v;
  for (const auto& [l, v] : errors) {
    auto& f = sample.series[key(l)];
    f.error_rate = f.rps > 0 ? v / f.rps : 0;
  }
  for (const auto& [l, v] : p50) sample.series[key(l)].p50_ms = std::isfinite(v) ? v * 1000 : -1;
  for (const auto& [l, v] : p99) sample.series[key(l)].p99_ms = std::isfinite(v) ? v * 1000 : -1;
  ASSIGN_OR_RETURN(Vector values, q("sum(dais_feature_values_total)"));
  ASSIGN_OR_RETURN(Vector present, q("sum(dais_feature_values_total{status=\"present\"})"));
  ASSIGN_OR_RETURN(Vector redis, q("min(dais_redis_reachable)"));
  ASSIGN_OR_RETURN(Vector doubt, q("sum(dais_txn_in_doubt_transactions)"));
  ASSIGN_OR_RETURN(Vector oldest, q("max(dais_txn_in_doubt_oldest_age_seconds)"));
  ASSIGN_OR_RETURN(Vector up, q("up"));
  sample.figures.feature_values = Scalar(values, 0);
  sample.figures.feature_present = Scalar(present, 0);
  sample.figures.redis_reachable_min = Scalar(redis, -1);
  sample.figures.txn_in_doubt = Scalar(doubt, 0);
  sample.figures.txn_oldest_s = Scalar(oldest, 0);
  for (const auto& [l, v] : up) {
    if (v == 1) {
      ++sample.targets_up;
    } else {
      sample.down.push_back((l.count("instance") ? l.at("instance") : "?") + " (Prometheus: down)");
    }
  }
  // The alerts that fire in Prometheus (its rules: the P1/P2 of deploy/prometheus).
  ASSIGN_OR_RETURN(rapidjson::Document alerts, Api(pool, address, "/api/v1/alerts", timeout));
  if (alerts.HasMember("alerts") && alerts["alerts"].IsArray()) {
    for (const auto& a : alerts["alerts"].GetArray()) {
      if (Member(a, "state") != "firing" || !a.HasMember("labels")) continue;
      const std::string summary =
          a.HasMember("annotations") ? Member(a["annotations"], "summary") : "";
      sample.alerts.push_back(fmt::format(
          "{{\"severity\":{},\"name\":{},\"text\":{}}}",
          JsonQuoted(Member(a["labels"], "severity")), JsonQuoted(Member(a["labels"], "alertname")),
          JsonQuoted(summary.empty() ? "firing in Prometheus" : summary)));
    }
  }
  return sample;
}

}  // namespace dais::cmd
