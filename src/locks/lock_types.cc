#include "locks/lock_types.h"

#include <cctype>

namespace dais::locks {

std::string_view LockLevelName(LockLevel level) {
  switch (level) {
    case LockLevel::kModel:
      return "model";
    case LockLevel::kVersion:
      return "version";
    case LockLevel::kNode:
      return "node";
  }
  return "model";
}

LockResource LockResource::Model(std::string model) {
  return LockResource{std::move(model), LockLevel::kModel, "", ""};
}
LockResource LockResource::Version(std::string model, std::string version, std::string node) {
  return LockResource{std::move(model), LockLevel::kVersion, std::move(version), std::move(node)};
}
LockResource LockResource::Node(std::string model, std::string node) {
  return LockResource{std::move(model), LockLevel::kNode, "", std::move(node)};
}

std::string LockResource::Name() const {
  switch (level) {
    case LockLevel::kModel:
      return "model";
    case LockLevel::kVersion:
      return node.empty() ? "version:" + version : "version:" + version + "@" + node;
    case LockLevel::kNode:
      return "node:" + node;
  }
  return "model";
}

std::string LockResource::ToString() const { return model + "/" + Name(); }

namespace {

bool HasAny(std::string_view s, std::string_view forbidden) {
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c)) || std::iscntrl(static_cast<unsigned char>(c)))
      return true;
    if (forbidden.find(c) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace

Status ValidateResource(const LockResource& r) {
  if (r.model.empty() || HasAny(r.model, "{}")) {
    return InvalidArgument("lock: bad model name '" + r.model +
                           "' (non-empty, no braces or whitespace)");
  }
  switch (r.level) {
    case LockLevel::kModel:
      if (!r.version.empty() || !r.node.empty()) {
        return InvalidArgument("lock: a MODEL lock has no version or node");
      }
      break;
    case LockLevel::kVersion:
      if (r.version.empty() || HasAny(r.version, "@")) {
        return InvalidArgument("lock: bad version '" + r.version + "' (non-empty, no '@')");
      }
      if (HasAny(r.node, "@")) return InvalidArgument("lock: bad node '" + r.node + "'");
      break;
    case LockLevel::kNode:
      if (!r.version.empty()) return InvalidArgument("lock: a NODE lock has no version");
      if (r.node.empty() || HasAny(r.node, "@")) {
        return InvalidArgument("lock: bad node '" + r.node + "' (non-empty, no '@')");
      }
      break;
  }
  return OkStatus();
}

}  // namespace dais::locks
