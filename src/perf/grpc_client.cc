#include "perf/grpc_client.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <boost/asio.hpp>
#include <chrono>
#include <mutex>

#include "common/mutex.h"
#include "grpc_service.grpc.pb.h"
#include "perf/grpc_h2.h"

namespace dais::perf {
namespace {

using inference::GRPCInferenceService;

// Sessions are spread over this many channels; each has its own connection.
constexpr size_t kMaxChannels = 4;
constexpr auto kControlDeadline = std::chrono::seconds(10);
const std::string kModelInfer = "/inference.GRPCInferenceService/ModelInfer";

Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return OkStatus();
  return Status(static_cast<StatusCode>(s.error_code()),
                fmt::format("gRPC {}: {}", StatusCodeName(static_cast<StatusCode>(s.error_code())),
                            s.error_message()));
}

class GrpcSession : public InferSession {
 public:
  GrpcSession(std::shared_ptr<GRPCInferenceService::Stub> stub,
              std::vector<inference::ModelInferRequest> requests)
      : stub_(std::move(stub)), requests_(std::move(requests)) {}

  Status Infer() override {
    grpc::ClientContext ctx;
    {
      MutexLock lock(&mu_);
      if (aborted_) return Cancelled("aborted");
      active_ = &ctx;
    }
    const inference::ModelInferRequest& req = requests_[next_];
    next_ = (next_ + 1) % requests_.size();
    grpc::Status s = stub_->ModelInfer(&ctx, req, &response_);
    {
      MutexLock lock(&mu_);
      active_ = nullptr;
    }
    return FromGrpc(s);
  }

  void Abort() override {
    MutexLock lock(&mu_);
    aborted_ = true;
    if (active_ != nullptr) active_->TryCancel();
  }

 private:
  std::shared_ptr<GRPCInferenceService::Stub> stub_;
  std::vector<inference::ModelInferRequest> requests_;
  size_t next_ = 0;
  inference::ModelInferResponse response_;  // reused: Clear keeps its memory
  Mutex mu_;
  grpc::ClientContext* active_ DAIS_GUARDED_BY(mu_) = nullptr;
  bool aborted_ DAIS_GUARDED_BY(mu_) = false;
};

// The same on dais perf's own HTTP/2 connection (grpc_h2.h): one connection per session.
class LeanGrpcSession : public InferSession {
 public:
  LeanGrpcSession(std::unique_ptr<GrpcH2Connection> conn, std::vector<std::string> requests)
      : conn_(std::move(conn)), requests_(std::move(requests)) {}

  Status Infer() override {
    const std::string& req = requests_[next_];
    next_ = (next_ + 1) % requests_.size();
    return conn_->Call(kModelInfer, req);
  }
  int MaxInFlight() const override { return 1 << 20; }
  Status RunSlots(int slots, const std::function<bool()>& stop, const RequestDone& done) override {
    return conn_->RunSlots(kModelInfer, requests_, slots, &next_, stop, done);
  }
  void Abort() override { conn_->Abort(); }

 private:
  std::unique_ptr<GrpcH2Connection> conn_;
  std::vector<std::string> requests_;  // serialized ModelInferRequests
  size_t next_ = 0;
};

class GrpcClient : public Client {
 public:
  explicit GrpcClient(ClientOptions options)
      : options_(std::move(options)), address_(options_.host + ":" + options_.port) {}

  StatusOr<ModelInfo> GetModelInfo() override {
    inference::ModelMetadataRequest req;
    req.set_name(options_.model_name);
    req.set_version(options_.model_version);
    inference::ModelMetadataResponse res;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kControlDeadline);
    RETURN_IF_ERROR(FromGrpc(Stub(0)->ModelMetadata(&ctx, req, &res)));
    ModelInfo info;
    info.name = res.name();
    info.platform = res.platform();
    info.versions.assign(res.versions().begin(), res.versions().end());
    auto copy = [](const auto& from, std::vector<TensorSpec>* to) {
      for (const auto& t : from) {
        TensorSpec spec;
        spec.name = t.name();
        spec.datatype = t.datatype();
        spec.dtype = DataTypeFromName(spec.datatype);
        spec.shape.assign(t.shape().begin(), t.shape().end());
        to->push_back(std::move(spec));
      }
    };
    copy(res.inputs(), &info.inputs);
    copy(res.outputs(), &info.outputs);

    inference::ModelConfigRequest creq;
    creq.set_name(options_.model_name);
    creq.set_version(options_.model_version);
    inference::ModelConfigResponse cres;
    grpc::ClientContext cctx;
    cctx.set_deadline(std::chrono::system_clock::now() + kControlDeadline);
    grpc::Status cs = Stub(0)->ModelConfig(&cctx, creq, &cres);
    info.max_batch_size = cs.ok() ? cres.config().max_batch_size() : -1;
    return info;
  }

