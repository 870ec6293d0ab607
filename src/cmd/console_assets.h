// The console's page, script and style sheet (web/console/), compiled into the binary by
// cmake/embed_assets.cmake: `dais console` needs no file beside it.
#pragma once

#include <string_view>

namespace dais::cmd {

struct ConsoleAsset {
  std::string_view name;  // "index.html", "console.js", ...
  std::string_view content_type;
  std::string_view body;
};

// nullptr when there is no asset of that name.
const ConsoleAsset* FindAsset(std::string_view name);

}  // namespace dais::cmd
