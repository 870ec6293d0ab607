#include "fed/privacy.h"

#include <openssl/rand.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "fed/secure_agg.h"

namespace dais::fed {

void AddGaussianNoise(std::vector<float>* v, double stddev, const std::string& seed) {
  if (stddev <= 0 || v->empty()) return;
  std::string key = seed;
  if (key.empty()) {
    unsigned char random[32];
    if (RAND_bytes(random, sizeof(random)) != 1) std::abort();  // (no noise is no privacy)
    key.assign(reinterpret_cast<const char*>(random), sizeof(random));
  }
  // Box-Muller: two uniforms in (0, 1] from each pair of 64-bit words, two normals.
  const std::vector<uint64_t> words = MaskStream(key, v->size() + 1);
  auto uniform = [](uint64_t w) {
    return (static_cast<double>(w >> 11) + 1.0) / 9007199254740992.0;
  };
  constexpr double kTwoPi = 6.283185307179586;
  for (size_t i = 0; i < v->size(); i += 2) {
    const double r = std::sqrt(-2.0 * std::log(uniform(words[i]))) * stddev;
    const double theta = kTwoPi * uniform(words[i + 1]);
    (*v)[i] = static_cast<float>((*v)[i] + r * std::cos(theta));
    if (i + 1 < v->size()) (*v)[i + 1] = static_cast<float>((*v)[i + 1] + r * std::sin(theta));
  }
}

double GaussianEpsilon(double noise_multiplier, int rounds, double delta) {
  if (noise_multiplier <= 0 || rounds <= 0 || delta <= 0 || delta >= 1) {
    return std::numeric_limits<double>::infinity();
  }
  // RDP of order a: rounds * a / (2 sigma^2); to (eps, delta): rdp + log(1/delta) / (a - 1).
  double best = std::numeric_limits<double>::infinity();
  for (double a = 1.01; a <= 4096; a *= 1.02) {
    const double eps =
        rounds * a / (2 * noise_multiplier * noise_multiplier) + std::log(1 / delta) / (a - 1);
    best = std::min(best, eps);
  }
  return best;
}

}  // namespace dais::fed