  StatusOr<ServerStats> GetStats() override {
    inference::ModelStatisticsRequest req;
    req.set_name(options_.model_name);
    req.set_version(options_.model_version);
    inference::ModelStatisticsResponse res;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kControlDeadline);
    grpc::Status s = Stub(0)->ModelStatistics(&ctx, req, &res);
    if (!s.ok()) return Unimplemented(FromGrpc(s).message());
    ServerStats out;
    auto add = [](const inference::StatisticDuration& d, Duration* to) {
      to->count += d.count();
      to->ns += d.ns();
    };
    for (const auto& m : res.model_stats()) {
      out.inference_count += m.inference_count();
      out.execution_count += m.execution_count();
      const auto& is = m.inference_stats();
      add(is.success(), &out.success);
      add(is.queue(), &out.queue);
      add(is.compute_input(), &out.compute_input);
      add(is.compute_infer(), &out.compute_infer);
      add(is.compute_output(), &out.compute_output);
    }
    return out;
  }

  StatusOr<std::unique_ptr<InferSession>> NewSession(
      const std::vector<RequestInputs>& requests) override {
    if (requests.empty()) return InvalidArgument("a session needs at least one request");
    std::vector<inference::ModelInferRequest> built;
    for (const RequestInputs& inputs : requests) {
      inference::ModelInferRequest req;
      req.set_model_name(options_.model_name);
      req.set_model_version(options_.model_version);
      for (const InputTensor& t : inputs) {
        auto* in = req.add_inputs();
        in->set_name(t.name);
        in->set_datatype(t.datatype);
        for (int64_t d : t.shape) in->add_shape(d);
        req.add_raw_input_contents(t.bytes);
      }
      built.push_back(std::move(req));
    }
    if (!options_.grpc_stub) {
      if (endpoints_.empty()) {
        boost::system::error_code ec;
        endpoints_ = boost::asio::ip::tcp::resolver(ioc_).resolve(options_.host, options_.port, ec);
        if (ec) return Unavailable(fmt::format("cannot resolve {}: {}", address_, ec.message()));
      }
      std::vector<std::string> bodies;
      for (const auto& r : built) bodies.push_back(r.SerializeAsString());
      return std::unique_ptr<InferSession>(std::make_unique<LeanGrpcSession>(
          std::make_unique<GrpcH2Connection>(&ioc_, endpoints_, address_, options_.tls_context,
                                             !options_.tls.verify ? ""
                                             : options_.tls.server_name.empty()
                                                 ? options_.host
                                                 : options_.tls.server_name),
          std::move(bodies)));
    }
    return std::unique_ptr<InferSession>(
        std::make_unique<GrpcSession>(Stub(sessions_++ % kMaxChannels), std::move(built)));
  }

  std::string Describe() const override {
    return std::string(options_.grpc_stub ? "grpc (grpc++ stub) " : "grpc ") +
           (options_.tls_context ? "over TLS " : "") + address_;
  }

 private:
  // grpc++'s credentials for the control calls and --grpc-stub (its own TLS, same files; MakeClient
  // already read them once, so they are readable).
  std::shared_ptr<grpc::ChannelCredentials> Credentials() const {
    if (!options_.tls_context) return grpc::InsecureChannelCredentials();
    auto pem = tls::ReadPemFiles(options_.tls);
    if (!pem.ok()) return grpc::InsecureChannelCredentials();  // then fails its handshake
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = pem->ca;
    o.pem_private_key = pem->key;
    o.pem_cert_chain = pem->cert;
    return grpc::SslCredentials(o);
  }

  // The stub of channel `i`, created on first use.
  std::shared_ptr<GRPCInferenceService::Stub> Stub(size_t i) {
    while (stubs_.size() <= i) {
      grpc::ChannelArguments args;
      args.SetMaxReceiveMessageSize(-1);
      args.SetMaxSendMessageSize(-1);
      // A private subchannel pool per channel: otherwise equal channels share one connection.
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      if (!options_.tls.server_name.empty()) {
        args.SetSslTargetNameOverride(options_.tls.server_name);
      }
      auto channel = grpc::CreateCustomChannel(address_, Credentials(), args);
      stubs_.push_back(GRPCInferenceService::NewStub(channel));
    }
    return stubs_[i];
  }

  ClientOptions options_;
  std::string address_;
  std::vector<std::shared_ptr<GRPCInferenceService::Stub>> stubs_;
  size_t sessions_ = 0;
  boost::asio::io_context ioc_;  // for the lean sessions' sockets (blocking calls only)
  boost::asio::ip::tcp::resolver::results_type endpoints_;
};

}  // namespace

StatusOr<std::unique_ptr<Client>> MakeGrpcClient(const ClientOptions& options) {
  return std::unique_ptr<Client>(std::make_unique<GrpcClient>(options));
}

}  // namespace dais::perf
