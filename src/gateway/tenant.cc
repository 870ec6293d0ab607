#include "gateway/tenant.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <regex>

#include "cluster/spec_yaml.h"

namespace dais::gateway {

bool TenantSpec::Allows(const std::string& alias) const {
  return models.empty() || std::find(models.begin(), models.end(), alias) != models.end();
}

StatusOr<TenantSpec> ParseTenant(const std::string& text) {
  ASSIGN_OR_RETURN(const YAML::Node root, cluster::LoadYamlMap(text, "tenant"));
  RETURN_IF_ERROR(
      cluster::Unknown(root, {"kind", "name", "models", "requests_per_second", "burst"}, ""));
  std::string kind = "tenant";
  RETURN_IF_ERROR(cluster::Get(root, "kind", "", &kind));
  if (kind != "tenant") return InvalidArgument("kind: '" + kind + "' is not tenant");
  TenantSpec t;
  RETURN_IF_ERROR(cluster::Get(root, "name", "", &t.name));
  RETURN_IF_ERROR(cluster::Get(root, "models", "", &t.models));
  RETURN_IF_ERROR(cluster::Get(root, "requests_per_second", "", &t.requests_per_second));
  RETURN_IF_ERROR(cluster::Get(root, "burst", "", &t.burst));
  static const std::regex kName("[A-Za-z0-9]([A-Za-z0-9_.@-]{0,126}[A-Za-z0-9])?");
  if (!std::regex_match(t.name, kName)) {
    return InvalidArgument("name: '" + t.name + "' must be 1-128 of [A-Za-z0-9_.@-]");
  }
  // A rate under one request in 1,000 s is a typo, not a limit (1e-300 gave Retry-After:
  // -9223372036854774): 0 means no limit, anything else is 0.001 to 10,000,000.
  if (!(t.requests_per_second == 0 ||
        (t.requests_per_second >= 1e-3 && t.requests_per_second <= 1e7))) {
    return InvalidArgument("requests_per_second: 0 (no limit) or 0.001 to 10000000");
  }
  if (!(t.burst >= 0 && t.burst <= 1e8)) return InvalidArgument("burst: 0 to 100000000");
  if (t.burst == 0) t.burst = std::max(1.0, t.requests_per_second);
  return t;
}

std::string TenantToJson(const TenantSpec& t) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("kind");
  w.String("tenant");
  w.Key("name");
  w.String(t.name.c_str());
  w.Key("models");
  w.StartArray();
  for (const auto& m : t.models) w.String(m.c_str());
  w.EndArray();
  w.Key("requests_per_second");
  w.Double(t.requests_per_second);
  w.Key("burst");
  w.Double(t.burst);
  w.EndObject();
  return sb.GetString();
}

}  // namespace dais::gateway
