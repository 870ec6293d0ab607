#include <memory>
#include <vector>

#include "dais/backend.h"

namespace dais {

// Defined in the backend libraries that were built (see src/backends/CMakeLists.txt).
#ifdef DAIS_HAVE_TORCH
std::unique_ptr<Backend> MakeTorchBackend();
#endif
#ifdef DAIS_HAVE_XGBOOST
std::unique_ptr<Backend> MakeXgboostBackend();
#endif
#ifdef DAIS_HAVE_IDENTITY
std::unique_ptr<Backend> MakeIdentityBackend();
#endif

namespace {
std::vector<std::unique_ptr<Backend>>& Backends() {
  static auto* backends = [] {
    auto* v = new std::vector<std::unique_ptr<Backend>>();
#ifdef DAIS_HAVE_TORCH
    v->push_back(MakeTorchBackend());
#endif
#ifdef DAIS_HAVE_XGBOOST
    v->push_back(MakeXgboostBackend());
#endif
#ifdef DAIS_HAVE_IDENTITY
    v->push_back(MakeIdentityBackend());
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
