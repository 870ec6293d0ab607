// The rounds of `dais fed serve` (docs/federated.md, "Rounds"), without a transport: the gRPC
// service (cmd/fed_serve.cc) hands it each trainer's poll, update and revealed seeds, and calls
// Tick() to move the round on. A round:
//   select  — once `clients_per_round` trainers polled within the last 15 s (or at least
//             `min_clients` did, for a gathering time), up to clients_per_round of them are
//             drawn at random (seeded by the round and attempt);
//   keys    — secure aggregation only: the selected hand in an X25519 key each; the roster is
//             those that did by a third of the deadline (at least the quorum);
//   train   — the selected (the roster) train and submit until all did or the deadline; each
//             update is checked (length, NaN / inf, samples, norm) and a bad one refused, named;
//   reveal  — secure aggregation with drop-outs: the intake is closed, then every survivor
//             reveals its pairwise seeds with the dropped, which takes their masks out;
//   then FedAvg (weighted by samples; unweighted with differential privacy, plus the noise), the
//   new global parameters, and the next round. Fewer updates than `min_clients` by the
//   deadline (or a survivor that does not reveal): the round is drawn again (attempt + 1).
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "dais/status.h"
#include "fed/federation_spec.h"

namespace dais::fed {

// A trainer's id: 1 to 128 letters, digits, '-', '_', '.'.
bool ValidClientId(const std::string& s);

struct Task {
  enum class Kind { kWait, kTrain, kReveal, kDone };
  Kind kind = Kind::kWait;
  int64_t round = 0;
  int attempt = 1;  // a redrawn round's attempt: part of the masks' salt
  std::shared_ptr<const std::vector<float>> weights;  // kTrain
  int64_t deadline_unix_ms = 0;
  bool secure = false;
  std::map<std::string, std::string> roster;  // secure kTrain: empty until the roster is fixed
  std::vector<std::string> dropped;           // kReveal
  double clip_norm = 0;
  bool unweighted = false;
  std::string message;  // kWait: why
};

struct Submission {
  std::string client;
  int64_t round = 0;
  int attempt = 0;               // secure: must be the round's current attempt
  int64_t samples = 0;           // plain
  std::vector<float> delta;      // plain (8-bit updates are decoded before)
  std::vector<uint64_t> masked;  // secure
  double train_loss = 0;
  uint64_t wire_bytes = 0;  // what the update took on the wire
};

struct RoundOutcome {
  int64_t round = 0;
  int attempt = 1;
  std::vector<std::string> selected, contributed, dropped;
  std::vector<std::string> refused;  // "client: why"
  int64_t samples = 0;               // the weights summed (unweighted: the contributors)
  double update_norm = 0;            // L2 norm of the applied mean delta
  double mean_train_loss = 0;        // plain updates only (NaN with secure aggregation)
  double epsilon = 0;                // spent so far (differential privacy; 0: off)
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;  // the weights sent to the trainers ...
  int sent_to = 0;         // ... this many of them
  int64_t duration_ms = 0;
  std::shared_ptr<const std::vector<float>> global;  // after this round
};

class Aggregator {
 public:
  using Clock = std::function<int64_t()>;  // Unix milliseconds
  using Log = std::function<void(const std::string&)>;

  // Starts at `next_round` (1 for a new federation; the last completed one + 1 on resume) from
  // `global`. `epsilon_rounds`: rounds already noised (resumed DP accounting).
  Aggregator(FederationSpec spec, std::vector<float> global, int64_t next_round, Clock now, Log log,
             int epsilon_rounds = 0);

  Task Poll(const std::string& client, const std::string& public_key, int64_t key_round);
  // The updates received for the round so far; InvalidArgument (a bad update: refused, named),
  // FailedPrecondition (not selected, late, another round), AlreadyExists (sent twice).
  StatusOr<int> Submit(Submission s);
  Status Reveal(const std::string& client, int64_t round, int attempt,
                const std::map<std::string, std::string>& seeds);
  // Moves the round on; the outcome of a round it completed.
  std::optional<RoundOutcome> Tick();

  bool done() const;
  int64_t round() const;
  size_t parameters() const { return parameters_; }
  static constexpr int64_t kAliveMs = 15000;
  static constexpr int64_t kMaxSamples = int64_t{1} << 31;

 private:
  enum class Phase { kSelect, kKeys, kTrain, kReveal, kDone };
  void Select(int64_t now) DAIS_REQUIRES(mu_);
  void Fail(const std::string& why) DAIS_REQUIRES(mu_);
  void ClearRound() DAIS_REQUIRES(mu_);
  void CloseIntake(int64_t now) DAIS_REQUIRES(mu_);
  std::optional<RoundOutcome> Aggregate(int64_t now) DAIS_REQUIRES(mu_);
  std::vector<std::string> Participants() const DAIS_REQUIRES(mu_);
  void Refuse(const std::string& client, const Status& why) DAIS_REQUIRES(mu_);
  // Secure aggregation: the unmasked sum is a mean of `n` updates as the rules allow (the total
  // weight, finite values, the norm bound); what one update held cannot be checked.
  Status CheckUnmasked(const std::vector<float>& mean, int64_t weight, size_t n) const
      DAIS_REQUIRES(mu_);

  const FederationSpec spec_;
  const size_t parameters_;
  const Clock now_;
  const Log log_;
  mutable Mutex mu_;
  Phase phase_ DAIS_GUARDED_BY(mu_) = Phase::kSelect;
  int64_t round_ DAIS_GUARDED_BY(mu_);
  int attempt_ DAIS_GUARDED_BY(mu_) = 1;
  int noised_rounds_ DAIS_GUARDED_BY(mu_);
  std::shared_ptr<const std::vector<float>> global_ DAIS_GUARDED_BY(mu_);
  std::map<std::string, int64_t> seen_ DAIS_GUARDED_BY(mu_);  // client -> last poll
  int64_t quorum_since_ DAIS_GUARDED_BY(mu_) = 0;
  // The round in progress.
  int64_t round_start_ DAIS_GUARDED_BY(mu_) = 0;
  int64_t phase_deadline_ DAIS_GUARDED_BY(mu_) = 0;
  int64_t deadline_ DAIS_GUARDED_BY(mu_) = 0;
  std::vector<std::string> selected_ DAIS_GUARDED_BY(mu_);
  std::map<std::string, std::string> keys_ DAIS_GUARDED_BY(mu_);  // the roster once fixed
  std::set<std::string> used_keys_ DAIS_GUARDED_BY(mu_);  // every key of the round's attempts
  std::map<std::string, Submission> updates_ DAIS_GUARDED_BY(mu_);  // plain: whole; secure: meta
  std::vector<uint64_t> masked_sum_ DAIS_GUARDED_BY(mu_);
  std::vector<std::string> dropped_ DAIS_GUARDED_BY(mu_);
  std::map<std::string, std::map<std::string, std::string>> reveals_ DAIS_GUARDED_BY(mu_);
  std::vector<std::string> refused_ DAIS_GUARDED_BY(mu_);
  std::set<std::string> sent_weights_ DAIS_GUARDED_BY(mu_);
  uint64_t bytes_in_ DAIS_GUARDED_BY(mu_) = 0;
};

}  // namespace dais::fed
