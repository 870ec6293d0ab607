// `dais fed serve`: the aggregator (cmd/fed.h, docs/federated.md).
#include <fmt/format.h>
#include <openssl/evp.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "cluster/training_job.h"
#include "cmd/canary_release.h"
#include "cmd/fed.h"
#include "cmd/fed_state.h"
#include "cmd/publish_version.h"
#include "common/json.h"
#include "common/logging.h"
#include "fed.pb.h"
#include "fed/aggregator.h"
#include "fed/secure_agg.h"
#include "fed/update.h"
#include "frontends/grpc/grpc_codec.h"
#include "frontends/grpc/h2_server.h"
#include "learn/torch_fed.h"

namespace dais::cmd {
namespace {

namespace fs = std::filesystem;
namespace pb = dais::fed::v1;
using frontends::grpc::ServerCall;
using frontends::grpc::ToGrpcStatus;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Sha256Hex(const std::string& bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha256(), nullptr);
  std::string out;
  for (unsigned int i = 0; i < n; ++i) out += fmt::format("{:02x}", md[i]);
  return out;
}

pb::Task ToProto(const fed::Task& t, const fed::FederationSpec& spec, const std::string& sha,
                 int retry_after_ms) {
  pb::Task out;
  out.set_kind(static_cast<pb::Task::Kind>(t.kind));
  out.set_round(static_cast<uint64_t>(t.round));
  out.set_attempt(static_cast<uint32_t>(t.attempt));
  out.set_retry_after_ms(static_cast<uint32_t>(retry_after_ms));
  if (t.weights) out.mutable_weights()->Add(t.weights->begin(), t.weights->end());
  out.set_model_sha256(sha);
  out.set_deadline_unix_ms(t.deadline_unix_ms);
  pb::LocalTraining* l = out.mutable_local();
  l->set_epochs(static_cast<uint32_t>(spec.local_epochs));
  l->set_learning_rate(spec.learning_rate);
  l->set_batch_size(static_cast<uint32_t>(spec.batch_size));
  l->set_proximal_mu(spec.fedprox ? spec.proximal_mu : 0);
  out.set_secure(t.secure);
  for (const auto& [c, k] : t.roster) (*out.mutable_roster())[c] = k;
  for (const auto& d : t.dropped) out.add_dropped(d);
  out.set_clip_norm(t.clip_norm);
  out.set_unweighted(t.unweighted);
  out.set_message(t.message);
  return out;
}

class FedService {
 public:
  FedService(const fed::FederationSpec& spec, std::string model, std::string sha,
             fed::Aggregator* agg, int retry_after_ms)
      : spec_(spec),
        model_(std::move(model)),
        sha_(std::move(sha)),
        agg_(agg),
        retry_after_ms_(retry_after_ms),
        probe_(std::move(fed::KeyPair::Generate().value())) {}

  frontends::grpc::MethodTable Methods() {
    frontends::grpc::MethodTable t;
    const std::string p = "/dais.fed.v1.Federation/";
    t[p + "Poll"].unary = [this](std::shared_ptr<ServerCall> c, std::string b) { Poll(c, b); };
    t[p + "GetModel"].unary = [this](std::shared_ptr<ServerCall> c, std::string b) {
      GetModel(c, b);
    };
    t[p + "Submit"].unary = [this](std::shared_ptr<ServerCall> c, std::string b) { Submit(c, b); };
    t[p + "Reveal"].unary = [this](std::shared_ptr<ServerCall> c, std::string b) { Reveal(c, b); };
    return t;
  }

 private:
  template <typename Req>
  bool Parse(const std::string& bytes, Req* req, ServerCall* call) {
    if (!req->ParseFromString(bytes)) {
      call->Finish(ToGrpcStatus(
          InvalidArgument("the request is not a valid " + req->GetTypeName() + " message")));
      return false;
    }
    Status s = OkStatus();
    if (req->federation() != spec_.name) {
      s = NotFound("federation: '" + req->federation() + "' is not served here ('" + spec_.name +
                   "' is)");
    }
    if constexpr (!std::is_same_v<Req, pb::GetModelRequest>) {
      if (s.ok() && !fed::ValidClientId(req->client())) {
        s = InvalidArgument("client: 1 to 128 letters, digits, '-', '_' or '.' are needed");
      }
    }
    if (!s.ok()) call->Finish(ToGrpcStatus(s));
    return s.ok();
  }

