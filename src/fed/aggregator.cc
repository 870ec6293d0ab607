#include "fed/aggregator.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <random>

#include "fed/privacy.h"
#include "fed/secure_agg.h"
#include "fed/update.h"
#include "fmt/format.h"

namespace dais::fed {
namespace {

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "none" : out;
}

}  // namespace

bool ValidClientId(const std::string& s) {
  if (s.empty() || s.size() > 128) return false;
  for (char ch : s) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.') {
      return false;
    }
  }
  return true;
}

Aggregator::Aggregator(FederationSpec spec, std::vector<float> global, int64_t next_round,
                       Clock now, Log log, int epsilon_rounds)
    : spec_(std::move(spec)),
      parameters_(global.size()),
      now_(std::move(now)),
      log_(std::move(log)),
      round_(next_round),
      noised_rounds_(epsilon_rounds),
      global_(std::make_shared<const std::vector<float>>(std::move(global))) {
  if (round_ > spec_.rounds) phase_ = Phase::kDone;
}

bool Aggregator::done() const {
  MutexLock l(&mu_);
  return phase_ == Phase::kDone;
}

int64_t Aggregator::round() const {
  MutexLock l(&mu_);
  return round_;
}

std::vector<std::string> Aggregator::Participants() const {
  if (!spec_.secure) return selected_;
  std::vector<std::string> out;
  for (const auto& [c, k] : keys_) out.push_back(c);
  return out;
}

void Aggregator::Refuse(const std::string& client, const Status& why) {
  for (const auto& r : refused_) {
    if (r.rfind(client + ": ", 0) == 0) return;  // counted and logged once per round
  }
  refused_.push_back(client + ": " + std::string(why.message()));
  log_(fmt::format("round {}: update of {} refused: {}", round_, client, why.message()));
}

Task Aggregator::Poll(const std::string& client, const std::string& public_key, int64_t key_round) {
  Task t;
  MutexLock l(&mu_);
  const int64_t now = now_();
  auto [it, fresh] = seen_.try_emplace(client, now);
  if (fresh || now - it->second > kAliveMs) {
    log_(fmt::format("trainer {} {}", client, fresh ? "joined" : "is back"));
  }
  it->second = now;
  if (seen_.size() > 4 * static_cast<size_t>(kMaxClients)) {  // forget the long gone
    for (auto it = seen_.begin(); it != seen_.end();) {
      it = now - it->second > kAliveMs ? seen_.erase(it) : std::next(it);
    }
  }
  t.round = round_;
  t.attempt = attempt_;
  t.secure = spec_.secure;
  // Trainers clip to the bound the aggregator enforces (with secure aggregation it can only check
  // the mean: an unclipped update would fail the whole round).
  t.clip_norm = spec_.privacy ? spec_.clip_norm : spec_.max_update_norm;
  t.unweighted = spec_.privacy;
  const bool selected = Contains(selected_, client);
  switch (phase_) {
    case Phase::kDone:
      t.kind = Task::Kind::kDone;
      return t;
    case Phase::kSelect:
      t.message = fmt::format("round {}: waiting for trainers", round_);
      return t;
    case Phase::kKeys:
      if (!selected) break;
      // A key is used once: a redrawn round's roster never holds a key of an earlier attempt.
      if (key_round == round_ && public_key.size() == 32 && keys_.count(client) == 0 &&
          used_keys_.insert(public_key).second) {
        keys_[client] = public_key;
      }
      if (keys_.count(client) == 0) {  // selected: a TRAIN task without a roster asks for a key
        t.kind = Task::Kind::kTrain;
        t.deadline_unix_ms = deadline_;
        return t;
      }
      t.message = fmt::format("round {}: {} of {} keys", round_, keys_.size(), selected_.size());
      return t;
    case Phase::kTrain: {
      const auto part = Participants();
      if (!Contains(part, client) || updates_.count(client) > 0) break;
      t.kind = Task::Kind::kTrain;
      t.weights = global_;
      t.deadline_unix_ms = deadline_;
      if (spec_.secure) t.roster = keys_;
      sent_weights_.insert(client);
      return t;
    }
    case Phase::kReveal:
      if (updates_.count(client) == 0 || reveals_.count(client) > 0) break;
      t.kind = Task::Kind::kReveal;
      t.dropped = dropped_;
      t.roster = keys_;
      return t;
  }
  t.message = fmt::format("round {}: not selected, or done for this round", round_);
  return t;
}

