// A tenant: who a token's "tenant" claim names, what it may call and how fast. Kept in etcd at
// /dais/tenants/<name> (`dais ctl apply -f tenant.yaml`; docs/gateway.md):
//
//   kind: tenant
//   name: shop                 # the value of the tokens' tenant claim
//   models: [ranker, fraud]    # the routes (aliases) it may call; empty or absent: all
//   requests_per_second: 200   # token bucket rate; 0 or absent: no limit
//   burst: 400                 # bucket size (default: the rate, at least 1)
#pragma once

#include <string>
#include <vector>

#include "dais/status.h"

namespace dais::gateway {

inline constexpr const char* kTenantsPrefix = "/dais/tenants/";

struct TenantSpec {
  std::string name;
  std::vector<std::string> models;
  double requests_per_second = 0;
  double burst = 0;

  bool Allows(const std::string& alias) const;
};

// YAML, or the JSON TenantToJson writes; InvalidArgument naming the field.
StatusOr<TenantSpec> ParseTenant(const std::string& text);
std::string TenantToJson(const TenantSpec& t);

}  // namespace dais::gateway