  void Poll(const std::shared_ptr<ServerCall>& call, const std::string& bytes) {
    pb::PollRequest req;
    if (!Parse(bytes, &req, call.get())) return;
    // A key every peer can derive a seed with (32 bytes, not a low-order point): a bad one in
    // the roster would make every honest trainer's masking fail.
    if (!req.public_key().empty() && !probe_.PairSeed(req.public_key(), "probe").ok()) {
      return call->Finish(ToGrpcStatus(
          InvalidArgument("public_key: a 32-byte X25519 public key (not a low-order point)")));
    }
    const fed::Task t =
        agg_->Poll(req.client(), req.public_key(), static_cast<int64_t>(req.key_round()));
    call->Reply(ToProto(t, spec_, sha_, retry_after_ms_).SerializeAsString());
  }

  void GetModel(const std::shared_ptr<ServerCall>& call, const std::string& bytes) {
    pb::GetModelRequest req;
    if (!Parse(bytes, &req, call.get())) return;
    pb::ModelFile m;
    m.set_torchscript(model_);
    m.set_sha256(sha_);
    m.set_parameters(static_cast<uint32_t>(agg_->parameters()));
    call->Reply(m.SerializeAsString());
  }

  void Submit(const std::shared_ptr<ServerCall>& call, const std::string& bytes) {
    pb::UpdateRequest req;
    if (!Parse(bytes, &req, call.get())) return;
    fed::Submission s;
    s.client = req.client();
    s.round = static_cast<int64_t>(req.round());
    s.attempt = static_cast<int>(req.attempt());
    s.samples = req.samples();
    s.train_loss = req.train_loss();
    s.wire_bytes = bytes.size();
    if (!req.int8_values().empty()) {
      if (req.delta_size() > 0 || req.masked_size() > 0 || !std::isfinite(req.int8_scale())) {
        return call->Finish(ToGrpcStatus(InvalidArgument(
            "int8_values: with a finite int8_scale, and neither delta nor masked")));
      }
      if (req.int8_values().size() != agg_->parameters()) {
        return call->Finish(ToGrpcStatus(InvalidArgument(
            fmt::format("client {}: int8_values: {} values, the model {}", req.client(),
                        req.int8_values().size(), agg_->parameters()))));
      }
      fed::Int8Update q;
      q.scale = req.int8_scale();
      q.q.assign(req.int8_values().begin(), req.int8_values().end());
      s.delta = fed::DequantizeInt8(q);
    } else {
      s.delta.assign(req.delta().begin(), req.delta().end());
      s.masked.assign(req.masked().begin(), req.masked().end());
    }
    if (spec_.secure && s.masked.empty()) {
      return call->Finish(ToGrpcStatus(InvalidArgument(
          "masked: this federation uses secure aggregation: plain updates are refused")));
    }
    if (spec_.secure && (s.samples != 0 || s.train_loss != 0)) {
      return call->Finish(ToGrpcStatus(InvalidArgument(
          "samples, train_loss: not sent with secure aggregation (the weight is inside the "
          "masked encoding; the aggregator learns only the total)")));
    }
    if (!spec_.secure && !s.masked.empty()) {
      return call->Finish(
          ToGrpcStatus(InvalidArgument("masked: this federation has no secure aggregation")));
    }
    auto n = agg_->Submit(std::move(s));
    if (!n.ok()) return call->Finish(ToGrpcStatus(n.status()));
    pb::SubmitResponse r;
    r.set_received(static_cast<uint32_t>(*n));
    call->Reply(r.SerializeAsString());
  }

  void Reveal(const std::shared_ptr<ServerCall>& call, const std::string& bytes) {
    pb::RevealRequest req;
    if (!Parse(bytes, &req, call.get())) return;
    std::map<std::string, std::string> seeds(req.seeds().begin(), req.seeds().end());
    Status s = agg_->Reveal(req.client(), static_cast<int64_t>(req.round()),
                            static_cast<int>(req.attempt()), seeds);
    if (!s.ok()) return call->Finish(ToGrpcStatus(s));
    call->Reply(pb::RevealResponse().SerializeAsString());
  }

