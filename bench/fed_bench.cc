// Federated averaging against centralized training, in one process (docs/benchmarks.md,
// "Federated learning"): what src/fed's arithmetic costs and gives, before the roles exist.
//
// Data: seeded synthetic classification shaped like scikit-learn's digits (10 classes, 64
// features: Gaussian clusters), split non-IID over 10 clients (80 % of each client's samples
// from two classes of its own). Model: an MLP 64-32-10 (2,410 parameters), SGD on softmax
// cross-entropy, written out here (no framework: the bench measures the aggregation, not a
// trainer). Centralized: one epoch over all the training data per round. Federated: every
// client trains one epoch from the round's global model and sends its change; variants:
//   fedavg        plain FedAvg, every client every round
//   secure+drop   secure aggregation (src/fed/secure_agg.h); in every other round 30 % of the
//                 clients drop after the roster, recovered from the survivors' seeds
//   int8          FedAvg of 8-bit compressed updates
//   secure+dp     secure aggregation, updates clipped to L2 norm C, Gaussian noise on the mean
// Prints accuracy per round, bytes per client per round, the aggregation's time; --svg writes a
// plot of accuracy per round.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "fed/privacy.h"
#include "fed/secure_agg.h"
#include "fed/update.h"

namespace {

using dais::fed::ClientUpdate;

constexpr int kD = 64, kH = 32, kC = 10;
constexpr size_t kParams = kH * kD + kH + kC * kH + kC;

struct Data {
  std::vector<float> x;  // rows x kD
  std::vector<int> y;
  size_t rows() const { return y.size(); }
};

Data Make(size_t n, const std::vector<float>& means, std::mt19937_64& rng) {
  Data d;
  std::normal_distribution<float> noise(0, 1);
  std::uniform_int_distribution<int> cls(0, kC - 1);
  for (size_t r = 0; r < n; ++r) {
    const int c = cls(rng);
    d.y.push_back(c);
    for (int i = 0; i < kD; ++i) d.x.push_back(means[c * kD + i] + noise(rng));
  }
  return d;
}

std::vector<float> Init(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> w1(0, std::sqrt(2.0f / kD)), w2(0, std::sqrt(2.0f / kH));
  std::vector<float> p(kParams, 0.0f);
  for (int i = 0; i < kH * kD; ++i) p[i] = w1(rng);
  for (int i = 0; i < kC * kH; ++i) p[kH * kD + kH + i] = w2(rng);
  return p;
}

// Logits of one row; `h` gets the hidden layer.
void Forward(const std::vector<float>& p, const float* x, float* h, float* z) {
  const float* w1 = p.data();
  const float* b1 = w1 + kH * kD;
  const float* w2 = b1 + kH;
  const float* b2 = w2 + kC * kH;
  for (int j = 0; j < kH; ++j) {
    float s = b1[j];
    for (int i = 0; i < kD; ++i) s += w1[j * kD + i] * x[i];
    h[j] = std::max(0.0f, s);
  }
  for (int c = 0; c < kC; ++c) {
    float s = b2[c];
    for (int j = 0; j < kH; ++j) s += w2[c * kH + j] * h[j];
    z[c] = s;
  }
}

// One epoch of minibatch SGD over `rows` of `d`.
void Epoch(std::vector<float>* p, const Data& d, std::vector<size_t> rows, float lr,
           std::mt19937_64& rng) {
  constexpr size_t kBatch = 16;
  std::shuffle(rows.begin(), rows.end(), rng);
  std::vector<float> g(kParams);
  float h[kH], z[kC];
  for (size_t start = 0; start < rows.size(); start += kBatch) {
    std::fill(g.begin(), g.end(), 0.0f);
    const size_t end = std::min(rows.size(), start + kBatch);
    float* gw1 = g.data();
    float* gb1 = gw1 + kH * kD;
    float* gw2 = gb1 + kH;
    float* gb2 = gw2 + kC * kH;
    const float* w2 = p->data() + kH * kD + kH;
    for (size_t k = start; k < end; ++k) {
      const float* x = &d.x[rows[k] * kD];
      Forward(*p, x, h, z);
      const float m = *std::max_element(z, z + kC);
      float sum = 0;
      for (float& v : z) sum += (v = std::exp(v - m));
      float dz[kC];
      for (int c = 0; c < kC; ++c) dz[c] = z[c] / sum - (c == d.y[rows[k]] ? 1.0f : 0.0f);
      for (int c = 0; c < kC; ++c) {
        gb2[c] += dz[c];
        for (int j = 0; j < kH; ++j) gw2[c * kH + j] += dz[c] * h[j];
      }
      for (int j = 0; j < kH; ++j) {
        if (h[j] <= 0) continue;
        float dh = 0;
        for (int c = 0; c < kC; ++c) dh += w2[c * kH + j] * dz[c];
        gb1[j] += dh;
        for (int i = 0; i < kD; ++i) gw1[j * kD + i] += dh * x[i];
      }
    }
    const float step = lr / static_cast<float>(end - start);
    for (size_t i = 0; i < kParams; ++i) (*p)[i] -= step * g[i];
  }
}

double Accuracy(const std::vector<float>& p, const Data& d) {
  size_t right = 0;
  float h[kH], z[kC];
  for (size_t r = 0; r < d.rows(); ++r) {
    Forward(p, &d.x[r * kD], h, z);
    right += static_cast<int>(std::max_element(z, z + kC) - z) == d.y[r];
  }
  return static_cast<double>(right) / static_cast<double>(d.rows());
}

struct Variant {
  std::string name;
  bool secure = false, drop = false, int8 = false, dp = false;
  std::vector<double> accuracy;  // per round
  double aggregate_s = 0;        // the aggregation's time over all rounds (clients' masking too)
  double upload_bytes = 0;       // per client per round
  double epsilon = 0;
};

int Arg(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  }
  return fallback;
}