StatusOr<int> Aggregator::Submit(Submission s) {
  MutexLock l(&mu_);
  if (s.round < round_) return FailedPrecondition(fmt::format("round {} is over (late)", s.round));
  if (s.round > round_) {
    return FailedPrecondition(
        fmt::format("round {} has not started (round {} has)", s.round, round_));
  }
  if (phase_ != Phase::kTrain) {
    return FailedPrecondition(phase_ == Phase::kKeys
                                  ? fmt::format("round {}'s roster is not fixed yet", s.round)
                                  : fmt::format("round {} is closed to updates (late)", s.round));
  }
  if (!Contains(Participants(), s.client)) {
    return FailedPrecondition(fmt::format("{} is not a trainer of round {}", s.client, round_));
  }
  if (updates_.count(s.client) > 0) {
    return AlreadyExists(fmt::format("{} already sent its update for round {}", s.client, round_));
  }
  if (spec_.secure && s.attempt != attempt_) {
    return FailedPrecondition(fmt::format("round {} attempt {} is over (attempt {} is open)",
                                          s.round, s.attempt, attempt_));
  }
  Status ok = OkStatus();
  if (spec_.secure) {
    if (s.masked.size() != parameters_ + 1) {
      ok = InvalidArgument(fmt::format("client {}: masked update of {} values, expected {}",
                                       s.client, s.masked.size(), parameters_ + 1));
    }
  } else {
    ClientUpdate u{s.client, s.samples, std::move(s.delta)};
    ok = CheckUpdate(u, parameters_, spec_.max_update_norm);
    if (ok.ok() && u.samples > kMaxSamples) {
      ok = InvalidArgument(
          fmt::format("client {}: samples {} above {}", s.client, u.samples, kMaxSamples));
    }
    s.delta = std::move(u.delta);
  }
  if (!ok.ok()) {
    Refuse(s.client, ok);
    return ok;
  }
  bytes_in_ += s.wire_bytes;
  if (spec_.secure) {
    if (masked_sum_.empty()) masked_sum_.assign(parameters_ + 1, 0);
    AddInto(&masked_sum_, s.masked);
    s.masked.clear();
    s.masked.shrink_to_fit();
  }
  updates_[s.client] = std::move(s);
  return static_cast<int>(updates_.size());
}

Status Aggregator::Reveal(const std::string& client, int64_t round, int attempt,
                          const std::map<std::string, std::string>& seeds) {
  MutexLock l(&mu_);
  if (phase_ != Phase::kReveal || round != round_ || attempt != attempt_) {
    return FailedPrecondition(fmt::format("round {} asks for no seeds", round));
  }
  if (updates_.count(client) == 0) {
    return FailedPrecondition(fmt::format("{} is not a survivor of round {}", client, round));
  }
  for (const auto& d : dropped_) {
    auto it = seeds.find(d);
    if (it == seeds.end() || it->second.size() != 32) {
      return InvalidArgument(fmt::format("seeds: the 32-byte seed with {} is needed", d));
    }
  }
  if (seeds.size() != dropped_.size()) {
    return InvalidArgument("seeds: only the seeds with the dropped clients are asked for");
  }
  reveals_[client] = seeds;
  return OkStatus();
}

