// Vector memory benchmark (docs/benchmarks.md, "Vector memory"): one run, one table.
//
//  1. Seeded synthetic clustered data: --n vectors of --dim dimensions around --clusters
//     Gaussian centres (N(0, 1) per dimension, noise N(0, --spread)), normalised; --queries
//     query vectors from the same mixture (not in the data).
//  2. Ground truth: faiss IndexFlatIP (exact; cosine = inner product of normalised vectors).
//  3. dais: a MemoryService collection (--shards, hnswlib HNSW, M / ef_construction of the
//     spec) built from the data with every core; recall@10 against the ground truth at several
//     ef; memory per million vectors (the index's own account and the process RSS growth).
//  4. The library choice, on the first --compare-n vectors: hnswlib (raw) vs faiss IndexHNSWFlat
//     (same M, efConstruction) vs faiss IndexIVFFlat: build time, recall@10, queries/s.
//  5. Search throughput in process (MemoryService::Search on 1 and all cores) and through the
//     HTTP API of dais serve (the same Server, route table and MemoryHttp, in this process, on
//     the same collection) with wrk at --concurrency connections: queries/s, p50, p99, and the
//     ratio HTTP / in-process; and through the gRPC API (dais.memory.v1.Memory/Search on the
//     same H2Server and methods as dais serve's gRPC port) at the same concurrency.
//
// Usage: memory_bench [--n 1000000] [--dim 128] [--queries 1000] [--compare-n 200000]
//                     [--concurrency 16] [--seconds 10] [--io-threads 0] [--wrk /usr/bin/wrk]
//                     [--data FILE] [--ef-search 80] [--quantization sq8|none]
//                     [--cpu-affinity both|on|off]
//                     [--search-threads -1[,0,N]] (the served runs' search threads, as dais
//                     serve's --memory-search-threads: -1 none, 0 one per core) [--wrk-threads
//                     1[,2]]
// --data: vectors from a file instead of (1): --n + --queries rows of --dim float32
// (little-endian), the data then the queries, normalised here (scripts/gen_item_embeddings.py
// writes the example model's item embeddings so).
// (--compare-n 0 skips the library comparison.)
#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVFFlat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "frontends/http/http_server.h"
#include "frontends/http/kserve_http.h"
#include "frontends/http/memory_http.h"
#include "memory/distance.h"
#include "memory/memory_service.h"
#include "memory/vector_index.h"
#if DAIS_MEMORY_BENCH_GRPC
#include "frontends/grpc/h2_server.h"
#include "frontends/grpc/memory_grpc.h"
#include "memory_grpc_load.h"
#endif

namespace {

using Clock = std::chrono::steady_clock;
namespace mem = dais::memory;

struct Args {
  size_t n = 1'000'000;
  int dim = 128;
  int queries = 1000;
  int clusters = 1000;
  size_t compare_n = 200'000;
  int concurrency = 16;
  double seconds = 10;
  int shards = 1;
  int m = 16;
  int ef_construction = 200;
  int ef_search = mem::IndexParams{}.ef_search;  // the collection ef (in-process, HTTP rows)
  std::string quantization = "sq8";              // the collection's index.quantization: sq8 or none
  std::string wrk = "/usr/bin/wrk";
  unsigned seed = 42;
  double spread = 1.0;  // noise around a centre, per dimension (centres are N(0, 1))
  int io_threads = 0;   // the HTTP server's I/O threads (0: one per core, as dais serve)
  std::string data;     // vectors from this file (see the usage); empty: the mixture
  // The served runs with the I/O threads placed by the scheduler ("off"), bound to cores
  // ("on", EndpointOptions::cpu_affinity) or both, one after the other ("both").
  std::string affinity = "off";
  // The search threads of the served runs, as dais serve's --memory-search-threads (-1: none,
  // the searches run on the I/O threads; 0: one per core), each with each --cpu-affinity.
  std::vector<int> search_threads = {-1};
  // wrk's threads (each setting: its own HTTP run; the connections are split between them).
  std::vector<int> wrk_threads = {1};
};

// The machine's CPU time from /proc/stat's first line, and the part of it the hypervisor gave to
// other guests ("steal": this VM's vCPUs runnable but not running).
struct CpuTicks {
  uint64_t total = 0;
  uint64_t steal = 0;
};
CpuTicks ReadCpuTicks() {
  CpuTicks t;
  if (FILE* f = std::fopen("/proc/stat", "r")) {
    unsigned long long v[8] = {};
    if (std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                    &v[4], &v[5], &v[6], &v[7]) == 8) {
      for (unsigned long long x : v) t.total += x;
      t.steal = v[7];
    }
    std::fclose(f);
  }
  return t;
}