  const fed::FederationSpec& spec_;
  const std::string model_;
  const std::string sha_;
  fed::Aggregator* agg_;
  const int retry_after_ms_;
  const fed::KeyPair probe_;  // derives a seed with each key handed in, to refuse bad ones
};

// The model round 1 starts from: `version`'s model.pt (0: the newest version's).
StatusOr<std::pair<int64_t, std::string>> StartModel(const fed::FederationSpec& spec,
                                                     int64_t version) {
  std::string file;
  int64_t v = version;
  if (v == 0) v = NewestVersion(spec.ModelDir(), &file);
  const fs::path p = fs::path(spec.ModelDir()) / std::to_string(v) / "model.pt";
  if (v == 0 || !fs::exists(p)) {
    return NotFound(
        fmt::format("model: no TorchScript model.pt in {} (version {}); XGBoost "
                    "models are not federated (trees do not average)",
                    spec.ModelDir(), v == 0 ? std::string("newest") : std::to_string(v)));
  }
  ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(p));
  return std::make_pair(v, std::move(bytes));
}

std::string RoundJson(const fed::RoundOutcome& o, const learn::Scores* score) {
  auto num = [](double v) {
    return std::isfinite(v) ? fmt::format("{:.6f}", v) : std::string("null");
  };
  return fmt::format(
      "{{\"round\": {}, \"attempt\": {}, \"selected\": {}, \"contributed\": {}, "
      "\"dropped\": {}, \"refused\": {}, \"samples\": {}, \"update_norm\": {}, "
      "\"train_loss\": {}, \"accuracy\": {}, \"epsilon\": {}, \"bytes_in\": {}, "
      "\"bytes_out\": {}, \"sent_to\": {}, \"seconds\": {:.3f}}}",
      o.round, o.attempt, o.selected.size(), o.contributed.size(), o.dropped.size(),
      o.refused.size(), o.samples, num(o.update_norm), num(o.mean_train_loss),
      score ? num(score->accuracy) : "null", num(o.epsilon), o.bytes_in, o.bytes_out, o.sent_to,
      o.duration_ms / 1000.0);
}

class FedServer {
 public:
  explicit FedServer(const FedServeOptions& o) : o_(o) {}

  int Run() {
    auto spec = LoadSpec();
    if (!spec.ok()) return Fail(2, spec.status());
    spec_ = *spec;
    if (!spec_.release_yaml.empty()) {
      auto r = cluster::ParseTrainingReleaseYaml(spec_.release_yaml);
      if (!r.ok()) return Fail(2, r.status());
      release_ = *r;
      if (release_.strategy == "canary" && o_.etcd.empty()) {
        return Fail(2, InvalidArgument("release: strategy canary needs --etcd"));
      }
    }
    if (!spec_.holdout.empty()) {
      auto h = learn::LoadRows(spec_.holdout);
      if (!h.ok()) return Fail(2, h.status());
      holdout_ = std::move(*h);
    }
    std::error_code ec;
    fs::create_directories(o_.state_dir, ec);
    std::vector<float> global;
    auto resumed = LoadFedState(o_.state_dir, spec_, &state_, &global);
    if (!resumed.ok()) return Fail(2, resumed.status());
    // A resumed federation goes on from the version it started from, whatever was published
    // since (its own versions among them).
    auto start = StartModel(spec_, *resumed ? state_.start_version : spec_.start_version);
    if (!start.ok()) return Fail(2, start.status());
    model_ = std::move(start->second);
    const std::string sha = Sha256Hex(model_);
    if (*resumed && sha != state_.model_sha256) {
      return Fail(2, FailedPrecondition(fmt::format(
                         "{}: version {}'s model.pt changed since the federation started: use "
                         "another --state-dir to start again",
                         o_.state_dir, state_.start_version)));
    }
    state_.start_version = start->first;
    state_.model_sha256 = sha;
    if (state_.run.empty()) state_.run = NewFedRunId();
    if (!*resumed) {
      auto p = learn::ModuleParameters(model_);
      if (!p.ok()) return Fail(2, p.status());
      global = std::move(*p);
    }
    LOG_INFO("dais fed serve: federation {} of {} v{} ({} parameters), {} rounds; {}", spec_.name,
             spec_.model, start->first, global.size(), spec_.rounds,
             *resumed ? fmt::format("resumed after round {} from {}", state_.completed_round,
                                    o_.state_dir)
                      : "a new federation");
    if (holdout_.rows() > 0 && !*resumed) Evaluate(global, 0);
    fed::Aggregator agg(
        spec_, global, state_.completed_round + 1, NowMs,
        [](const std::string& l) { LOG_INFO("dais fed serve: {}", l); }, state_.noised_rounds);
    return Serve(&agg, global);
  }

