// Reading YAML specs field by field with errors that name the field: shared by the specs that
// `dais ctl apply` takes (deployments, routes, tenants).
#pragma once

#include <yaml-cpp/yaml.h>

#include <set>
#include <string>
#include <type_traits>

#include "dais/status.h"

namespace dais::cluster {

// `text` parsed as a YAML mapping (JSON is YAML too); InvalidArgument "not YAML: ..." or "the
// <what> must be a YAML mapping".
inline StatusOr<YAML::Node> LoadYamlMap(const std::string& text, const std::string& what) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string("not YAML: ") + e.what());
  }
  if (!root.IsMap()) return InvalidArgument("the " + what + " must be a YAML mapping");
  return root;
}

// InvalidArgument "<at><key>: unknown field (known: ...)" for a key of `map` not in `known`.
inline Status Unknown(const YAML::Node& map, const std::set<std::string>& known,
                      const std::string& at) {
  for (const auto& kv : map) {
    const std::string key = kv.first.as<std::string>();
    if (!known.count(key)) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      return InvalidArgument(at + key + ": unknown field (known: " + list + ")");
    }
  }
  return OkStatus();
}

// Sets *out from map[key] when present; InvalidArgument naming the field and the expected type.
template <typename T>
Status Get(const YAML::Node& map, const std::string& key, const std::string& at, T* out) {
  const YAML::Node v = map[key];
  if (!v) return OkStatus();
  try {
    *out = v.as<T>();
  } catch (const YAML::Exception&) {
    return InvalidArgument(at + key + ": expected " +
                           (std::is_same_v<T, std::string> ? "a string"
                            : std::is_same_v<T, bool>      ? "true or false"
                                                           : "a number") +
                           ", got '" + YAML::Dump(v) + "'");
  }
  return OkStatus();
}

}  // namespace dais::cluster