// A thread that sleeps 1 ms in a loop and records how much longer each sleep took: the time
// this process's threads wait to run (the cores busy with wrk and the I/O threads, the VM's
// host), which every request queued behind a stalled I/O thread waits too.
class HiccupMeter {
 public:
  HiccupMeter()
      : start_ticks_(ReadCpuTicks()), thread_([this] {
          while (!stop_.load()) {
            const auto start = Clock::now();
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            const double late =
                std::chrono::duration<double, std::micro>(Clock::now() - start).count() - 1000;
            late_us_.push_back(std::max(0.0, late));
          }
        }) {}
  // "p50 / p99 / p99.9 / max" of the oversleep, and the share of the time in stalls over 2 ms.
  std::string Stop() {
    stop_ = true;
    thread_.join();
    const CpuTicks end = ReadCpuTicks();
    const double steal = end.total > start_ticks_.total
                             ? 100.0 * (end.steal - start_ticks_.steal) /
                                   static_cast<double>(end.total - start_ticks_.total)
                             : 0.0;
    std::vector<double> v = late_us_;
    if (v.empty()) return "no samples";
    std::sort(v.begin(), v.end());
    double total = 0, stalled = 0;
    for (double x : v) {
      total += 1000 + x;
      if (x > 2000) stalled += x;
    }
    char b[256];
    std::snprintf(b, sizeof b,
                  "%zu sleeps of 1 ms overslept p50 %.0f µs, p99 %.0f µs, p99.9 %.0f µs, max %.0f "
                  "µs; %.1f %% of the time in stalls over 2 ms; the host took %.1f %% of the "
                  "CPU time (steal, /proc/stat)",
                  v.size(), v[v.size() / 2], v[v.size() * 99 / 100], v[v.size() * 999 / 1000],
                  v.back(), 100 * stalled / total, steal);
    return b;
  }

 private:
  const CpuTicks start_ticks_;
  std::atomic<bool> stop_{false};
  std::vector<double> late_us_;
  std::thread thread_;
};

double Secs(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

long RssKiB() {
  std::ifstream in("/proc/self/status");
  std::string key;
  long value;
  while (in >> key) {
    if (key == "VmRSS:" && in >> value) return value;
  }
  return 0;
}

void Normalise(std::vector<float>* v, int dim) {
  for (size_t i = 0; i + dim <= v->size(); i += dim) {
    double norm = 0;
    for (int j = 0; j < dim; ++j) norm += (*v)[i + j] * (*v)[i + j];
    const float inv = norm > 0 ? 1.0f / std::sqrt(static_cast<float>(norm)) : 0.0f;
    for (int j = 0; j < dim; ++j) (*v)[i + j] *= inv;
  }
}

// --data: `rows` rows of `dim` float32 from `in`, normalised.
std::vector<float> ReadRows(std::ifstream& in, size_t rows, int dim, const std::string& path) {
  std::vector<float> out(rows * dim);
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size() * 4));
  if (!in) {
    std::fprintf(stderr, "--data %s: fewer than the %zu rows of %d floats asked for\n",
                 path.c_str(), rows, dim);
    std::exit(2);
  }
  Normalise(&out, dim);
  return out;
}