 private:
  int Fail(int code, const Status& s) {
    LOG_ERROR("dais fed serve: {}", s.message());
    return code;
  }

  // --config's file, or what `dais ctl apply` wrote to etcd for --federation.
  StatusOr<fed::FederationSpec> LoadSpec() {
    if (!o_.config.empty()) return fed::LoadFederationSpec(o_.config);
    if (o_.federation.empty() || o_.etcd.empty()) {
      return InvalidArgument("--config FILE, or --federation NAME with --etcd, is needed");
    }
    ASSIGN_OR_RETURN(auto client, etcd::Client::Create({{o_.etcd}}));
    const std::string key = fed::kFederationsPrefix + o_.federation;
    ASSIGN_OR_RETURN(etcd::RangeResult r, client->Get(key));
    if (r.kvs.empty()) {
      return NotFound("--federation: no " + key + " in etcd (dais ctl apply -f federation.yaml)");
    }
    return fed::ParseFederationSpec(r.kvs[0].value, "etcd:" + key);
  }

  std::optional<learn::Scores> Evaluate(const std::vector<float>& global, int64_t round) {
    if (holdout_.rows() == 0) return std::nullopt;
    auto s = learn::ScoreParameters(model_, global, holdout_);
    if (!s.ok()) {
      LOG_WARNING("dais fed serve: holdout: {}", s.status().message());
      return std::nullopt;
    }
    LOG_INFO("dais fed serve: round {}: held-out accuracy {:.4f} ({} rows)", round, s->accuracy,
             s->rows);
    return *s;
  }

