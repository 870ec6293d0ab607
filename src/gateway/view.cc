// The gateway's view of the cluster (gateway_impl.h): built from what the etcd watches hold.
#include <rapidjson/document.h>

#include <algorithm>
#include <cstring>

#include "cluster/agent_placement.h"
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

namespace {

template <typename Spec, typename Parse>
std::shared_ptr<const Spec> Cached(
    std::map<std::string, std::pair<std::string, std::shared_ptr<const Spec>>>& cache,
    const std::string& key, const std::string& text, Parse parse) {
  auto it = cache.find(key);
  if (it != cache.end() && it->second.first == text) return it->second.second;
  auto parsed = parse(text);
  if (!parsed.ok()) return nullptr;
  auto spec = std::make_shared<const Spec>(std::move(*parsed));
  cache[key] = {text, spec};
  return spec;
}

template <typename Map>
void RetainKeys(Map& cache, const std::map<std::string, std::string>& kv) {
  for (auto it = cache.begin(); it != cache.end();) {
    it = kv.count(it->first) ? std::next(it) : cache.erase(it);
  }
}

}  // namespace

std::shared_ptr<const RouteSpec> SpecCache::Route(const std::string& key, const std::string& text) {
  MutexLock l(&mu_);
  return Cached(routes_, key, text, ParseRoute);
}

std::shared_ptr<const TenantSpec> SpecCache::Tenant(const std::string& key,
                                                    const std::string& text) {
  MutexLock l(&mu_);
  return Cached(tenants_, key, text, ParseTenant);
}

void SpecCache::Retain(const std::map<std::string, std::string>& routes_kv,
                       const std::map<std::string, std::string>& tenants_kv) {
  MutexLock l(&mu_);
  RetainKeys(routes_, routes_kv);
  RetainKeys(tenants_, tenants_kv);
}

std::shared_ptr<View> BuildView(SpecCache* cache,
                                const std::map<std::string, std::string>& routes_kv,
                                const std::map<std::string, std::string>& tenants_kv,
                                const std::map<std::string, std::string>& nodes_kv,
                                const std::map<std::string, std::string>& instances_kv,
                                const std::map<std::string, std::string>& collections_kv,
                                const std::map<std::string, std::string>& agents_kv) {
  auto v = std::make_shared<View>();
  // The watches hold only documents that parsed (Gateway::Impl::Accept), so nothing is logged
  // here; a miss is a document that changed since the last build.
  for (const auto& [key, text] : routes_kv) {
    if (auto r = cache->Route(key, text)) v->routes[r->name] = *r;
  }
  for (const auto& [key, text] : tenants_kv) {
    if (auto t = cache->Tenant(key, text)) v->tenants[t->name] = *t;
  }
  cache->Retain(routes_kv, tenants_kv);
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
    const std::string node = str("node");
    if (str("state") != "READY" || !v->node_http.count(node)) continue;
    if (str("model").rfind(cluster::kMemoryTaskPrefix, 0) == 0) {
      v->memory_ready[str("model")].push_back(node);
      continue;
    }
    if (str("version").empty()) continue;
    int64_t version = 0;
    try {
      version = std::stoll(str("version"));
    } catch (...) {
      continue;
    }
    v->ready[{str("model"), version}].push_back(node);
  }
  for (const auto& [key, json] : collections_kv) {
    auto c = cluster::ParseCollectionPlacement(json);
    if (c.ok()) v->collections[c->name] = std::move(*c);
  }
  // /dais/agent-endpoints/<agent>/<consumer>: {"http", "tenant", "run_timeout_ms"}.
  for (const auto& [key, json] : agents_kv) {
    const std::string rest =
        key.substr(std::min(key.size(), std::strlen(cluster::kAgentEndpointsPrefix)));
    const std::string agent = rest.substr(0, rest.find('/'));
    rapidjson::Document d;
    if (agent.empty() || !json::ParseJson(json, &d).ok() || !d.IsObject() || !d.HasMember("http") ||
        !d["http"].IsString() || !d.HasMember("tenant") || !d["tenant"].IsString()) {
      continue;
    }
    View::AgentEndpoints& a = v->agents[agent];
    a.tenant = d["tenant"].GetString();
    if (d.HasMember("run_timeout_ms") && d["run_timeout_ms"].IsInt64()) {
      a.run_timeout_ms = d["run_timeout_ms"].GetInt64();
    }
    a.runtimes.push_back({d["http"].GetString(), d.HasMember("key") && d["key"].IsString()
                                                     ? d["key"].GetString()
                                                     : std::string()});
  }
  return v;
}

}  // namespace dais::gateway
