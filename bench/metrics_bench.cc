// Cost of the always-on metrics on the request path: one Histogram::Observe / Counter::Increment.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "metrics/registry.h"

using dais::metrics::Registry;

// Arg 0: LatencyBuckets (17 bounds, the node's histograms); 1: FineLatencyBuckets (66 bounds, the
// gateway's duration histogram that rollouts judge, issue 31).
static std::vector<double> Buckets(int64_t which) {
  return which == 0 ? dais::metrics::LatencyBuckets() : dais::metrics::FineLatencyBuckets();
}

static void BM_HistogramObserve(benchmark::State& state) {
  Registry reg;
  auto& h = reg.AddHistogram("h", "h", {"model"}, Buckets(state.range(0))).Get({"m"});
  double v = 0.0001;
  for (auto _ : state) {
    h.Observe(v);
    v = v < 1 ? v * 1.7 : 0.0001;
  }
}
BENCHMARK(BM_HistogramObserve)->Arg(0)->Arg(1)->Threads(1)->Threads(2);

// One scrape of 20 (route, version) children: the text a gateway serves and Prometheus parses.
static void BM_HistogramExposition(benchmark::State& state) {
  Registry reg;
  auto& f = reg.AddHistogram("h", "h", {"route", "version"}, Buckets(state.range(0)));
  for (int i = 0; i < 20; ++i)
    f.Get({"r" + std::to_string(i / 2), std::to_string(i % 2)}).Observe(0.01);
  size_t bytes = 0;
  for (auto _ : state) {
    std::string text = reg.Expose();
    bytes = text.size();
    benchmark::DoNotOptimize(text);
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_HistogramExposition)->Arg(0)->Arg(1);

static void BM_CounterIncrement(benchmark::State& state) {
  Registry reg;
  auto& c = reg.AddCounter("c", "c", {"model"}).Get({"m"});
  for (auto _ : state) c.Increment();
}
BENCHMARK(BM_CounterIncrement)->Threads(1)->Threads(2);

BENCHMARK_MAIN();
