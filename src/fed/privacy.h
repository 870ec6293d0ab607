// Differential privacy of `dais fed` (docs/federated.md, "Privacy"): each client clips its update
// to an L2 norm C (update.h ClipL2) and the round's average gets Gaussian noise of standard
// deviation noise_multiplier x C / (the round's clients), the Gaussian mechanism on the sum with
// sensitivity C. What was spent is reported with the Rényi DP accountant of the Gaussian
// mechanism (Mironov 2017), composed over the rounds without amplification by sampling (every
// selected client takes part: a bound, not the tightest).
#pragma once

#include <cstdint>
#include <vector>

namespace dais::fed {

// Adds N(0, stddev^2) to every value (a seeded generator: tests and the noise are reproducible
// per round when `seed` is).
void AddGaussianNoise(std::vector<float>* v, double stddev, uint64_t seed);

// ε after `rounds` rounds of the Gaussian mechanism with this noise multiplier, at `delta`.
// Infinity for a multiplier of 0.
double GaussianEpsilon(double noise_multiplier, int rounds, double delta);

}  // namespace dais::fed
