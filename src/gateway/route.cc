#include "gateway/route.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <regex>
#include <set>

#include "cluster/spec_yaml.h"

namespace dais::gateway {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

uint64_t Mix(uint64_t x) {  // splitmix64's finaliser: FNV's low bits are not uniform enough
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

Status Validate(RouteSpec& r) {
  static const std::regex kName("[A-Za-z0-9]([A-Za-z0-9_.-]{0,126}[A-Za-z0-9])?");
  if (!std::regex_match(r.name, kName)) {
    return InvalidArgument("name: '" + r.name + "' must be 1-128 of [A-Za-z0-9_.-]");
  }
  if (r.model.empty()) r.model = r.name;
  if (r.versions.empty()) return InvalidArgument("versions: at least one {version, weight}");
  int total = 0;
  std::set<int64_t> seen;
  for (size_t i = 0; i < r.versions.size(); ++i) {
    const auto& v = r.versions[i];
    const std::string at = "versions[" + std::to_string(i) + "]";
    if (v.version < 1) return InvalidArgument(at + ".version: a version number (1 or more)");
    if (v.weight < 0 || v.weight > 100) return InvalidArgument(at + ".weight: 0 to 100");
    if (!seen.insert(v.version).second) {
      return InvalidArgument(at + ".version: " + std::to_string(v.version) + " listed twice");
    }
    total += v.weight;
  }
  if (total != 100) {
    return InvalidArgument("versions: the weights sum to " + std::to_string(total) + ", not 100");
  }
  if (r.stable < 0) r.stable = r.versions.front().version;
  if (!seen.count(r.stable)) {
    return InvalidArgument("stable: version " + std::to_string(r.stable) +
                           " is not among the versions");
  }
  for (size_t i = 0; i < r.match.size(); ++i) {
    const std::string at = "match[" + std::to_string(i) + "]";
    if (r.match[i].header.empty()) return InvalidArgument(at + ".header: required");
    if (!seen.count(r.match[i].version)) {
      return InvalidArgument(at + ".version: " + std::to_string(r.match[i].version) +
                             " is not among the versions");
    }
  }
  if (r.timeout_ms < 1 || r.timeout_ms > 600000) {
    return InvalidArgument("timeout_ms: 1 to 600000");
  }
  if (r.try_timeout_ms < 0 || r.try_timeout_ms > r.timeout_ms) {
    return InvalidArgument("try_timeout_ms: 0 (none) to timeout_ms (" +
                           std::to_string(r.timeout_ms) + ")");
  }
  if (r.shadow_version >= 0) {
    if (r.shadow_version < 1) return InvalidArgument("shadow.version: a version number");
    if (!(r.shadow_percent > 0 && r.shadow_percent <= 100)) {
      return InvalidArgument("shadow.percent: more than 0, at most 100");
    }
  }
  return OkStatus();
}

}  // namespace

StatusOr<RouteSpec> ParseRoute(const std::string& text) {
  using cluster::Get;
  using cluster::Unknown;
  ASSIGN_OR_RETURN(const YAML::Node root, cluster::LoadYamlMap(text, "route"));
  RouteSpec r;
  RETURN_IF_ERROR(Unknown(root,
                          {"kind", "name", "model", "versions", "stable", "sticky_header", "match",
                           "timeout_ms", "try_timeout_ms", "shadow"},
                          ""));
  std::string kind = "route";
  RETURN_IF_ERROR(Get(root, "kind", "", &kind));
  if (kind != "route") return InvalidArgument("kind: '" + kind + "' is not route");
  RETURN_IF_ERROR(Get(root, "name", "", &r.name));
  RETURN_IF_ERROR(Get(root, "model", "", &r.model));
  RETURN_IF_ERROR(Get(root, "stable", "", &r.stable));
  RETURN_IF_ERROR(Get(root, "sticky_header", "", &r.sticky_header));
  RETURN_IF_ERROR(Get(root, "timeout_ms", "", &r.timeout_ms));
  RETURN_IF_ERROR(Get(root, "try_timeout_ms", "", &r.try_timeout_ms));
  r.sticky_header = Lower(r.sticky_header);
  if (const YAML::Node sh = root["shadow"]; sh) {
    if (!sh.IsMap()) return InvalidArgument("shadow: expected {version, percent}");
    RETURN_IF_ERROR(Unknown(sh, {"version", "percent"}, "shadow."));
    if (!sh["version"]) return InvalidArgument("shadow.version: required");
    RETURN_IF_ERROR(Get(sh, "version", "shadow.", &r.shadow_version));
    RETURN_IF_ERROR(Get(sh, "percent", "shadow.", &r.shadow_percent));
  }
  if (const YAML::Node vs = root["versions"]; vs) {
    if (!vs.IsSequence()) return InvalidArgument("versions: expected a list of {version, weight}");
    for (size_t i = 0; i < vs.size(); ++i) {
      const std::string at = "versions[" + std::to_string(i) + "].";
      if (!vs[i].IsMap()) return InvalidArgument(at + ": expected {version, weight}");
      RETURN_IF_ERROR(Unknown(vs[i], {"version", "weight"}, at));
      RouteSpec::Weighted w;
      RETURN_IF_ERROR(Get(vs[i], "version", at, &w.version));
      RETURN_IF_ERROR(Get(vs[i], "weight", at, &w.weight));
      r.versions.push_back(w);
    }
  }
  if (const YAML::Node ms = root["match"]; ms) {
    if (!ms.IsSequence())
      return InvalidArgument("match: expected a list of {header, value, version}");
    for (size_t i = 0; i < ms.size(); ++i) {
      const std::string at = "match[" + std::to_string(i) + "].";
      if (!ms[i].IsMap()) return InvalidArgument(at + ": expected {header, value, version}");
      RETURN_IF_ERROR(Unknown(ms[i], {"header", "value", "version"}, at));
      RouteSpec::Match m;
      RETURN_IF_ERROR(Get(ms[i], "header", at, &m.header));
      RETURN_IF_ERROR(Get(ms[i], "value", at, &m.value));
      RETURN_IF_ERROR(Get(ms[i], "version", at, &m.version));
      m.header = Lower(m.header);
      r.match.push_back(std::move(m));
    }
  }
  RETURN_IF_ERROR(Validate(r));
  return r;
}

std::string RouteToJson(const RouteSpec& r) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  auto str = [&w](const char* key, const std::string& s) {
    w.Key(key);
    w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  };
  w.StartObject();
  str("kind", "route");
  str("name", r.name);
  str("model", r.model);
  w.Key("versions");
  w.StartArray();
  for (const auto& v : r.versions) {
    w.StartObject();
    w.Key("version");
    w.Int64(v.version);
    w.Key("weight");
    w.Int(v.weight);
    w.EndObject();
  }
  w.EndArray();
  w.Key("stable");
  w.Int64(r.stable);
  if (!r.sticky_header.empty()) str("sticky_header", r.sticky_header);
  if (!r.match.empty()) {
    w.Key("match");
    w.StartArray();
    for (const auto& m : r.match) {
      w.StartObject();
      str("header", m.header);
      str("value", m.value);
      w.Key("version");
      w.Int64(m.version);
      w.EndObject();
    }
    w.EndArray();
  }
  w.Key("timeout_ms");
  w.Int(r.timeout_ms);
  if (r.try_timeout_ms > 0) {
    w.Key("try_timeout_ms");
    w.Int(r.try_timeout_ms);
  }
  if (r.shadow_version >= 0) {
    w.Key("shadow");
    w.StartObject();
    w.Key("version");
    w.Int64(r.shadow_version);
    w.Key("percent");
    w.Double(r.shadow_percent);
    w.EndObject();
  }
  w.EndObject();
  return sb.GetString();
}

int StickyBucket(std::string_view route, std::string_view key) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over "route\0key"
  auto feed = [&h](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
  };
  feed(route);
  feed(std::string_view("\0", 1));
  feed(key);
  return static_cast<int>(Mix(h) % kBuckets);
}

VersionChoice ChooseVersion(const RouteSpec& route, int64_t path_version,
                            const std::function<std::string_view(std::string_view)>& header,
                            uint64_t random) {
  if (path_version >= 0) return {path_version, "path"};
  for (const auto& m : route.match) {
    if (header(m.header) == m.value) return {m.version, "match"};
  }
  int bucket = static_cast<int>(Mix(random) % kBuckets);
  const char* how = "weight";
  if (!route.sticky_header.empty()) {
    const std::string_view key = header(route.sticky_header);
    if (!key.empty()) {
      bucket = StickyBucket(route.name, key);
      how = "sticky";
    }
  }
  int upto = 0;
  for (auto v = route.versions.rbegin(); v != route.versions.rend(); ++v) {
    upto += v->weight * (kBuckets / 100);
    if (bucket < upto) return {v->version, how};
  }
  return {route.stable, how};  // unreachable with weights summing to 100
}

}  // namespace dais::gateway