std::string StrArg(int argc, char** argv, const char* name) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  }
  return "";
}

// One round's aggregation of the clients' updates: the mean change; `dropped` clients sent
// nothing after the roster.
std::vector<float> Aggregate(Variant& v, std::vector<ClientUpdate>& updates,
                             const std::vector<bool>& dropped, int round, double clip,
                             double noise) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  std::vector<float> mean;
  if (v.int8) {
    for (ClientUpdate& u : updates)
      u.delta = dais::fed::DequantizeInt8(dais::fed::QuantizeInt8(u.delta));
  }
  if (v.dp) {  // clipped, and unweighted (privacy.h): every client counts once
    for (ClientUpdate& u : updates) {
      dais::fed::ClipL2(&u.delta, clip);
      u.samples = 1;
    }
  }
  if (!v.secure) {
    mean = dais::fed::FedAvg(updates);
  } else {
    const std::string id = "bench/round-" + std::to_string(round);
    std::map<std::string, std::string> roster;
    std::vector<dais::fed::KeyPair> keys;
    for (const ClientUpdate& u : updates) {
      auto k = dais::fed::KeyPair::Generate();
      keys.push_back(std::move(*k));
      roster[u.client] = keys.back().public_key();
    }
    std::vector<uint64_t> sum;
    for (size_t i = 0; i < updates.size(); ++i) {
      if (dropped[i]) continue;
      auto m = dais::fed::Mask(dais::fed::Encode(updates[i].delta, updates[i].samples),
                               updates[i].client, keys[i], roster, id);
      dais::fed::AddInto(&sum, *m);
    }
    for (size_t d = 0; d < updates.size(); ++d) {
      if (!dropped[d]) continue;
      for (size_t i = 0; i < updates.size(); ++i) {
        if (dropped[i]) continue;
        dais::fed::RemoveDangling(&sum, updates[i].client, updates[d].client,
                                  *keys[i].PairSeed(roster[updates[d].client], id));
      }
    }
    int64_t total = 0;
    mean = dais::fed::DecodeMean(sum, &total);
  }
  if (v.dp) {
    size_t survivors = 0;
    for (bool d : dropped) survivors += !d;
    dais::fed::AddGaussianNoise(&mean, noise * clip / static_cast<double>(survivors),
                                "bench round " + std::to_string(round));
  }
  v.aggregate_s += std::chrono::duration<double>(Clock::now() - t0).count();
  return mean;
}

