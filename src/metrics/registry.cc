#include "metrics/registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <string_view>
#include <type_traits>

#include "common/logging.h"

namespace dais::metrics {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Prometheus spelling: "+Inf", "-Inf", "NaN"; integral values without a decimal point; otherwise
// the shortest representation that round-trips.
void AppendNumber(double v, std::string* out) {
  if (std::isnan(v)) {
    out->append("NaN");
  } else if (std::isinf(v)) {
    out->append(v > 0 ? "+Inf" : "-Inf");
  } else if (v == std::trunc(v) && std::fabs(v) < 9.2e18) {
    fmt::format_to(std::back_inserter(*out), "{}", static_cast<int64_t>(v));
  } else {
    fmt::format_to(std::back_inserter(*out), "{}", v);
  }
}

std::string FormatNumber(double v) {
  std::string s;
  AppendNumber(v, &s);
  return s;
}

// HELP text escapes backslash and newline; label values also escape the double quote.
void AppendEscaped(std::string_view s, bool quote, std::string* out) {
  for (char c : s) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else if (quote && c == '"') {
      out->append("\\\"");
    } else {
      out->push_back(c);
    }
  }
}

bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool ValidMetricName(std::string_view s) {
  if (s.empty() || !(IsAlpha(s[0]) || s[0] == ':')) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return IsAlpha(c) || IsDigit(c) || c == ':'; });
}

// [a-zA-Z_][a-zA-Z0-9_]*, and not "__"-prefixed (reserved by Prometheus).
bool ValidLabelName(std::string_view s) {
  if (s.empty() || !IsAlpha(s[0]) || s.starts_with("__")) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return IsAlpha(c) || IsDigit(c); });
}

// Appends `{l1="v1",...[,le="bound"]}`, or nothing when there are no labels at all.
void AppendLabels(const std::vector<std::string>& names, const std::vector<std::string>& values,
                  const std::string* le, std::string* out) {
  if (names.empty() && le == nullptr) return;
  out->push_back('{');
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out->push_back(',');
    out->append(names[i]);
    out->append("=\"");
    AppendEscaped(values[i], /*quote=*/true, out);
    out->push_back('"');
  }
  if (le != nullptr) {
    if (!names.empty()) out->push_back(',');
    out->append("le=\"");
    out->append(*le);
    out->push_back('"');
  }
  out->push_back('}');
}

const char* TypeName(Type type) {
  switch (type) {
    case Type::kCounter:
      return "counter";
    case Type::kGauge:
      return "gauge";
    case Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

void AddDouble(std::atomic<double>& a, double v) {
  // libstdc++ (g++ >= 10) provides fetch_add for floating-point atomics in C++20.
  a.fetch_add(v, std::memory_order_relaxed);
}

}  // namespace

// --- Counter, Gauge, Histogram ---------------------------------------------------------------

void Counter::Increment(double v) {
  if (!(v >= 0)) {
    DAIS_BUG("counter increment by {} ignored (counters are monotonic)", v);
    return;
  }
  AddDouble(value_, v);
}
double Counter::Value() const { return value_.load(std::memory_order_relaxed); }

void Gauge::Set(double v) { value_.store(v, std::memory_order_relaxed); }
void Gauge::Add(double v) { AddDouble(value_, v); }
double Gauge::Value() const { return value_.load(std::memory_order_relaxed); }

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)) {
  if (!bounds_.empty() && bounds_.back() == kInf) bounds_.pop_back();
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (std::isnan(bounds_[i]) || (i > 0 && !(bounds_[i - 1] < bounds_[i]))) {
      DAIS_LOG(kFatal, "histogram bounds must be strictly increasing and not NaN (index {}: {})", i,
               bounds_[i]);
    }
  }
  buckets_ = std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1);
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double v) {
  // Binary search for the first bound b with b >= v: a value equal to a bound belongs to that
  // bound's bucket. Written as !(b >= v) rather than b < v so that NaN (for which every comparison
  // is false) lands in +Inf, as in the Go client, instead of the first bucket.
  size_t i =
      std::partition_point(bounds_.begin(), bounds_.end(), [v](double b) { return !(b >= v); }) -
      bounds_.begin();
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  AddDouble(sum_, v);
  count_.fetch_add(1, std::memory_order_relaxed);
}

uint64_t Histogram::Count() const { return count_.load(std::memory_order_relaxed); }
double Histogram::Sum() const { return sum_.load(std::memory_order_relaxed); }

std::vector<uint64_t> Histogram::CumulativeCounts() const {
  std::vector<uint64_t> out(bounds_.size() + 1);
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    total += buckets_[i].load(std::memory_order_relaxed);
    out[i] = total;
  }
  return out;
}

