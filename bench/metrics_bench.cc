// Cost of the always-on metrics on the request path: one Histogram::Observe / Counter::Increment.
#include <benchmark/benchmark.h>

#include "metrics/registry.h"

using dais::metrics::Registry;

static void BM_HistogramObserve(benchmark::State& state) {
  Registry reg;
  auto& h = reg.AddHistogram("h", "h", {"model"}, dais::metrics::LatencyBuckets()).Get({"m"});
  double v = 0.0001;
  for (auto _ : state) {
    h.Observe(v);
    v = v < 1 ? v * 1.7 : 0.0001;
  }
}
BENCHMARK(BM_HistogramObserve)->Threads(1)->Threads(2);

static void BM_CounterIncrement(benchmark::State& state) {
  Registry reg;
  auto& c = reg.AddCounter("c", "c", {"model"}).Get({"m"});
  for (auto _ : state) c.Increment();
}
BENCHMARK(BM_CounterIncrement)->Threads(1)->Threads(2);

BENCHMARK_MAIN();
