// The gateway's view of the cluster (gateway_impl.h): built from what the etcd watches hold.
#include <rapidjson/document.h>

#include <algorithm>

#include "common/json.h"
#include "common/logging.h"
#include "gateway/gateway_impl.h"

namespace dais::gateway {

int64_t View::HighestReady(const std::string& model) const {
  int64_t best = -1;
  for (const auto& [key, nodes] : ready) {
    if (key.first == model && !nodes.empty()) best = std::max(best, key.second);
  }
  return best;
}

std::shared_ptr<View> BuildView(const std::map<std::string, std::string>& routes_kv,
                                const std::map<std::string, std::string>& tenants_kv,
                                const std::map<std::string, std::string>& nodes_kv,
                                const std::map<std::string, std::string>& instances_kv) {
  auto v = std::make_shared<View>();
  for (const auto& [key, text] : routes_kv) {
    auto r = ParseRoute(text);
    if (r.ok()) {
      v->routes[r->name] = std::move(*r);
    } else {
      LOG_WARNING("gateway: ignoring route {}: {}", key, r.status().message());
    }
  }
  for (const auto& [key, text] : tenants_kv) {
    auto t = ParseTenant(text);
    if (t.ok()) v->tenants[t->name] = std::move(*t);
  }
  for (const auto& [key, json] : nodes_kv) {
    rapidjson::Document d;
    if (!json::ParseJson(json, &d).ok() || !d.IsObject() || !d.HasMember("node") ||
        !d["node"].IsString() || !d.HasMember("http") || !d["http"].IsString()) {
      continue;
    }
    v->node_http[d["node"].GetString()] = d["http"].GetString();
    if (d.HasMember("grpc") && d["grpc"].IsString() && d["grpc"].GetStringLength() > 0) {
      v->node_grpc[d["node"].GetString()] = d["grpc"].GetString();
    }
  }
  for (const auto& [key, json] : instances_kv) {
    rapidjson::Document d;
    if (!json::ParseJson(json, &d).ok() || !d.IsObject()) continue;
    auto str = [&d](const char* k) -> std::string {
      return d.HasMember(k) && d[k].IsString() ? d[k].GetString() : "";
    };
    if (str("state") != "READY" || str("version").empty()) continue;
    const std::string node = str("node");
    if (!v->node_http.count(node)) continue;
    int64_t version = 0;
    try {
      version = std::stoll(str("version"));
    } catch (...) {
      continue;
    }
    v->ready[{str("model"), version}].push_back(node);
  }
  return v;
}

}  // namespace dais::gateway