// Clustered data, normalised (the collection is cosine).
std::vector<float> Mixture(size_t n, int dim, const std::vector<float>& centres, double spread,
                           std::mt19937& rng) {
  std::normal_distribution<float> normal;
  const size_t k = centres.size() / dim;
  std::vector<float> out(n * dim);
  for (size_t i = 0; i < n; ++i) {
    const float* c = &centres[(rng() % k) * dim];
    double norm = 0;
    for (int j = 0; j < dim; ++j) {
      out[i * dim + j] = c[j] + static_cast<float>(spread) * normal(rng);
      norm += out[i * dim + j] * out[i * dim + j];
    }
    const float inv = 1.0f / std::sqrt(static_cast<float>(norm));
    for (int j = 0; j < dim; ++j) out[i * dim + j] *= inv;
  }
  return out;
}

double Recall(const std::vector<std::vector<int64_t>>& truth,
              const std::vector<std::vector<int64_t>>& got, int k) {
  double hit = 0;
  for (size_t q = 0; q < truth.size(); ++q) {
    std::set<int64_t> t(truth[q].begin(), truth[q].begin() + k);
    for (int64_t id : got[q]) hit += t.count(id);
  }
  return hit / (truth.size() * k);
}

std::vector<std::vector<int64_t>> Exact(const std::vector<float>& data, size_t n, int dim,
                                        const std::vector<float>& queries, int nq, int k) {
  faiss::IndexFlatIP flat(dim);
  flat.add(n, data.data());
  std::vector<float> d(static_cast<size_t>(nq) * k);
  std::vector<faiss::Index::idx_t> l(static_cast<size_t>(nq) * k);
  flat.search(nq, queries.data(), k, d.data(), l.data());
  std::vector<std::vector<int64_t>> out(nq);
  for (int q = 0; q < nq; ++q) out[q].assign(l.begin() + q * k, l.begin() + (q + 1) * k);
  return out;
}

struct Row {
  std::string what;
  double build_s = -1, recall = -1, qps = -1, p50_us = -1, p99_us = -1, bytes_per_m = -1;
};

void Print(const std::vector<Row>& rows) {
  std::printf(
      "\n| what | build s | recall@10 | queries/s | p50 µs | p99 µs | MiB per 1M vectors |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  auto f = [](double v, const char* fmt) {
    if (v < 0) return std::string("");
    char b[64];
    std::snprintf(b, sizeof b, fmt, v);
    return std::string(b);
  };
  for (const Row& r : rows) {
    std::printf("| %s | %s | %s | %s | %s | %s | %s |\n", r.what.c_str(),
                f(r.build_s, "%.1f").c_str(), f(r.recall, "%.4f").c_str(), f(r.qps, "%.0f").c_str(),
                f(r.p50_us, "%.0f").c_str(), f(r.p99_us, "%.0f").c_str(),
                f(r.bytes_per_m / (1 << 20), "%.0f").c_str());
  }
}

// Queries/s of `search(q)` on `threads` threads for `seconds`, with p50/p99 of single calls.
Row Throughput(const std::string& what, int threads, double seconds, int nq,
               const std::function<void(int)>& search) {
  std::atomic<bool> stop{false};
  std::vector<std::vector<double>> lat(threads);
  std::vector<std::thread> ts;
  const auto start = Clock::now();
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      for (int i = t; !stop.load(std::memory_order_relaxed); ++i) {
        const auto s = Clock::now();
        search(i % nq);
        lat[t].push_back(Secs(s) * 1e6);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : ts) t.join();
  const double elapsed = Secs(start);
  std::vector<double> all;
  for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  Row r{what};
  r.qps = all.size() / elapsed;
  r.p50_us = all[all.size() / 2];
  r.p99_us = all[all.size() * 99 / 100];
  return r;
}

