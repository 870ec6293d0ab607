#include <memory>
#include <vector>

#include "dais/backend.h"

// Defined in the backend libraries that were built (see src/backends/CMakeLists.txt).
namespace dais::backends {
#ifdef DAIS_HAVE_TORCH
std::unique_ptr<Backend> MakeTorchBackend();
#endif
#ifdef DAIS_HAVE_XGBOOST
std::unique_ptr<Backend> MakeXgboostBackend();
#endif
#ifdef DAIS_HAVE_IDENTITY
std::unique_ptr<Backend> MakeIdentityBackend();
#endif
}  // namespace dais::backends

// The registry implements the public lookup of include/dais/backend.h (namespace dais).
namespace dais {
namespace {
std::vector<std::unique_ptr<Backend>>& Backends() {
  static auto* backends = [] {
    auto* v = new std::vector<std::unique_ptr<Backend>>();
#ifdef DAIS_HAVE_TORCH
    v->push_back(backends::MakeTorchBackend());
#endif
#ifdef DAIS_HAVE_XGBOOST
    v->push_back(backends::MakeXgboostBackend());
#endif
#ifdef DAIS_HAVE_IDENTITY
    v->push_back(backends::MakeIdentityBackend());
#endif
    return v;
  }();
  return *backends;
}
}  // namespace

Backend* FindBackend(std::string_view name) {
  for (auto& b : Backends()) {
    if (b->name() == name) return b.get();
  }
  return nullptr;
}

std::vector<std::string> BackendNames() {
  std::vector<std::string> names;
  for (auto& b : Backends()) names.emplace_back(b->name());
  return names;
}

}  // namespace dais