void Aggregator::Select(int64_t now) {
  std::vector<std::string> alive;
  for (const auto& [c, t] : seen_) {
    if (now - t <= kAliveMs) alive.push_back(c);
  }
  const auto want = static_cast<size_t>(spec_.clients_per_round);
  if (alive.size() < static_cast<size_t>(spec_.min_clients)) {
    quorum_since_ = 0;
    return;
  }
  if (quorum_since_ == 0) quorum_since_ = now;
  const int64_t gather = spec_.wait_for_trainers_ms > 0
                             ? spec_.wait_for_trainers_ms
                             : std::min<int64_t>(2000, spec_.round_deadline_ms / 4);
  if (alive.size() < want && now - quorum_since_ < gather) return;
  std::mt19937_64 rng(static_cast<uint64_t>(round_) * 1000003u + static_cast<uint64_t>(attempt_));
  std::shuffle(alive.begin(), alive.end(), rng);
  alive.resize(std::min(alive.size(), want));
  std::sort(alive.begin(), alive.end());
  selected_ = std::move(alive);
  round_start_ = now;
  deadline_ = now + spec_.round_deadline_ms;
  phase_deadline_ = now + spec_.round_deadline_ms / 3;
  phase_ = spec_.secure ? Phase::kKeys : Phase::kTrain;
  log_(fmt::format("round {}{}: {} trainers selected ({}), deadline {:.1f} s", round_,
                   attempt_ > 1 ? fmt::format(" (attempt {})", attempt_) : "", selected_.size(),
                   Join(selected_), spec_.round_deadline_ms / 1000.0));
}

void Aggregator::Fail(const std::string& why) {
  log_(fmt::format("round {} (attempt {}) failed: {}; drawing the round again", round_, attempt_,
                   why));
  ++attempt_;
  ClearRound();
}

void Aggregator::ClearRound() {
  phase_ = Phase::kSelect;
  quorum_since_ = 0;
  selected_.clear();
  keys_.clear();
  updates_.clear();
  masked_sum_.clear();
  dropped_.clear();
  reveals_.clear();
  refused_.clear();
  sent_weights_.clear();
  bytes_in_ = 0;
}

void Aggregator::CloseIntake(int64_t now) {
  dropped_.clear();
  for (const auto& c : Participants()) {
    if (updates_.count(c) == 0) dropped_.push_back(c);
  }
  if (spec_.secure && !dropped_.empty()) {
    phase_ = Phase::kReveal;
    phase_deadline_ = now + std::max<int64_t>(2000, spec_.round_deadline_ms / 3);
    log_(
        fmt::format("round {}: intake closed; {} dropped ({}): asking the {} survivors for their "
                    "seeds",
                    round_, dropped_.size(), Join(dropped_), updates_.size()));
  }
}

Status Aggregator::CheckUnmasked(const std::vector<float>& mean, int64_t weight, size_t n) const {
  const auto count = static_cast<int64_t>(n);
  if (spec_.privacy ? weight != count : (weight < count || weight > count * kMaxSamples)) {
    return InvalidArgument(
        fmt::format("the unmasked total weight {} is impossible for {} updates", weight, n));
  }
  double bound = spec_.privacy ? spec_.clip_norm : spec_.max_update_norm;
  const double norm = L2Norm(mean);
  if (!std::isfinite(norm)) return InvalidArgument("the unmasked mean is not finite");
  // The fixed point rounds each value by up to 2^-21: the mean's norm by up to sqrt(P) of that.
  const double slack = std::sqrt(static_cast<double>(mean.size())) / kFixedScale;
  if (bound > 0 && norm > bound * (1 + 1e-4) + slack) {
    return InvalidArgument(
        fmt::format("the unmasked mean's L2 norm {:.4g} is above the bound {}", norm, bound));
  }
  return OkStatus();
}