  int Serve(fed::Aggregator* agg, const std::vector<float>& global) {
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    frontends::grpc::H2ServerOptions ho;
    ho.address = o_.address;
    ho.port = o_.port;
    ho.threads = 2;
    // Messages as large as the model needs: a masked update is 8 bytes a parameter, the weights
    // and the module 4 (the transport's 64 MiB default would cap a model at 8M parameters).
    const uint64_t need = static_cast<uint64_t>(agg->parameters()) * 8 + model_.size() + (1 << 20);
    const auto limit = static_cast<uint32_t>(
        std::clamp<uint64_t>(need, ho.h2.max_receive_message_bytes, uint64_t{1} << 31));
    ho.h2.max_receive_message_bytes = limit;
    ho.h2.max_send_message_bytes = limit;
    ho.h2.max_buffered_bytes = std::max<uint64_t>(ho.h2.max_buffered_bytes, 2 * uint64_t{limit});
    auto tls = ListenerTls("fed", o_.tls, o_.tls_common, {"h2"});
    if (!tls.ok()) return Fail(2, tls.status());
    ho.tls = *tls;
    FedService service(spec_, model_, state_.model_sha256, agg, o_.retry_after_ms);
    frontends::grpc::H2Server server(ho, service.Methods());
    if (Status s = server.Start(); !s.ok()) return Fail(1, s);
    LOG_INFO("dais fed serve: listening on {}:{} ({})", o_.address, server.port(),
             ho.tls ? "TLS" : "plain text");
    std::thread waiter([&] {  // a signal ends the loop
      int sig = 0;
      sigwait(&stop, &sig);
      stopping_ = true;
    });
    int code = 0;
    // A federation resumed after its last round still publishes and releases what it had not.
    if (agg->done()) {
      code = Finish(global, state_.completed_round);
    } else if (spec_.publish_every_round && state_.published_round < state_.completed_round) {
      code = Publish(global, state_.completed_round);  // a crash before it was published
    }
    int64_t done_at = agg->done() ? NowMs() : 0;
    while (!stopping_ && code == 0) {
      if (auto o = agg->Tick()) code = Completed(*o);
      if (agg->done() && done_at == 0) done_at = NowMs();
      // Linger so that polling trainers hear DONE, then stop.
      if (done_at > 0 && NowMs() - done_at > 3 * o_.retry_after_ms + 1000) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    server.Stop(1000);
    if (!stopping_) pthread_kill(waiter.native_handle(), SIGTERM);
    waiter.join();
    if (stopping_ && !agg->done()) {
      LOG_INFO("dais fed serve: stopped after round {}", agg->round() - 1);
    }
    return code;
  }

  int Completed(const fed::RoundOutcome& o) {
    const std::optional<learn::Scores> score = Evaluate(*o.global, o.round);
    const std::string json = RoundJson(o, score ? &*score : nullptr);
    LOG_INFO(
        "dais fed serve: round {} done in {:.1f} s: {} of {} trainers, {} dropped, {} refused, "
        "{} samples, update norm {:.4f}{}, {} bytes in, {} out{}",
        o.round, o.duration_ms / 1000.0, o.contributed.size(), o.selected.size(), o.dropped.size(),
        o.refused.size(), o.samples, o.update_norm,
        std::isnan(o.mean_train_loss) ? "" : fmt::format(", train loss {:.4f}", o.mean_train_loss),
        o.bytes_in, o.bytes_out,
        o.epsilon > 0 ? fmt::format(", epsilon {:.3f} spent", o.epsilon) : "");
    state_.completed_round = o.round;
    if (o.epsilon > 0) ++state_.noised_rounds;
    if (!state_.history.empty()) state_.history += ",\n  ";
    state_.history += json;
    state_.last_round = json;
    if (Status s = SaveFedState(o_.state_dir, spec_, state_, *o.global); !s.ok()) {
      return Fail(1, s);
    }
    if (o.round == spec_.rounds) return Finish(*o.global, o.round);
    if (spec_.publish_every_round) return Publish(*o.global, o.round);
    return 0;
  }

  // The last round: published (if it was not) and released (if it was not).
  int Finish(const std::vector<float>& global, int64_t round) {
    if (state_.published_round < round) {
      if (int code = Publish(global, round); code != 0) return code;
    }
    if (release_.strategy == "canary" && state_.released_version < state_.published_version &&
        Release(state_.published_version)) {
      state_.released_version = state_.published_version;
      if (Status s = SaveFedState(o_.state_dir, spec_, state_, global); !s.ok()) return Fail(1, s);
    }
    return 0;
  }

  int Publish(const std::vector<float>& global, int64_t round) {
    auto v = PublishFedRound(spec_, state_, model_, global, round);
    if (!v.ok()) return Fail(1, v.status());
    LOG_INFO("dais fed serve: round {} published as {} version {}", round, spec_.model, *v);
    state_.published_version = *v;
    state_.published_round = round;
    if (Status s = SaveFedState(o_.state_dir, spec_, state_, global); !s.ok()) return Fail(1, s);
    return 0;
  }

  // False when stopped first (the next start releases it).
  bool Release(int64_t version) {
    auto client = etcd::Client::Create({{o_.etcd}});
    if (!client.ok()) {
      LOG_ERROR("dais fed serve: release of v{}: {}", version, client.status().message());
      return false;
    }
    ReleaseHooks hooks;
    hooks.stopping = [this] { return stopping_.load(); };
    hooks.waiting = [version](const std::string& why) {
      LOG_INFO("dais fed serve: releasing v{}: {}", version, why);
    };
    hooks.event = [](const std::string& e) { LOG_INFO("dais fed serve: {}", e); };
    hooks.sleep_ms = [](int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
    hooks.now_ms = NowMs;
    const std::string outcome = ReleaseByCanary(**client, release_, version, hooks);
    LOG_INFO("dais fed serve: {}", outcome.empty() ? "stopped before the release ended" : outcome);
    return !outcome.empty();
  }

  const FedServeOptions& o_;
  fed::FederationSpec spec_;
  cluster::TrainingRelease release_;
  std::string model_;
  learn::Dataset holdout_;
  FedState state_;
  std::atomic<bool> stopping_{false};
};

}  // namespace

int RunFedServe(const FedServeOptions& o) { return FedServer(o).Run(); }

}  // namespace dais::cmd