std::vector<double> LatencyBuckets() {
  return {50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3,
          50e-3, 100e-3, 250e-3, 500e-3, 1.0,  2.5,    5.0,  10.0};
}

std::vector<double> FineLatencyBuckets() {
  static constexpr double kMantissas[] = {1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, 7, 8};
  std::vector<double> out;
  // m / 10^k: both exact, so each bound is the double nearest its decimal spelling (0.0025).
  for (double divisor : {1e4, 1e3, 1e2, 1e1, 1.0}) {
    for (double m : kMantissas) out.push_back(m / divisor);
  }
  out.push_back(10.0);
  return out;
}

std::vector<double> PowerOfTwoBuckets(double max) {
  std::vector<double> out;
  for (double b = 1; b <= max; b *= 2) out.push_back(b);
  return out;
}

// --- Family ----------------------------------------------------------------------------------

template <typename T>
void Family<T>::CheckArity(size_t values) const {
  if (values != label_names_.size()) {
    DAIS_LOG(kFatal, "metric {}: {} label values given for {} label names", name_, values,
             label_names_.size());
  }
}

template <typename T>
T& Family<T>::Create(std::vector<std::string> label_values) {
  std::unique_ptr<T> child;
  if constexpr (std::is_same_v<T, Histogram>) {
    child = std::make_unique<Histogram>(bounds_);
  } else {
    child = std::make_unique<T>();
  }
  T* raw = child.get();
  all_.push_back(std::move(child));
  live_.emplace(std::move(label_values), raw);
  return *raw;
}

template <typename T>
T& Family<T>::Get(const std::vector<std::string>& label_values) {
  CheckArity(label_values.size());
  MutexLock lock(&mu_);
  auto it = live_.find(label_values);
  if (it != live_.end()) return *it->second;
  return Create(label_values);
}

template <typename T>
T& Family<T>::Get(std::initializer_list<std::string_view> label_values) {
  CheckArity(label_values.size());
  MutexLock lock(&mu_);
  auto it = live_.find(label_values);
  if (it != live_.end()) return *it->second;
  return Create(std::vector<std::string>(label_values.begin(), label_values.end()));
}

template <typename T>
void Family<T>::Remove(const std::vector<std::string>& label_values) {
  CheckArity(label_values.size());
  MutexLock lock(&mu_);
  live_.erase(label_values);  // the child itself stays in all_: references remain valid
}

