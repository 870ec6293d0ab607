// `dais fed join`: an edge trainer (cmd/fed.h, docs/federated.md).
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <optional>
#include <thread>
#include <utility>

#include "cmd/fed.h"
#include "cmd/grpc_credentials.h"
#include "common/logging.h"
#include "fed.grpc.pb.h"
#include "fed/aggregator.h"
#include "fed/secure_agg.h"
#include "fed/update.h"
#include "learn/join.h"
#include "learn/torch_fed.h"
#include "tls/context.h"

namespace dais::cmd {
namespace {

namespace pb = dais::fed::v1;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void SleepMs(int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

class Trainer {
 public:
  Trainer(const FedJoinOptions& o, learn::Dataset data, std::unique_ptr<pb::Federation::Stub> stub)
      : o_(o), data_(std::move(data)), stub_(std::move(stub)) {}

  int Run() {
    int64_t last_contact = NowMs();
    int64_t backoff = 200;
    bool unreachable = false;
    for (;;) {
      pb::PollRequest req;
      req.set_federation(o_.federation);
      req.set_client(o_.client);
      if (!pending_key_.empty()) {
        req.set_public_key(pending_key_);
        req.set_key_round(key_round_);
        pending_key_.clear();
      }
      pb::Task task;
      const grpc::Status s =
          Call([&](grpc::ClientContext* c) { return stub_->Poll(c, req, &task); });
      if (!s.ok()) {
        if (s.error_code() != grpc::StatusCode::UNAVAILABLE &&
            s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
          LOG_ERROR("dais fed join: {}: {}", o_.aggregator, s.error_message());
          return 1;
        }
        if (NowMs() - last_contact > o_.give_up_s * 1000) {
          LOG_ERROR("dais fed join: {} unreachable for {} s: giving up", o_.aggregator,
                    o_.give_up_s);
          return 1;
        }
        if (!unreachable) {
          LOG_WARNING("dais fed join: {} unreachable ({}): retrying", o_.aggregator,
                      s.error_message());
        }
        unreachable = true;
        SleepMs(backoff);
        backoff = std::min<int64_t>(backoff * 2, 2000);
        continue;
      }
      if (unreachable) LOG_INFO("dais fed join: {} reached again", o_.aggregator);
      unreachable = false;
      backoff = 200;
      last_contact = NowMs();
      switch (task.kind()) {
        case pb::Task::DONE:
          LOG_INFO("dais fed join: federation {} is done ({} updates sent)", o_.federation, sent_);
          return 0;
        case pb::Task::TRAIN:
          if (refused_ == std::make_pair(static_cast<int64_t>(task.round()),
                                         static_cast<int>(task.attempt()))) {
            SleepMs(std::max<uint32_t>(20, task.retry_after_ms()));  // refused: wait it out
            break;
          }
          if (Status t = Train(task); !t.ok()) {
            LOG_ERROR("dais fed join: {}", t.message());
            if (t.code() == StatusCode::kInvalidArgument) return 2;
            SleepMs(std::max<uint32_t>(20, task.retry_after_ms()));
          }
          break;
        case pb::Task::REVEAL:
          RevealSeeds(task);
          break;
        default:
          SleepMs(std::max<uint32_t>(20, task.retry_after_ms()));
      }
    }
  }

 private:
  grpc::Status Call(const std::function<grpc::Status(grpc::ClientContext*)>& fn) {
    grpc::ClientContext c;
    c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return fn(&c);
  }

  Status FetchModel(const std::string& sha) {
    if (!model_.empty() && sha == model_sha_) return OkStatus();
    pb::GetModelRequest req;
    req.set_federation(o_.federation);
    pb::ModelFile m;
    const grpc::Status s =
        Call([&](grpc::ClientContext* c) { return stub_->GetModel(c, req, &m); });
    if (!s.ok()) return Unavailable("GetModel: " + s.error_message());
    model_ = m.torchscript();
    model_sha_ = m.sha256();
    LOG_INFO("dais fed join: model fetched ({} bytes, {} parameters)", model_.size(),
             m.parameters());
    return OkStatus();
  }

  Status Train(const pb::Task& task) {
    const auto round = static_cast<int64_t>(task.round());
    if (task.secure() && task.roster().empty()) {
      // Asked for a key: a fresh pair each time (a redrawn round never reuses one).
      auto k = fed::KeyPair::Generate();
      if (!k.ok()) return k.status();
      keys_ = std::move(*k);
      pending_key_ = keys_->public_key();
      key_round_ = round;
      return OkStatus();
    }
    const std::pair<int64_t, int> here{round, static_cast<int>(task.attempt())};
    if (task.secure()) {  // a roster without our key (a restart mid-round): sit this attempt out
      auto mine = task.roster().find(o_.client);
      if (!keys_ || mine == task.roster().end() || mine->second != keys_->public_key()) {
        refused_ = here;
        return FailedPrecondition(fmt::format(
            "round {}: the roster holds another key of ours (restarted?): waiting", round));
      }
    }
    RETURN_IF_ERROR(FetchModel(task.model_sha256()));
    const std::vector<float> global(task.weights().begin(), task.weights().end());
    learn::LocalTraining lt;
    lt.epochs = static_cast<int>(task.local().epochs());
    lt.learning_rate = task.local().learning_rate();
    lt.batch_size = std::max<uint32_t>(1, task.local().batch_size());
    lt.proximal_mu = task.local().proximal_mu();
    lt.seed = std::hash<std::string>()(o_.client) ^ static_cast<uint64_t>(round);
    const auto start = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(learn::LocalResult r, learn::TrainLocal(model_, global, data_, lt));
    if (!std::isfinite(fed::L2Norm(r.delta))) {  // diverged: nothing worth sending
      refused_ = here;
      LOG_ERROR(
          "dais fed join: round {}: local training diverged (a NaN or infinite "
          "parameter): no update sent; lower local.learning_rate",
          round);
      return OkStatus();
    }
    if (task.clip_norm() > 0) fed::ClipL2(&r.delta, task.clip_norm());
    if (o_.delay_ms > 0) SleepMs(o_.delay_ms);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (NowMs() > task.deadline_unix_ms()) {
      LOG_WARNING("dais fed join: round {}: trained in {:.1f} s, past the deadline: not sent",
                  round, secs);
      return OkStatus();
    }
    pb::UpdateRequest up;
    up.set_federation(o_.federation);
    up.set_client(o_.client);
    up.set_round(task.round());
    up.set_attempt(task.attempt());
    const int64_t weight = task.unweighted() ? 1 : static_cast<int64_t>(data_.rows());
    if (task.secure()) {  // the weight inside the masks; the loss not told
      if (!keys_) return FailedPrecondition("round " + std::to_string(round) + ": no key");
      std::map<std::string, std::string> roster(task.roster().begin(), task.roster().end());
      auto masked = fed::Mask(fed::Encode(r.delta, weight), o_.client, *keys_, roster,
                              RoundId(round, static_cast<int>(task.attempt())));
      if (!masked.ok()) {  // a peer's key (the aggregator checks them): not this trainer's data
        refused_ = here;
        return FailedPrecondition("round " + std::to_string(round) +
                                  ": cannot mask: " + masked.status().message());
      }
      up.mutable_masked()->Add(masked->begin(), masked->end());
    } else if (o_.int8) {
      up.set_samples(weight);
      up.set_train_loss(r.loss);
      const fed::Int8Update q = fed::QuantizeInt8(r.delta);
      up.set_int8_scale(q.scale);
      up.set_int8_values(std::string(q.q.begin(), q.q.end()));
    } else {
      up.set_samples(weight);
      up.set_train_loss(r.loss);
      up.mutable_delta()->Add(r.delta.begin(), r.delta.end());
    }
    pb::SubmitResponse resp;
    const grpc::Status s =
        Call([&](grpc::ClientContext* c) { return stub_->Submit(c, up, &resp); });
    if (!s.ok()) {
      // A refusal is not sent again for this attempt (the same training would be refused
      // again); an unreachable aggregator is, once it is back.
      const auto code = s.error_code();
      if (code == grpc::StatusCode::INVALID_ARGUMENT ||
          code == grpc::StatusCode::FAILED_PRECONDITION ||
          code == grpc::StatusCode::ALREADY_EXISTS) {
        refused_ = here;
      }
      LOG_WARNING("dais fed join: round {}: update refused: {}", round, s.error_message());
      return OkStatus();
    }
    ++sent_;
    LOG_INFO("dais fed join: round {}: trained on {} rows in {:.1f} s (loss {:.4f}), {} bytes sent",
             round, data_.rows(), secs, r.loss, up.ByteSizeLong());
    return OkStatus();
  }

  // The masks' salt: the federation, the round and its attempt.
  std::string RoundId(int64_t round, int attempt) const {
    return fmt::format("{}/{}/{}", o_.federation, round, attempt);
  }

  void RevealSeeds(const pb::Task& task) {
    pb::RevealRequest req;
    req.set_federation(o_.federation);
    req.set_client(o_.client);
    req.set_round(task.round());
    req.set_attempt(task.attempt());
    for (const auto& d : task.dropped()) {
      auto it = task.roster().find(d);
      if (!keys_ || it == task.roster().end()) continue;
      auto seed = keys_->PairSeed(it->second, RoundId(static_cast<int64_t>(task.round()),
                                                      static_cast<int>(task.attempt())));
      if (seed.ok()) (*req.mutable_seeds())[d] = *seed;
    }
    pb::RevealResponse resp;
    const grpc::Status s =
        Call([&](grpc::ClientContext* c) { return stub_->Reveal(c, req, &resp); });
    LOG_INFO("dais fed join: round {}: seeds with {} dropped trainer(s) revealed{}", task.round(),
             task.dropped_size(), s.ok() ? "" : ": " + s.error_message());
    if (!s.ok()) SleepMs(std::max<uint32_t>(20, task.retry_after_ms()));
  }

  const FedJoinOptions& o_;
  const learn::Dataset data_;
  std::unique_ptr<pb::Federation::Stub> stub_;
  std::string model_, model_sha_;
  std::optional<fed::KeyPair> keys_;
  std::string pending_key_;
  int64_t key_round_ = 0;
  int64_t sent_ = 0;
  std::pair<int64_t, int> refused_{0, 0};  // the round and attempt whose update was refused
};

}  // namespace

int RunFedJoin(const FedJoinOptions& o) {
  if (!fed::ValidClientId(o.client)) {
    LOG_ERROR("dais fed join: --client: 1 to 128 letters, digits, '-', '_' or '.' are needed");
    return 2;
  }
  auto data = learn::LoadRows(o.data);
  if (!data.ok()) {
    LOG_ERROR("dais fed join: --data: {}", data.status().message());
    return 2;
  }
  auto creds = GrpcClientCredentials(o.tls);
  if (!creds.ok()) {
    LOG_ERROR("dais fed join: {}", creds.status().message());
    return 2;
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);  // the weights and the module: as large as the model
  args.SetMaxSendMessageSize(-1);
  if (!o.tls.server_name.empty()) args.SetSslTargetNameOverride(o.tls.server_name);
  auto channel = grpc::CreateCustomChannel(o.aggregator, *creds, args);
  LOG_INFO("dais fed join: {} joins federation {} at {} with {} rows of {} values", o.client,
           o.federation, o.aggregator, data->rows(), data->num_features);
  return Trainer(o, std::move(*data), pb::Federation::NewStub(channel)).Run();
}

}  // namespace dais::cmd