void WriteSvg(const std::string& path, const std::vector<double>& central,
              const std::vector<Variant>& variants) {
  const double w = 640, h = 360, left = 50, bottom = 40, top = 20, right = 150;
  const size_t rounds = central.size();
  auto X = [&](size_t r) {
    return left + (w - left - right) * r / std::max<size_t>(1, rounds - 1);
  };
  auto Y = [&](double a) { return top + (h - top - bottom) * (1 - a); };
  std::ofstream f(path);
  f << "<svg xmlns='http://www.w3.org/2000/svg' width='" << w << "' height='" << h
    << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' "
       "fill='white'/>\n";
  for (int t = 0; t <= 10; t += 2) {
    f << "<line x1='" << left << "' x2='" << w - right << "' y1='" << Y(t / 10.0) << "' y2='"
      << Y(t / 10.0) << "' stroke='#ddd'/><text x='8' y='" << Y(t / 10.0) + 4 << "'>" << t * 10
      << "%</text>\n";
  }
  f << "<text x='" << left << "' y='" << h - 10 << "'>round (1 to " << rounds
    << "); accuracy on the held-out set</text>\n";
  const char* colors[] = {"black", "#1f77b4", "#d62728", "#2ca02c", "#9467bd"};
  auto line = [&](const std::vector<double>& a, const std::string& name, int k) {
    f << "<polyline fill='none' stroke='" << colors[k % 5] << "' stroke-width='2' points='";
    for (size_t r = 0; r < a.size(); ++r) f << X(r) << "," << Y(a[r]) << " ";
    f << "'/>\n<text x='" << w - right + 8 << "' y='" << top + 16 * (k + 1) << "' fill='"
      << colors[k % 5] << "'>" << name << "</text>\n";
  };
  line(central, "centralized", 0);
  for (size_t k = 0; k < variants.size(); ++k) line(variants[k].accuracy, variants[k].name, k + 1);
  f << "</svg>\n";
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = Arg(argc, argv, "--rounds", 30);
  const int clients = 10;
  // DP: updates clipped to L2 norm --clip-milli / 1000, noise multiplier --noise-milli / 1000.
  const double clip = Arg(argc, argv, "--clip-milli", 2000) / 1000.0;
  const double noise = Arg(argc, argv, "--noise-milli", 500) / 1000.0;
  const double delta = 1e-5;
  const float lr = 0.05f;
  std::mt19937_64 rng(38);
  std::normal_distribution<float> mean_dist(0, 0.35f);
  std::vector<float> means(kC * kD);
  for (float& m : means) m = mean_dist(rng);
  const Data train = Make(6000, means, rng), test = Make(2000, means, rng);
  // Non-IID: client k takes 80 % of its rows from classes k and k+1, the rest from any class.
  std::vector<std::vector<size_t>> own(clients);
  std::uniform_real_distribution<double> u01(0, 1);
  for (size_t r = 0; r < train.rows(); ++r) {
    const int c = train.y[r];
    const int k = u01(rng) < 0.8 ? (u01(rng) < 0.5 ? c : (c + kC - 1) % kC)
                                 : static_cast<int>(rng() % clients);
    own[k].push_back(r);
  }
  std::vector<size_t> all(train.rows());
  for (size_t r = 0; r < all.size(); ++r) all[r] = r;

  std::vector<double> central;
  {
    std::vector<float> p = Init(1);
    std::mt19937_64 r(2);
    for (int t = 0; t < rounds; ++t) {
      Epoch(&p, train, all, lr, r);
      central.push_back(Accuracy(p, test));
    }
  }
  auto variant = [](const char* name, bool secure, bool drop, bool int8, bool dp) {
    Variant v;
    v.name = name;
    v.secure = secure;
    v.drop = drop;
    v.int8 = int8;
    v.dp = dp;
    return v;
  };
  std::vector<Variant> variants = {variant("fedavg", false, false, false, false),
                                   variant("secure+drop", true, true, false, false),
                                   variant("int8", false, false, true, false),
                                   variant("secure+dp", true, false, false, true)};
  for (Variant& v : variants) {
    std::vector<float> global = Init(1);
    std::mt19937_64 r(2), drops(3);
    for (int t = 0; t < rounds; ++t) {
      std::vector<ClientUpdate> updates;
      for (int k = 0; k < clients; ++k) {
        std::vector<float> local = global;
        Epoch(&local, train, own[k], lr, r);
        ClientUpdate up{"edge-" + std::to_string(k), static_cast<int64_t>(own[k].size()), {}};
        up.delta.resize(kParams);
        for (size_t i = 0; i < kParams; ++i) up.delta[i] = local[i] - global[i];
        updates.push_back(std::move(up));
      }
      std::vector<bool> dropped(clients, false);
      if (v.drop && t % 2 == 1) {  // 30 % of the clients gone after the roster
        std::vector<int> ks(clients);
        for (int k = 0; k < clients; ++k) ks[k] = k;
        std::shuffle(ks.begin(), ks.end(), drops);
        for (int k = 0; k < 3; ++k) dropped[ks[k]] = true;
      }
      if (!v.secure) {  // (the plain path: a dropped client's update simply did not come)
        std::vector<ClientUpdate> kept;
        for (int k = 0; k < clients; ++k) {
          if (!dropped[k]) kept.push_back(updates[k]);
        }
        updates = std::move(kept);
        dropped.assign(updates.size(), false);
      }
      const std::vector<float> step = Aggregate(v, updates, dropped, t, clip, noise);
      for (size_t i = 0; i < kParams; ++i) global[i] += step[i];
      v.accuracy.push_back(Accuracy(global, test));
    }
    v.upload_bytes = v.secure ? 8.0 * (kParams + 1) + 32 : v.int8 ? kParams + 4.0 : 4.0 * kParams;
    if (v.dp) v.epsilon = dais::fed::GaussianEpsilon(noise, rounds, delta);
  }

  std::printf(
      "federated vs centralized: %d rounds, %d clients (non-IID), MLP 64-32-10 (%zu "
      "parameters), %zu train / %zu test rows\n\n",
      rounds, clients, kParams, train.rows(), test.rows());
  std::printf("%-6s %11s", "round", "centralized");
  for (const Variant& v : variants) std::printf(" %12s", v.name.c_str());
  std::printf("\n");
  for (int t = 0; t < rounds; ++t) {
    if (t != 0 && (t + 1) % 5 != 0) continue;
    std::printf("%-6d %10.2f%%", t + 1, 100 * central[t]);
    for (const Variant& v : variants) std::printf(" %11.2f%%", 100 * v.accuracy[t]);
    std::printf("\n");
  }
  std::printf("\n%-12s %12s %14s %18s %10s\n", "variant", "final acc", "vs central",
              "upload B/client/round", "agg ms/round");
  for (const Variant& v : variants) {
    std::printf("%-12s %11.2f%% %+13.2f %18.0f %12.3f%s\n", v.name.c_str(), 100 * v.accuracy.back(),
                100 * (v.accuracy.back() - central.back()), v.upload_bytes,
                1000 * v.aggregate_s / rounds,
                v.dp ? ("  (epsilon " + std::to_string(v.epsilon) + " at delta 1e-5, clip " +
                        std::to_string(clip) + ", noise " + std::to_string(noise) + ")")
                           .c_str()
                     : "");
  }
  if (const std::string svg = StrArg(argc, argv, "--svg"); !svg.empty()) {
    WriteSvg(svg, central, variants);
    std::printf("\nplot: %s\n", svg.c_str());
  }
  return 0;
}
