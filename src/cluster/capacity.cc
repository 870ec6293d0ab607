#include "cluster/capacity.h"

#include <unistd.h>

#include <charconv>
#include <thread>

namespace dais::cluster {
namespace {

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

bool ParseInt(std::string_view s, int64_t* out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size() && *out >= 0;
}

}  // namespace

StatusOr<std::vector<Gpu>> ParseGpus(const std::string& spec) {
  std::vector<Gpu> gpus;
  if (spec.empty()) return gpus;
  for (const std::string& part : Split(spec, ',')) {
    const std::string where = "--gpus '" + part + "'";
    std::string rest = part;
    int64_t count = 1;
    if (const size_t x = rest.find('x');
        x != std::string::npos && x > 0 && ParseInt(std::string_view(rest).substr(0, x), &count)) {
      rest = rest.substr(x + 1);
    }
    const size_t colon = rest.find(':');
    if (colon == std::string::npos || colon == 0) {
      return InvalidArgument(where + ": expected [Nx]MODEL:MEMORY, e.g. 2xA100:80GiB");
    }
    Gpu g;
    g.model = rest.substr(0, colon);
    std::string mem = rest.substr(colon + 1);
    int64_t scale = 0;
    if (mem.size() > 3 && mem.substr(mem.size() - 3) == "GiB") scale = 1024;
    if (mem.size() > 3 && mem.substr(mem.size() - 3) == "MiB") scale = 1;
    int64_t amount = 0;
    if (scale == 0 || !ParseInt(std::string_view(mem).substr(0, mem.size() - 3), &amount) ||
        amount == 0) {
      return InvalidArgument(where + ": memory must be like 80GiB or 16384MiB");
    }
    if (count < 1 || count > 16) return InvalidArgument(where + ": 1 to 16 GPUs per entry");
    g.memory_mib = amount * scale;
    for (int64_t i = 0; i < count; ++i) gpus.push_back(g);
  }
  if (gpus.size() > 16) return InvalidArgument("--gpus: at most 16 GPUs per node");
  return gpus;
}

StatusOr<std::map<std::string, std::string>> ParseLabels(const std::string& spec) {
  std::map<std::string, std::string> labels;
  if (spec.empty()) return labels;
  for (const std::string& part : Split(spec, ',')) {
    const size_t eq = part.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument("--labels '" + part + "': expected key=value");
    }
    labels[part.substr(0, eq)] = part.substr(eq + 1);
  }
  return labels;
}

NodeCapacity LocalCapacity() {
  NodeCapacity c;
  c.cpu_milli = int64_t{std::max(1u, std::thread::hardware_concurrency())} * 1000;
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) c.memory_mib = int64_t{pages} * page / (1 << 20);
  return c;
}

}  // namespace dais::cluster
