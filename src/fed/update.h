// What an edge trainer of `dais fed` sends for a round (docs/federated.md): the change it made to
// the global parameters (flattened, in the model's parameter order) and how many samples it
// trained on. The aggregator checks each update before it counts (a malformed one is refused,
// naming the client and what is wrong, and changes nothing) and averages them weighted by the
// samples (FedAvg; FedProx differs only on the clients, by its proximal term).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dais/status.h"

namespace dais::fed {

struct ClientUpdate {
  std::string client;
  int64_t samples = 0;
  std::vector<float> delta;  // new local parameters minus the round's global ones
};

// InvalidArgument naming the client: a length other than `parameters`, a NaN or infinite value
// (its index), no samples, an L2 norm above `max_norm` (> 0; 0: no bound) when not clipped.
Status CheckUpdate(const ClientUpdate& u, size_t parameters, double max_norm = 0);

// The samples-weighted mean of the deltas (all checked, at least one, same length).
std::vector<float> FedAvg(const std::vector<ClientUpdate>& updates);

double L2Norm(const std::vector<float>& v);
// Scales `v` down to an L2 norm of at most `max_norm`; the factor applied (1: unchanged).
double ClipL2(std::vector<float>* v, double max_norm);

// 8-bit compression of an update: one scale per update, values rounded to -127..127 of it.
struct Int8Update {
  float scale = 0;
  std::vector<int8_t> q;
};
Int8Update QuantizeInt8(const std::vector<float>& v);
std::vector<float> DequantizeInt8(const Int8Update& u);

}  // namespace dais::fed