template <typename T>
void Family<T>::Expose(std::string* out) const {
  out->append("# HELP ");
  out->append(name_);
  out->push_back(' ');
  AppendEscaped(help_, /*quote=*/false, out);
  out->append("\n# TYPE ");
  out->append(name_);
  out->push_back(' ');
  out->append(TypeName(type_));
  out->push_back('\n');

  MutexLock lock(&mu_);
  if constexpr (std::is_same_v<T, Histogram>) {
    std::vector<std::string> les;
    les.reserve(bounds_.size() + 1);
    for (double b : bounds_) les.push_back(FormatNumber(b));
    les.push_back("+Inf");
    std::string prefix;  // `name_bucket{labels,le="`: built once per child, not per bucket
    for (const auto& [values, h] : live_) {
      std::vector<uint64_t> cumulative = h->CumulativeCounts();
      prefix = name_ + "_bucket";
      const std::string le_mark = "\x01";
      AppendLabels(label_names_, values, &le_mark, &prefix);
      prefix.resize(prefix.size() - le_mark.size() - 2);  // up to and with le="
      for (size_t i = 0; i < les.size(); ++i) {
        out->append(prefix);
        out->append(les[i]);
        out->append("\"} ");
        fmt::format_to(std::back_inserter(*out), "{}\n", cumulative[i]);
      }
      out->append(name_);
      out->append("_sum");
      AppendLabels(label_names_, values, nullptr, out);
      out->push_back(' ');
      AppendNumber(h->Sum(), out);
      out->push_back('\n');
      // The +Inf bucket rather than Count(): the two must agree in one scrape even while
      // observations race with it.
      out->append(name_);
      out->append("_count");
      AppendLabels(label_names_, values, nullptr, out);
      fmt::format_to(std::back_inserter(*out), " {}\n", cumulative.back());
    }
  } else {
    for (const auto& [values, child] : live_) {
      out->append(name_);
      AppendLabels(label_names_, values, nullptr, out);
      out->push_back(' ');
      AppendNumber(child->Value(), out);
      out->push_back('\n');
    }
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

// --- Registry --------------------------------------------------------------------------------

Registry& Registry::Global() {
  // Never destroyed: other threads may still update metrics while static destructors run.
  static Registry* const registry = new Registry();
  return *registry;
}

template <typename T>
Family<T>& Registry::Add(const std::string& name, const std::string& help,
                         std::vector<std::string> label_names, Type type,
                         std::vector<double> bounds) {
  if (!ValidMetricName(name)) DAIS_LOG(kFatal, "invalid metric name '{}'", name);
  for (size_t i = 0; i < label_names.size(); ++i) {
    const std::string& l = label_names[i];
    if (!ValidLabelName(l)) DAIS_LOG(kFatal, "metric {}: invalid label name '{}'", name, l);
    if (type == Type::kHistogram && l == "le") {
      DAIS_LOG(kFatal, "metric {}: label name 'le' is reserved for histogram buckets", name);
    }
    if (std::find(label_names.begin(), label_names.begin() + i, l) != label_names.begin() + i) {
      DAIS_LOG(kFatal, "metric {}: duplicate label name '{}'", name, l);
    }
  }
  if (type == Type::kHistogram) {
    // Normalize (drop a trailing +Inf, validate) the same way every child will.
    bounds = Histogram(std::move(bounds)).bounds();
  }

  MutexLock lock(&mu_);
  auto it = families_.find(name);
  if (it != families_.end()) {
    FamilyBase& existing = *it->second;
    if (existing.type() != type || existing.label_names() != label_names) {
      DAIS_LOG(kFatal,
               "metric {} registered twice with different definitions: {} [{}] then {} [{}]", name,
               TypeName(existing.type()), fmt::join(existing.label_names(), ","), TypeName(type),
               fmt::join(label_names, ","));
    }
    auto& family = static_cast<Family<T>&>(existing);
    if (family.bounds_ != bounds) {
      DAIS_LOG(kFatal, "histogram {} registered twice with different bucket bounds", name);
    }
    return family;
  }
  auto family = std::make_unique<Family<T>>(name, help, std::move(label_names), type);
  family->bounds_ = std::move(bounds);
  Family<T>& ref = *family;
  families_.emplace(name, std::move(family));
  return ref;
}

Family<Counter>& Registry::AddCounter(const std::string& name, const std::string& help,
                                      std::vector<std::string> label_names) {
  return Add<Counter>(name, help, std::move(label_names), Type::kCounter, {});
}

Family<Gauge>& Registry::AddGauge(const std::string& name, const std::string& help,
                                  std::vector<std::string> label_names) {
  return Add<Gauge>(name, help, std::move(label_names), Type::kGauge, {});
}

Family<Histogram>& Registry::AddHistogram(const std::string& name, const std::string& help,
                                          std::vector<std::string> label_names,
                                          std::vector<double> bounds) {
  return Add<Histogram>(name, help, std::move(label_names), Type::kHistogram, std::move(bounds));
}

// jemalloc's mallctl, when the process is linked with it (weak: absent with glibc's malloc).
extern "C" int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen)
    __attribute__((weak));

namespace {

// dais_process_heap_allocations_total from jemalloc's count of allocation requests (small and
// large, all arenas, MALLCTL_ARENAS_ALL = 4096), brought up to date on each exposition; the
// benchmarks divide it by requests. Not registered with another allocator.
void RefreshHeapAllocations(Registry& registry) {
  if (mallctl == nullptr) return;
  uint64_t epoch = 1;
  size_t size = sizeof(epoch);
  if (mallctl("epoch", &epoch, &size, &epoch, size) != 0) return;
  uint64_t small = 0, large = 0;
  size = sizeof(uint64_t);
  if (mallctl("stats.arenas.4096.small.nrequests", &small, &size, nullptr, 0) != 0 ||
      mallctl("stats.arenas.4096.large.nrequests", &large, &size, nullptr, 0) != 0) {
    return;  // built without statistics
  }
  static Counter& counter =
      registry
          .AddCounter("dais_process_heap_allocations_total",
                      "Heap allocations the process has made (jemalloc's count of requests)", {})
          .Get({});
  static std::atomic<uint64_t> seen{0};
  const uint64_t now = small + large;
  uint64_t before = seen.load();
  while (now > before && !seen.compare_exchange_weak(before, now)) {
  }
  if (now > before) counter.Increment(static_cast<double>(now - before));
}

}  // namespace

std::string Registry::Expose() const {
  if (this == &Global()) RefreshHeapAllocations(Global());
  std::string out;
  MutexLock lock(&mu_);
  for (const auto& [name, family] : families_) family->Expose(&out);
  return out;
}

}  // namespace dais::metrics
