// What `dais fed serve` keeps in --state-dir so that a killed aggregator resumes (cmd/fed.h,
// docs/federated.md "State, crashes and the published version"):
//   global-<round>.f32  the parameters after that round (written, fsynced and renamed first)
//   state.json          the last completed round naming that file, the start version and its
//                       SHA-256, the rounds' history, what was published and released (renamed
//                       last: a crash between the two leaves the previous state.json, whose
//                       round is then run again from its own parameters file)
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "dais/status.h"
#include "fed/federation_spec.h"

namespace dais::cmd {

struct FedState {
  std::string run;  // a random id of this run of the federation, in its versions' metrics.json
  int64_t start_version = 0;
  std::string model_sha256;  // of start_version's model.pt
  int64_t completed_round = 0;
  int noised_rounds = 0;
  int64_t published_version = 0;
  int64_t published_round = 0;
  int64_t released_version = 0;  // the canary started for it (or it failed: said in the log)
  std::string history;           // JSON objects, one per round, comma-separated
  std::string last_round;        // the last of them
};

Status SaveFedState(const std::filesystem::path& dir, const fed::FederationSpec& spec,
                    const FedState& s, const std::vector<float>& global);
// False when the folder holds no state. FailedPrecondition for the state of another federation
// or a parameters file that is not whole.
StatusOr<bool> LoadFedState(const std::filesystem::path& dir, const fed::FederationSpec& spec,
                            FedState* s, std::vector<float>* global);

// Publishes `model` with `global` as the model's next version (model.pt, metrics.json naming the
// federation, its run and the round), unless the newest version already is this run's `round`
// (a crash after publishing, before the state said so): its number either way.
StatusOr<int64_t> PublishFedRound(const fed::FederationSpec& spec, const FedState& state,
                                  const std::string& model, const std::vector<float>& global,
                                  int64_t round);
// A whole file's bytes; NotFound naming it when it cannot be read.
StatusOr<std::string> ReadWholeFile(const std::filesystem::path& path);

// A new run's id (16 hex digits from RAND_bytes).
std::string NewFedRunId();

}  // namespace dais::cmd