std::optional<RoundOutcome> Aggregator::Aggregate(int64_t now) {
  RoundOutcome o;
  o.round = round_;
  o.attempt = attempt_;
  o.selected = selected_;
  o.dropped = dropped_;
  o.refused = refused_;
  o.bytes_in = bytes_in_;
  o.bytes_out = sent_weights_.size() * parameters_ * sizeof(float);
  o.sent_to = static_cast<int>(sent_weights_.size());
  std::vector<float> mean;
  double loss = 0;
  for (const auto& [c, u] : updates_) {
    o.contributed.push_back(c);
    loss += u.train_loss;
  }
  o.mean_train_loss = updates_.empty() ? 0 : loss / static_cast<double>(updates_.size());
  if (spec_.secure) {
    for (const auto& [survivor, seeds] : reveals_) {
      for (const auto& [d, seed] : seeds) RemoveDangling(&masked_sum_, survivor, d, seed);
    }
    mean = DecodeMean(masked_sum_, &o.samples);
    o.mean_train_loss = std::numeric_limits<double>::quiet_NaN();
    // A masked update cannot be checked alone; their sum can: one that breaks it (a wrong
    // weight, a NaN, an update past the bound) fails the round instead of moving the model.
    if (Status bad = CheckUnmasked(mean, o.samples, updates_.size()); !bad.ok()) {
      Fail(std::string(bad.message()) + " (an update broke the rules; which one cannot be known)");
      return std::nullopt;
    }
  } else {
    std::vector<ClientUpdate> ups;
    for (auto& [c, u] : updates_) {
      ClientUpdate cu{c, spec_.privacy ? 1 : u.samples, std::move(u.delta)};
      if (spec_.privacy) ClipL2(&cu.delta, spec_.clip_norm);
      o.samples += cu.samples;
      ups.push_back(std::move(cu));
    }
    mean = FedAvg(ups);
  }
  if (spec_.privacy) {
    const double n = static_cast<double>(updates_.size());
    AddGaussianNoise(&mean, spec_.noise_multiplier * spec_.clip_norm / n);
    ++noised_rounds_;
    o.epsilon = GaussianEpsilon(spec_.noise_multiplier, noised_rounds_, spec_.delta);
  }
  o.update_norm = L2Norm(mean);
  std::vector<float> next = *global_;
  for (size_t i = 0; i < next.size() && i < mean.size(); ++i) next[i] += mean[i];
  global_ = std::make_shared<const std::vector<float>>(std::move(next));
  o.global = global_;
  o.duration_ms = now - round_start_;
  ++round_;
  attempt_ = 1;
  used_keys_.clear();
  ClearRound();
  if (round_ > spec_.rounds) phase_ = Phase::kDone;
  return o;
}

std::optional<RoundOutcome> Aggregator::Tick() {
  MutexLock l(&mu_);
  const int64_t now = now_();
  switch (phase_) {
    case Phase::kDone:
      return std::nullopt;
    case Phase::kSelect:
      Select(now);
      return std::nullopt;
    case Phase::kKeys:
      if (keys_.size() == selected_.size() ||
          (now >= phase_deadline_ && keys_.size() >= static_cast<size_t>(spec_.min_clients))) {
        phase_ = Phase::kTrain;
        log_(fmt::format("round {}: roster of {} fixed", round_, keys_.size()));
      } else if (now >= phase_deadline_) {
        Fail(fmt::format("{} of {} keys by a third of the deadline (quorum {})", keys_.size(),
                         selected_.size(), spec_.min_clients));
      }
      return std::nullopt;
    case Phase::kTrain: {
      const size_t expected = Participants().size();
      if (updates_.size() < expected && now < deadline_) return std::nullopt;
      if (updates_.size() < static_cast<size_t>(spec_.min_clients)) {
        Fail(fmt::format("{} of {} updates by the deadline (quorum {})", updates_.size(), expected,
                         spec_.min_clients));
        return std::nullopt;
      }
      CloseIntake(now);
      if (phase_ == Phase::kReveal) return std::nullopt;
      return Aggregate(now);
    }
    case Phase::kReveal:
      if (reveals_.size() == updates_.size()) return Aggregate(now);
      if (now >= phase_deadline_) {
        Fail(fmt::format("{} of {} survivors revealed their seeds", reveals_.size(),
                         updates_.size()));
      }
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace dais::fed
