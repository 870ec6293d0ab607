#include "fed/update.h"

#include <algorithm>
#include <cmath>

namespace dais::fed {

Status CheckUpdate(const ClientUpdate& u, size_t parameters, double max_norm) {
  const std::string who = "client " + u.client + ": ";
  if (u.samples <= 0) {
    return InvalidArgument(who + "samples must be positive, got " + std::to_string(u.samples));
  }
  if (u.delta.size() != parameters) {
    return InvalidArgument(who + "the update has " + std::to_string(u.delta.size()) +
                           " parameters, the model " + std::to_string(parameters));
  }
  for (size_t i = 0; i < u.delta.size(); ++i) {
    if (!std::isfinite(u.delta[i])) {
      return InvalidArgument(who + "parameter " + std::to_string(i) + " is " +
                             (std::isnan(u.delta[i]) ? "NaN" : "infinite"));
    }
  }
  if (max_norm > 0) {
    const double norm = L2Norm(u.delta);
    if (norm > max_norm) {
      return InvalidArgument(who + "the update's L2 norm " + std::to_string(norm) +
                             " is above the bound " + std::to_string(max_norm));
    }
  }
  return OkStatus();
}

std::vector<float> FedAvg(const std::vector<ClientUpdate>& updates) {
  if (updates.empty()) return {};
  std::vector<double> sum(updates.front().delta.size(), 0.0);
  double total = 0;
  for (const ClientUpdate& u : updates) {
    const double w = static_cast<double>(u.samples);
    total += w;
    for (size_t i = 0; i < sum.size() && i < u.delta.size(); ++i) sum[i] += w * u.delta[i];
  }
  std::vector<float> out(sum.size());
  for (size_t i = 0; i < sum.size(); ++i) out[i] = static_cast<float>(sum[i] / total);
  return out;
}

double L2Norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

double ClipL2(std::vector<float>* v, double max_norm) {
  const double norm = L2Norm(*v);
  if (max_norm <= 0 || norm <= max_norm) return 1;
  const double f = max_norm / norm;
  for (float& x : *v) x = static_cast<float>(x * f);
  return f;
}

Int8Update QuantizeInt8(const std::vector<float>& v) {
  Int8Update u;
  float max_abs = 0;
  for (float x : v) max_abs = std::max(max_abs, std::fabs(x));
  u.scale = max_abs > 0 ? max_abs / 127.0f : 0;
  u.q.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    u.q[i] = u.scale > 0
                 ? static_cast<int8_t>(std::lround(std::clamp(v[i] / u.scale, -127.0f, 127.0f)))
                 : 0;
  }
  return u;
}

std::vector<float> DequantizeInt8(const Int8Update& u) {
  std::vector<float> v(u.q.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = u.scale * u.q[i];
  return v;
}

}  // namespace dais::fed
