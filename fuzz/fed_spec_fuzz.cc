// libFuzzer target for federation.yaml (docs/federated.md): ParseFederationSpec either refuses
// the text with a Status or accepts a spec whose stored form (FederationSpecToYaml, what `dais
// ctl apply` writes to etcd) parses back and is stored again the same: a crash, a sanitizer report
// or a stored form that does not read back is a bug. The paths are not checked (check_files
// false), as `dais ctl apply` does.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fed/federation_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto spec = dais::fed::ParseFederationSpec(text, "/srv/fed/federation.yaml", false);
  if (!spec.ok()) return 0;
  const std::string stored = dais::fed::FederationSpecToYaml(*spec);
  auto back = dais::fed::ParseFederationSpec(stored, "etcd:/dais/federations/x", false);
  if (!back.ok() || dais::fed::FederationSpecToYaml(*back) != stored) std::abort();
  return 0;
}