// wrk POSTing the queries (round robin) at `conc` connections; its figures parsed.
Row Wrk(const Args& a, int port, const std::vector<float>& queries, int nq, int threads,
        int64_t* errors) {
  const std::string dir = "/tmp/memory_bench." + std::to_string(getpid());
  std::system(("mkdir -p " + dir).c_str());
  {
    std::ofstream lua(dir + "/search.lua");
    lua << "wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\n"
        << "local bodies = {\n";
    for (int q = 0; q < nq; ++q) {
      lua << "'{\"k\":10,\"ef\":" << a.ef_search << ",\"with_payload\":false,\"vector\":[";
      for (int j = 0; j < a.dim; ++j) lua << (j ? "," : "") << queries[q * a.dim + j];
      lua << "]}',\n";
    }
    lua << "}\nlocal i = 0\nrequest = function()\n  i = i % #bodies + 1\n"
        << "  return wrk.format(nil, nil, nil, bodies[i])\nend\n";
  }
  const std::string out = dir + "/wrk.txt";
  const std::string cmd = a.wrk + " -t" + std::to_string(threads) + " -c" +
                          std::to_string(a.concurrency) + " -d" +
                          std::to_string(static_cast<int>(a.seconds)) + "s --latency -s " + dir +
                          "/search.lua http://127.0.0.1:" + std::to_string(port) +
                          "/v2/memory/collections/bench/search > " + out;
  Row r{"dais serve HTTP search, c=" + std::to_string(a.concurrency) + ", " +
        (a.io_threads > 0 ? std::to_string(a.io_threads) : std::string("default")) +
        " I/O threads (wrk, " + std::to_string(threads) + " thread" + (threads > 1 ? "s" : "") +
        ")"};
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "wrk failed: %s\n", cmd.c_str());
    return r;
  }
  std::ifstream in(out);
  std::string line;
  auto us = [](double v, const std::string& unit) {
    return unit == "us" ? v : unit == "ms" ? v * 1e3 : v * 1e6;
  };
  *errors = 0;
  while (std::getline(in, line)) {
    double v;
    char unit[8];
    long e1, e2, e3, e4;
    if (std::sscanf(line.c_str(), " 50%% %lf%7s", &v, unit) == 2) r.p50_us = us(v, unit);
    if (std::sscanf(line.c_str(), " 99%% %lf%7s", &v, unit) == 2) r.p99_us = us(v, unit);
    if (std::sscanf(line.c_str(), "Requests/sec: %lf", &v) == 1) r.qps = v;
    if (std::sscanf(line.c_str(), "  Non-2xx or 3xx responses: %ld", &e1) == 1) *errors += e1;
    if (std::sscanf(line.c_str(), "  Socket errors: connect %ld, read %ld, write %ld, timeout %ld",
                    &e1, &e2, &e3, &e4) == 4) {
      *errors += e1 + e2 + e3 + e4;
    }
  }
  std::system(("rm -rf " + dir).c_str());
  return r;
}

