// Prometheus metrics: counters, gauges and histograms with labels, and the text exposition format
// (https://prometheus.io/docs/instrumenting/exposition_formats/).
//
// Usage: a component asks the registry for a family once, then for the child with its label
// values once (e.g. per model version), and keeps the returned reference; the hot path is then a
// few relaxed atomic operations, no lock and no map lookup. Children live as long as the registry
// (references stay valid); Family::Remove drops a child from the exposition (used on unload), the
// memory is kept until the registry dies so that stale references stay safe.
//
// Thread-safety: everything is thread-safe.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/mutex.h"

namespace dais::metrics {

// Monotonic: Increment with a negative or NaN value is a bug (logged via DAIS_BUG, ignored).
class Counter {
 public:
  void Increment(double v = 1.0);
  double Value() const;

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void Set(double v);
  void Add(double v);
  double Value() const;

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  // `bounds` are the upper bounds of the buckets, strictly increasing (else fatal); +Inf is
  // implicit (a trailing +Inf bound is dropped).
  explicit Histogram(std::vector<double> bounds);
  // A value equal to a bound counts in that bound's bucket (Prometheus "le"); NaN counts in +Inf.
  void Observe(double v);
  uint64_t Count() const;
  double Sum() const;
  // Cumulative counts per bound, then +Inf (size bounds()+1).
  std::vector<uint64_t> CumulativeCounts() const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // non-cumulative, size bounds_+1
  std::atomic<double> sum_{0.0};
  std::atomic<uint64_t> count_{0};
};

// Buckets for latencies in seconds: 50us .. 10s.
std::vector<double> LatencyBuckets();
// Finer buckets for latencies that are judged against a limit (a rollout's p99): 100us .. 10s,
// 13 a decade (1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, 7, 8 times a power of ten), so that
// adjacent bounds are within a factor of 1.25 and the round figures people set as limits (1, 2,
// 2.5, 5, 10, 25, 50, 100, 250 ms...) are bounds themselves. 66 bounds.
std::vector<double> FineLatencyBuckets();
// 1, 2, 4, ... up to `max` (inclusive if a power of two).
std::vector<double> PowerOfTwoBuckets(double max);

enum class Type { kCounter, kGauge, kHistogram };

template <typename T>
class Family;

class FamilyBase {
 public:
  FamilyBase(std::string name, std::string help, std::vector<std::string> label_names, Type type)
      : name_(std::move(name)),
        help_(std::move(help)),
        label_names_(std::move(label_names)),
        type_(type) {}
  virtual ~FamilyBase() = default;
  const std::string& name() const { return name_; }
  Type type() const { return type_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  // Appends "# HELP", "# TYPE" and one line per child (per bucket for histograms).
  virtual void Expose(std::string* out) const = 0;

 protected:
  std::string name_, help_;
  std::vector<std::string> label_names_;
  Type type_;
};

template <typename T>
class Family : public FamilyBase {
 public:
  using FamilyBase::FamilyBase;
  // Returns the child for these label values (one per label name, else fatal), creating it on
  // first use. For histograms the family's bucket bounds apply. The reference stays valid for
  // the registry's life.
  T& Get(const std::vector<std::string>& label_values);
  // The same without building a vector of strings: no allocation once the child exists (the
  // per-request form: `family.Get({route, version})`).
  T& Get(std::initializer_list<std::string_view> label_values);
  // Drops the child from the exposition (no-op if absent). Existing references stay valid but
  // are no longer exposed; a later Get with the same values creates a fresh child.
  void Remove(const std::vector<std::string>& label_values);
  void Expose(std::string* out) const override;

 private:
  friend class Registry;
  std::vector<double> bounds_;  // histograms only
  // Label values ordered as vectors of strings, also against a list of views (heterogeneous
  // lookup: std::map::find without a key built).
  struct LabelsLess {
    using is_transparent = void;
    using Views = std::initializer_list<std::string_view>;
    bool operator()(const std::vector<std::string>& a, const std::vector<std::string>& b) const {
      return a < b;
    }
    bool operator()(const std::vector<std::string>& a, Views b) const {
      return std::lexicographical_compare(
          a.begin(), a.end(), b.begin(), b.end(),
          [](std::string_view x, std::string_view y) { return x < y; });
    }
    bool operator()(Views a, const std::vector<std::string>& b) const {
      return std::lexicographical_compare(
          a.begin(), a.end(), b.begin(), b.end(),
          [](std::string_view x, std::string_view y) { return x < y; });
    }
  };
  void CheckArity(size_t values) const;
  T& Create(std::vector<std::string> label_values) DAIS_REQUIRES(mu_);

  mutable Mutex mu_;
  std::map<std::vector<std::string>, T*, LabelsLess> live_ DAIS_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<T>> all_ DAIS_GUARDED_BY(mu_);
};

// Defined in registry.cc for these three child types only.
extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;

class Registry {
 public:
  // The process-wide registry that /metrics exposes.
  static Registry& Global();

  // Registering the same name twice returns the same family (type, label names and, for
  // histograms, bounds must match, or it is a programming error and aborts). Names must be valid
  // Prometheus metric / label names (else fatal); "le" is reserved for histograms.
  Family<Counter>& AddCounter(const std::string& name, const std::string& help,
                              std::vector<std::string> label_names);
  Family<Gauge>& AddGauge(const std::string& name, const std::string& help,
                          std::vector<std::string> label_names);
  Family<Histogram>& AddHistogram(const std::string& name, const std::string& help,
                                  std::vector<std::string> label_names, std::vector<double> bounds);

  // Prometheus text format 0.0.4 of every family, sorted by name.
  std::string Expose() const;

 private:
  template <typename T>
  Family<T>& Add(const std::string& name, const std::string& help,
                 std::vector<std::string> label_names, Type type, std::vector<double> bounds);

  mutable Mutex mu_;
  std::map<std::string, std::unique_ptr<FamilyBase>> families_ DAIS_GUARDED_BY(mu_);
};

}  // namespace dais::metrics
