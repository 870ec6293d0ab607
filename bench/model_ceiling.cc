// The ceiling: the model's own forward, in process, through the same backend dais serves it
// with (no HTTP, no queue, no batcher). Prints one JSON line per batch size:
//   {"model":..., "batch":N, "calls":..., "p50_us":..., "p99_us":..., "rows_per_s":...}
//
// usage: model_ceiling MODEL_DIR [seconds=2] [batch sizes...=1 32]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "dais/backend.h"
#include "runtime/model_config.h"
#include "runtime/repository.h"
#include "runtime/tensor_config.h"

using namespace dais;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: model_ceiling MODEL_DIR [seconds] [batch...]\n");
    return 2;
  }
  std::filesystem::path dir(argv[1]);
  double seconds = argc > 2 ? std::atof(argv[2]) : 2.0;
  std::vector<int64_t> batches;
  for (int i = 3; i < argc; ++i) batches.push_back(std::atoll(argv[i]));
  if (batches.empty()) batches = {1, 32};

  auto src = runtime::ScanModel({dir.parent_path().string()}, dir.filename().string());
  if (!src.ok()) return std::fprintf(stderr, "%s\n", src.status().ToString().c_str()), 1;
  auto config = runtime::LoadModelConfig(*src, false);
  if (!config.ok()) return std::fprintf(stderr, "%s\n", config.status().ToString().c_str()), 1;
  Backend* backend = FindBackend(config->backend());
  if (!backend) return std::fprintf(stderr, "no backend %s\n", config->backend().c_str()), 1;
  std::string vdir = src->dir + "/" + std::to_string(src->versions.rbegin()->first);
  auto inst = backend->CreateInstance(vdir, *config, 0);
  if (!inst.ok()) return std::fprintf(stderr, "%s\n", inst.status().ToString().c_str()), 1;

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int64_t batch : batches) {
    std::vector<Tensor> inputs;
    for (const auto& in : config->input()) {
      Tensor t;
      t.name = in.name();
      t.dtype = runtime::ConfigDataType(in.data_type());
      t.shape = runtime::ModelDims(in);
      t.shape.insert(t.shape.begin(), batch);
      int64_t n = ElementCount(t.shape);
      float* p = reinterpret_cast<float*>(t.Allocate(n * sizeof(float)));
      for (int64_t i = 0; i < n; ++i) p[i] = dist(rng);
      inputs.push_back(std::move(t));
    }
    std::vector<double> us;
    std::vector<Tensor> outputs;
    for (int i = 0; i < 20; ++i) (void)(*inst)->Execute(inputs, &outputs);  // warm-up
    auto start = std::chrono::steady_clock::now();
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
           seconds) {
      auto t0 = std::chrono::steady_clock::now();
      Status s = (*inst)->Execute(inputs, &outputs);
      auto t1 = std::chrono::steady_clock::now();
      if (!s.ok()) return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 1;
      us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    double total_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::sort(us.begin(), us.end());
    auto pct = [&](double p) { return us[std::min(us.size() - 1, size_t(p * us.size()))]; };
    std::printf(
        "{\"model\":\"%s\",\"batch\":%lld,\"calls\":%zu,\"p50_us\":%.1f,\"p99_us\":%.1f,"
        "\"rows_per_s\":%.0f}\n",
        dir.filename().c_str(), static_cast<long long>(batch), us.size(), pct(0.5), pct(0.99),
        static_cast<double>(us.size() * batch) / total_s);
  }
  return 0;
}
