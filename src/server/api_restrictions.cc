#include "server/api_restrictions.h"

#include <algorithm>
#include <cctype>

namespace dais::server {
namespace {

constexpr std::array<std::string_view, kApiGroupCount> kNames = {
    "health",     "metadata", "inference", "shared-memory", "model-config", "model-repository",
    "statistics", "trace",    "logging",   "features",      "memory"};

std::optional<ApiGroup> GroupFromName(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<ApiGroup>(i);
  }
  return std::nullopt;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string KnownApis() {
  std::string out;
  for (std::string_view n : kNames) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

}  // namespace

std::string_view ApiGroupName(ApiGroup group) { return kNames[static_cast<size_t>(group)]; }

StatusOr<ApiRestrictions> ApiRestrictions::Parse(const std::vector<std::string>& specs,
                                                 std::string_view flag,
                                                 std::string_view header_prefix) {
  ApiRestrictions r;
  for (const std::string& spec : specs) {
    const std::string where = std::string(flag) + " '" + spec + "'";
    const size_t colon = spec.find(':');
    const size_t eq = colon == std::string::npos ? std::string::npos : spec.find('=', colon + 1);
    if (colon == std::string::npos || eq == std::string::npos || colon == 0 || eq == colon + 1 ||
        eq + 1 == spec.size()) {
      return InvalidArgument(where + ": expected <api>[,<api>...]:<key>=<value>");
    }
    const std::string key = spec.substr(colon + 1, eq - colon - 1);
    Rule rule{Lower(std::string(header_prefix) + key), spec.substr(eq + 1)};
    std::string_view apis(spec.data(), colon);
    while (true) {
      const size_t comma = apis.find(',');
      const std::string_view api = apis.substr(0, comma);
      std::optional<ApiGroup> group = GroupFromName(api);
      if (!group) {
        return InvalidArgument(where + ": unknown API '" + std::string(api) +
                               "' (known: " + KnownApis() + ")");
      }
      auto& slot = r.rules_[static_cast<size_t>(*group)];
      if (slot) {
        return InvalidArgument(where + ": API '" + std::string(api) +
                               "' is already in another group (an API may be in one only)");
      }
      slot = rule;
      if (comma == std::string_view::npos) break;
      apis.remove_prefix(comma + 1);
    }
  }
  return r;
}

Status ApiRestrictions::Check(ApiGroup group, const HeaderLookup& header) const {
  const auto& rule = rules_[static_cast<size_t>(group)];
  if (!rule) return OkStatus();
  std::optional<std::string_view> value = header(rule->header);
  if (value && *value == rule->value) return OkStatus();
  return Status(StatusCode::kPermissionDenied,
                "This API is restricted, expecting header '" + rule->header + "'");
}

const std::string* ApiRestrictions::RequiredHeader(ApiGroup group) const {
  const auto& rule = rules_[static_cast<size_t>(group)];
  return rule ? &rule->header : nullptr;
}

}  // namespace dais::server
