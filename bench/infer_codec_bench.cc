// The KServe v2 JSON request codec per body: the simdjson path against the rapidjson path it
// replaced, measured in one run on the same bodies (docs/benchmarks.md, issue 18).
//
// The rapidjson reference is the codec with rapidjson reading every body (as before simdjson).
// Bodies: one FP32 row of
// `width` values as bench/benchlib.py request_bodies writes them (Python's json.dumps of
// ((i * 37) % 17) / 17.0), for widths 16, 256 and 4096.
//
// usage: infer_codec_bench [--iterations N] [--rounds R]   (prints a Markdown table)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "frontends/http/infer_codec.h"

namespace {

using dais::frontends::http::ParseInferRequest;
using Parser = dais::Status (*)(std::string, size_t, dais::runtime::InferenceRequest*, int);

// Python's repr of ((i * 37) % 17) / 17.0: the shortest text that reads back as that double.
std::string RowBody(int width) {
  std::string data;
  for (int i = 0; i < width; ++i) {
    char text[32];
    const double value = static_cast<double>((i * 37) % 17) / 17.0;
    for (int digits = 1; digits <= 17; ++digits) {  // shortest round-trip form, as Python prints
      std::snprintf(text, sizeof(text), "%.*g", digits, value);
      if (std::strtod(text, nullptr) == value) break;
    }
    std::string t = text;
    if (t.find_first_of(".e") == std::string::npos) t += ".0";
    data += (i ? ", " : "") + t;
  }
  return std::string(R"({"inputs": [{"name": "INPUT__0", "shape": [1, )") + std::to_string(width) +
         R"(], "datatype": "FP32", "data": [)" + data + "]}]}";
}

// Median over `rounds` of the mean ns per parse over `iterations` parses.
double NsPerParse(Parser parse, const std::string& body, int iterations, int rounds) {
  std::vector<double> means;
  for (int r = 0; r < rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) {
      dais::runtime::InferenceRequest request;
      if (!parse(body, 0, &request, 100).ok()) {
        std::fprintf(stderr, "parse failed\n");
        std::exit(1);
      }
    }
    const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
    means.push_back(took.count() / iterations);
  }
  std::sort(means.begin(), means.end());
  return means[means.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 20000, rounds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--iterations") == 0) iterations = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
  }
  std::printf(
      "| FP32 values | body bytes | rapidjson | simdjson (the codec now) | simdjson / rapidjson "
      "|\n");
  std::printf("|---:|---:|---:|---:|---:|\n");
  for (int width : {16, 256, 4096}) {
    const int n = std::max(1, iterations * 256 / width / 4);
    const std::string body = RowBody(width);
    const double rapid =
        NsPerParse(dais::frontends::http::ParseInferRequestWithRapidjson, body, n, rounds);
    const double simd = NsPerParse(ParseInferRequest, body, n, rounds);
    std::printf("| %d | %zu | %.2f us | %.2f us | %.2f |\n", width, body.size(), rapid / 1e3,
                simd / 1e3, simd / rapid);
  }
  return 0;
}
