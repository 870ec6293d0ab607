// federation.yaml: what `dais fed serve` runs (docs/federated.md, "The federation's spec").
//
//   kind: federation
//   name: digits
//   model: digits                # the model's folder in the repository (a TorchScript model.pt)
//   repository: models           # relative paths: to the file's folder
//   start_version: 1             # the version round 1 starts from (default: the newest)
//   rounds: 30
//   clients_per_round: 10        # selected among the trainers that polled recently
//   min_clients: 7               # the quorum: fewer updates by the deadline and the round is
//                                # run again with a new selection
//   round_deadline: 30s
//   wait_for_trainers: 2s        # once the quorum polls, wait this long for clients_per_round
//   aggregation: fedavg          # or fedprox (proximal_mu: the trainers' proximal term)
//   proximal_mu: 0.01
//   local: {epochs: 1, learning_rate: 0.05, batch_size: 32}   # the trainers' SGD
//   max_update_norm: 0           # refuse an update whose L2 norm is above this (0: no bound)
//   secure_aggregation: true     # pairwise masks: the aggregator sees only the sum
//   privacy: {clip_norm: 1.0, noise_multiplier: 1.0, delta: 1e-5}   # Gaussian DP (optional)
//   holdout: data/holdout        # a dataset folder (dt=*/*.jsonl.gz rows {"x": [...], "y": c})
//                                # scored after every round
//   publish: final               # or every_round: a repository version per round
//   release: {...}               # as a training job's (cluster/training_job.h): canary or manual
#pragma once

#include <cstdint>
#include <string>

#include "dais/status.h"

namespace dais::fed {

struct FederationSpec {
  std::string name;
  std::string model;
  std::string repository;
  int64_t start_version = 0;  // 0: the newest
  int rounds = 10;
  int clients_per_round = 10;
  int min_clients = 2;
  int64_t round_deadline_ms = 60000;
  // Once the quorum polls, how long a round waits for clients_per_round trainers before it draws
  // from those there (0: min(2 s, round_deadline / 4)).
  int64_t wait_for_trainers_ms = 0;
  bool fedprox = false;
  double proximal_mu = 0;
  int local_epochs = 1;
  double learning_rate = 0.05;
  int batch_size = 32;
  double max_update_norm = 0;
  bool secure = false;
  bool privacy = false;
  double clip_norm = 0;
  double noise_multiplier = 0;
  double delta = 1e-5;
  std::string holdout;  // empty: no evaluation
  bool publish_every_round = false;
  std::string release_yaml;  // the release mapping as YAML ("" when absent)

  // The folder of the model's versions: <repository>/<model>.
  std::string ModelDir() const { return repository + "/" + model; }
};

// Where `dais ctl apply` keeps a federation (its spec as YAML, paths made absolute), read by
// `dais fed serve --etcd E --federation NAME`.
inline constexpr const char* kFederationsPrefix = "/dais/federations/";

// Parses federation.yaml (`path` for messages and relative paths). InvalidArgument
// "<file>:<line>: <field>: <what>" naming the field; unknown fields are refused. With
// `check_files`, NotFound when the model's folder or the holdout folder is missing (`dais ctl
// apply` does not check them: they are the aggregator's paths, not the applier's).
StatusOr<FederationSpec> ParseFederationSpec(const std::string& yaml, const std::string& path,
                                             bool check_files = true);
StatusOr<FederationSpec> LoadFederationSpec(const std::string& path);
// The spec as federation.yaml (paths absolute): ParseFederationSpec reads it back the same.
std::string FederationSpecToYaml(const FederationSpec& spec);

}  // namespace dais::fed
