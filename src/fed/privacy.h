// Differential privacy of `dais fed` (docs/federated.md, "Privacy"): each client clips its update
// to an L2 norm C (update.h ClipL2), the round's mean is unweighted (every client counts 1: a
// weight by samples would let one client move the mean by more than C / n), and it gets Gaussian
// noise of standard deviation noise_multiplier x C / (the round's clients): the Gaussian
// mechanism on the sum, sensitivity C. What was spent is reported with the Rényi DP accountant of
// the Gaussian mechanism (Mironov 2017), composed over the rounds without amplification by sampling
// (every selected client takes part: a bound, not the tightest).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dais::fed {

// Adds N(0, stddev^2) to every value, from a ChaCha20 stream keyed by 32 bytes of OpenSSL's
// RAND_bytes (a noise that can be predicted can be subtracted), or by `seed` when given (tests).
void AddGaussianNoise(std::vector<float>* v, double stddev, const std::string& seed = "");

// ε after `rounds` rounds of the Gaussian mechanism with this noise multiplier, at `delta`.
// Infinity for a multiplier of 0.
double GaussianEpsilon(double noise_multiplier, int rounds, double delta);

}  // namespace dais::fed