// "1,2,3" as numbers.
std::vector<int> IntList(const std::string& v) {
  std::vector<int> out;
  std::stringstream list(v);
  for (std::string item; std::getline(list, item, ',');) out.push_back(std::stoi(item));
  return out;
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--n")
      a.n = std::stoul(v);
    else if (k == "--dim")
      a.dim = std::stoi(v);
    else if (k == "--queries")
      a.queries = std::stoi(v);
    else if (k == "--clusters")
      a.clusters = std::stoi(v);
    else if (k == "--compare-n")
      a.compare_n = std::stoul(v);
    else if (k == "--concurrency")
      a.concurrency = std::stoi(v);
    else if (k == "--seconds")
      a.seconds = std::stod(v);
    else if (k == "--shards")
      a.shards = std::stoi(v);
    else if (k == "--m")
      a.m = std::stoi(v);
    else if (k == "--ef-construction")
      a.ef_construction = std::stoi(v);
    else if (k == "--ef-search")
      a.ef_search = std::stoi(v);
    else if (k == "--quantization")
      a.quantization = v;
    else if (k == "--wrk")
      a.wrk = v;
    else if (k == "--seed")
      a.seed = static_cast<unsigned>(std::stoul(v));
    else if (k == "--spread")
      a.spread = std::stod(v);
    else if (k == "--io-threads")
      a.io_threads = std::stoi(v);
    else if (k == "--data")
      a.data = v;
    else if (k == "--cpu-affinity")
      a.affinity = v;
    else if (k == "--search-threads")
      a.search_threads = IntList(v);
    else if (k == "--wrk-threads")
      a.wrk_threads = IntList(v);
    else {
      std::fprintf(stderr, "unknown flag %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

// The library comparison on the first `n` vectors.
void CompareLibraries(const Args& a, const std::vector<float>& data, const std::vector<float>& q,
                      std::vector<Row>* rows) {
  const size_t n = std::min(a.compare_n, a.n);
  const int nq = a.queries, k = 10;
  auto truth = Exact(data, n, a.dim, q, nq, k);
  const std::string at = " (" + std::to_string(n / 1000) + "k)";
  std::vector<std::vector<int64_t>> got(nq);
  {  // hnswlib through VectorIndex (hnswlib's headers may be in one translation unit only)
    auto start = Clock::now();
    mem::IndexParams params{a.m, a.ef_construction, 64};
    mem::VectorIndex g(a.dim, mem::Metric::kInnerProduct, params, n);
    std::vector<std::pair<uint64_t, const float*>> points;
    for (size_t i = 0; i < n; ++i) points.emplace_back(i, &data[i * a.dim]);
    g.UpsertMany(points, 2);
    const double build = Secs(start);
    for (int ef : {64, 128}) {
      start = Clock::now();
      for (int i = 0; i < nq; ++i) {
        got[i].clear();
        for (const auto& h : g.Search(&q[i * a.dim], k, {}, 0, nullptr, ef)) {
          got[i].push_back(static_cast<int64_t>(h.label));
        }
      }
      Row r{"hnswlib HNSW, ef " + std::to_string(ef) + at, build, Recall(truth, got, k)};
      r.qps = nq / Secs(start);
      rows->push_back(r);
    }
  }
  {  // faiss HNSW, same parameters
    faiss::IndexHNSWFlat index(a.dim, a.m, faiss::METRIC_INNER_PRODUCT);
    index.hnsw.efConstruction = a.ef_construction;
    auto start = Clock::now();
    index.add(n, data.data());
    const double build = Secs(start);
    std::vector<float> d(static_cast<size_t>(nq) * k);
    std::vector<faiss::Index::idx_t> l(static_cast<size_t>(nq) * k);
    for (int ef : {64, 128}) {
      index.hnsw.efSearch = ef;
      start = Clock::now();
      for (int i = 0; i < nq; ++i) index.search(1, &q[i * a.dim], k, &d[i * k], &l[i * k]);
      const double secs = Secs(start);
      for (int i = 0; i < nq; ++i) got[i].assign(l.begin() + i * k, l.begin() + (i + 1) * k);
      Row r{"faiss IndexHNSWFlat, efSearch " + std::to_string(ef) + at, build,
            Recall(truth, got, k)};
      r.qps = nq / secs;
      rows->push_back(r);
    }
  }
  {  // faiss IVF (flat lists)
    const int nlist = static_cast<int>(4 * std::sqrt(static_cast<double>(n)));
    faiss::IndexFlatIP quantizer(a.dim);
    faiss::IndexIVFFlat index(&quantizer, a.dim, nlist, faiss::METRIC_INNER_PRODUCT);
    auto start = Clock::now();
    index.train(std::min<size_t>(n, 50 * nlist), data.data());
    index.add(n, data.data());
    const double build = Secs(start);
    std::vector<float> d(static_cast<size_t>(nq) * k);
    std::vector<faiss::Index::idx_t> l(static_cast<size_t>(nq) * k);
    index.nprobe = 16;
    start = Clock::now();
    for (int i = 0; i < nq; ++i) index.search(1, &q[i * a.dim], k, &d[i * k], &l[i * k]);
    const double secs = Secs(start);
    for (int i = 0; i < nq; ++i) got[i].assign(l.begin() + i * k, l.begin() + (i + 1) * k);
    Row r{"faiss IndexIVFFlat nlist " + std::to_string(nlist) + " nprobe 16" + at, build,
          Recall(truth, got, k)};
    r.qps = nq / secs;
    rows->push_back(r);
  }
}

std::vector<int64_t> Ids(const std::vector<mem::SearchHit>& hits) {
  std::vector<int64_t> out;
  for (const auto& h : hits) out.push_back(std::stoll(h.id));
  return out;
}

}  // namespace

// The searches served by dais serve's HTTP and gRPC frontends on `service`, with the I/O threads
// bound to cores (`bind`, EndpointOptions::cpu_affinity) or placed by the scheduler.
struct Served {
  std::string setting;
  std::vector<Row> http;  // one per --wrk-threads
  Row grpc;
  std::vector<int64_t> http_errors;
  int64_t grpc_errors = 0;
  std::vector<std::string> http_stalls;
  std::string grpc_stalls;
};
dais::StatusOr<Served> Serve(const Args& a, mem::MemoryService* service,
                             const std::vector<float>& queries, bool bind, int search_threads) {
  Served out;
  service->SetSearchThreads(search_threads);
  out.setting = bind ? "I/O threads bound to cores" : "I/O threads placed by the scheduler";
  std::string suffix = bind ? ", bound" : "";
  if (search_threads > 0) {
    out.setting += ", " + std::to_string(search_threads) + " search threads";
    suffix += ", " + std::to_string(search_threads) + " search threads";
  }
  dais::frontends::http::MemoryHttp memory_http(service);
  dais::frontends::http::Server* io = nullptr;
  // The memory routes never touch the inference server: none is needed here.
  dais::frontends::http::KServeHttp kserve(nullptr, &io);
  kserve.SetMemory(&memory_http);
  dais::frontends::http::ServerOptions so;
  so.address = "127.0.0.1";
  so.threads = a.io_threads;
  so.cpu_affinity = bind;
  dais::frontends::http::Server server(
      so, [&](auto q, auto w) { kserve.Handle(std::move(q), std::move(w)); });
  io = &server;
  RETURN_IF_ERROR(server.Start());
  for (const int threads : a.wrk_threads) {
    HiccupMeter hiccups;
    int64_t errors = 0;
    out.http.push_back(Wrk(a, server.port(), queries, a.queries, threads, &errors));
    out.http.back().what += suffix;
    out.http_errors.push_back(errors);
    out.http_stalls.push_back(hiccups.Stop());
  }
  server.Stop();
#if DAIS_MEMORY_BENCH_GRPC
  dais::frontends::grpc::MethodTable methods;
  dais::frontends::grpc::AddMemoryMethods(methods, service);
  dais::frontends::grpc::H2ServerOptions go;
  go.address = "127.0.0.1";
  go.threads = a.io_threads;
  go.cpu_affinity = bind;
  dais::frontends::grpc::H2Server grpc_server(go, std::move(methods));
  RETURN_IF_ERROR(grpc_server.Start());
  HiccupMeter grpc_hiccups;
  const GrpcLoadResult g = GrpcSearchLoad(grpc_server.port(), queries, a.dim, a.queries,
                                          a.ef_search, a.concurrency, a.seconds);
  out.grpc.what = "dais serve gRPC search, c=" + std::to_string(a.concurrency) +
                  " (grpc++ client in this process, a connection per call in flight)" + suffix;
  out.grpc.qps = g.qps;
  out.grpc.p50_us = g.p50_us;
  out.grpc.p99_us = g.p99_us;
  out.grpc_errors = g.errors;
  out.grpc_stalls = grpc_hiccups.Stop();
  grpc_server.Stop(1000);
#endif
  return out;
}

int main(int argc, char** argv) {
  const Args a = Parse(argc, argv);
  std::mt19937 rng(a.seed);
  std::normal_distribution<float> normal;
  std::vector<float> centres(static_cast<size_t>(a.clusters) * a.dim);
  for (float& x : centres) x = normal(rng);
  const long rss0 = RssKiB();
  std::vector<float> data, queries;
  if (a.data.empty()) {
    data = Mixture(a.n, a.dim, centres, a.spread, rng);
    queries = Mixture(a.queries, a.dim, centres, a.spread, rng);
    std::fprintf(stderr, "data: %zu x %d, %d clusters, %d queries\n", a.n, a.dim, a.clusters,
                 a.queries);
  } else {
    std::ifstream in(a.data, std::ios::binary);
    data = ReadRows(in, a.n, a.dim, a.data);
    queries = ReadRows(in, a.queries, a.dim, a.data);
    std::fprintf(stderr, "data: %zu x %d from %s, %d queries\n", a.n, a.dim, a.data.c_str(),
                 a.queries);
  }
  std::fprintf(stderr, "distance kernels: %s (DAIS_MEMORY_SIMD=avx2|portable|hnswlib to compare)\n",
               std::string(dais::memory::BestDistanceKernels().name).c_str());
  std::vector<Row> rows;

  auto start = Clock::now();
  auto truth = Exact(data, a.n, a.dim, queries, a.queries, 10);
  Row flat{"faiss IndexFlatIP (exact: the ground truth)", -1, 1.0};
  flat.qps = a.queries / Secs(start);
  rows.push_back(flat);

  // The collection's ef_search is the sweep's lowest (a search never goes below it), so that each
  // recall row runs at its own ef; the in-process and HTTP rows ask for --ef-search per request.
  char spec_json[320];
  std::snprintf(spec_json, sizeof spec_json,
                R"({"name": "bench", "dimension": %d, "metric": "cosine", "shards": %d,)"
                R"( "index": {"m": %d, "ef_construction": %d, "ef_search": %d,)"
                R"( "quantization": "%s"}})",
                a.dim, a.shards, a.m, a.ef_construction, std::min(64, a.ef_search),
                a.quantization.c_str());
  mem::MemoryService service(nullptr);
  auto spec = mem::ParseCollectionSpec(spec_json);
  if (!spec.ok()) {
    std::fprintf(stderr, "%s\n", spec.status().message().c_str());
    return 2;
  }
  if (auto s = service.Create(*spec); !s.ok()) return 1;
  std::fprintf(stderr, "collection: %s\n", spec_json);
  const long rss1 = RssKiB();
  start = Clock::now();
  for (size_t from = 0; from < a.n; from += 100'000) {
    std::vector<mem::Point> batch;
    for (size_t i = from; i < std::min(a.n, from + 100'000); ++i) {
      batch.push_back(
          {std::to_string(i), std::vector<float>(&data[i * a.dim], &data[(i + 1) * a.dim]), {}});
    }
    std::promise<dais::Status> done;
    service.Upsert("bench", std::move(batch), [&](dais::Status s) { done.set_value(s); });
    done.get_future().get();
    std::fprintf(stderr, "\rdais: %zu points indexed (%.0f s)", std::min(a.n, from + 100'000),
                 Secs(start));
  }
  const double build = Secs(start);
  const long rss2 = RssKiB();
  std::fprintf(stderr, "\n");
  const auto stats = service.Stats()[0];
  for (int ef : {64, 80, 96, 128, 256}) {
    std::vector<std::vector<int64_t>> got(a.queries);
    mem::SearchRequest r;
    r.k = 10;
    r.ef = ef;
    r.with_payload = false;
    start = Clock::now();
    for (int q = 0; q < a.queries; ++q) {
      r.vector.assign(&queries[q * a.dim], &queries[(q + 1) * a.dim]);
      got[q] = Ids(*service.Search("bench", r));
    }
    Row row{"dais collection " + a.quantization + ", ef " + std::to_string(ef) + " (1 thread)",
            ef == 64 ? build : -1, Recall(truth, got, 10)};
    row.qps = a.queries / Secs(start);
    row.bytes_per_m = ef == 64 ? stats.memory_bytes * 1e6 / a.n : -1;
    rows.push_back(row);
  }
  std::fprintf(stderr, "RSS: data %ld MiB, index build +%ld MiB\n", (rss1 - rss0) / 1024,
               (rss2 - rss1) / 1024);

  std::vector<mem::SearchRequest> reqs(a.queries);
  for (int q = 0; q < a.queries; ++q) {
    reqs[q].k = 10;
    reqs[q].ef = a.ef_search;
    reqs[q].with_payload = false;
    reqs[q].vector.assign(&queries[q * a.dim], &queries[(q + 1) * a.dim]);
  }
  auto search = [&](int q) { (void)service.Search("bench", reqs[q]); };
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::string ef = "ef " + std::to_string(a.ef_search);
  rows.push_back(
      Throughput("dais in process, " + ef + ", 1 thread", 1, a.seconds, a.queries, search));
  Row in_proc = Throughput("dais in process, " + ef + ", " + std::to_string(cores) + " threads",
                           cores, a.seconds, a.queries, search);
  rows.push_back(in_proc);

  std::vector<Served> served;
  for (const int threads : a.search_threads) {
    for (const bool bind : {false, true}) {
      if (bind ? a.affinity == "off" : a.affinity == "on") continue;
      auto r = Serve(a, &service, queries, bind, threads == 0 ? cores : std::max(threads, 0));
      if (!r.ok()) {
        std::fprintf(stderr, "%s\n", r.status().message().c_str());
        return 1;
      }
      rows.insert(rows.end(), r->http.begin(), r->http.end());
      if (r->grpc.qps >= 0) rows.push_back(r->grpc);
      served.push_back(std::move(*r));
    }
  }

  if (a.compare_n > 0) CompareLibraries(a, data, queries, &rows);
  Print(rows);
  for (const Served& r : served) {
    std::printf("\n%s:\n", r.setting.c_str());
    for (size_t i = 0; i < r.http.size(); ++i) {
      std::printf("  during the HTTP run (wrk -t%d), a thread sleeping 1 ms in a loop: %s\n",
                  a.wrk_threads[i], r.http_stalls[i].c_str());
      std::printf("  HTTP / in-process (%d threads) queries/s: %.2f; HTTP errors: %lld\n", cores,
                  r.http[i].qps / in_proc.qps, static_cast<long long>(r.http_errors[i]));
    }
    if (!r.grpc_stalls.empty())
      std::printf("  during the gRPC run, the same: %s\n", r.grpc_stalls.c_str());
    if (r.grpc.qps > 0) {
      std::printf("  gRPC / in-process (%d threads) queries/s: %.2f; gRPC errors: %lld\n", cores,
                  r.grpc.qps / in_proc.qps, static_cast<long long>(r.grpc_errors));
    }
  }
  std::printf(
      "\nIndex memory %.0f bytes per vector (%.0f MiB per million; the process grew %.0f MiB "
      "per million while indexing)\n",
      stats.memory_bytes / static_cast<double>(a.n), stats.memory_bytes * 1e6 / a.n / (1 << 20),
      (rss2 - rss1) / 1024.0 * 1e6 / a.n);
  return 0;
}
