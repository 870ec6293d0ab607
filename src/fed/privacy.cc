#include "fed/privacy.h"

#include <cmath>
#include <limits>
#include <random>

namespace dais::fed {

void AddGaussianNoise(std::vector<float>* v, double stddev, uint64_t seed) {
  if (stddev <= 0) return;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n(0.0, stddev);
  for (float& x : *v) x = static_cast<float>(x + n(rng));
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
