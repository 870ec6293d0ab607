#include "txn/gate.h"

#include <grpcpp/grpcpp.h>

#include <charconv>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>

#include "features/spec/feature_codec.h"
#include "features/store/feature_store.h"
#include "grpc_service.grpc.pb.h"

namespace dais::txn {

using inference::GRPCInferenceService;
using inference::ModelInferRequest;
using inference::ModelInferResponse;

struct Gate::Impl {
  // Scores under way: the destructor waits for their callbacks (each bounded by its timeout).
  std::mutex mu;
  std::condition_variable idle;
  int pending = 0;
  std::shared_ptr<grpc::Channel> channel;
  std::shared_ptr<GRPCInferenceService::Stub> stub;
  features::FeatureStore* store = nullptr;
  features::FeatureSpecPtr spec;
};

namespace {

struct Call {
  grpc::ClientContext ctx;
  ModelInferRequest request;
  ModelInferResponse response;
};

GateResult Error(std::string message) { return {GateResult::kError, 0, std::move(message)}; }

// The score: element `index` of the output's first row (FP32 or FP64, raw or typed contents).
StatusOr<double> ReadScore(const ModelInferResponse& r, const GateSpec& g) {
  for (int i = 0; i < r.outputs_size(); ++i) {
    const auto& out = r.outputs(i);
    if (out.name() != g.output) continue;
    const std::string& dt = out.datatype();
    size_t width = dt == "FP32" ? 4 : dt == "FP64" ? 8 : 0;
    if (width == 0) return InvalidArgument("output " + g.output + " is " + dt + ", not FP32/FP64");
    if (i < r.raw_output_contents_size()) {
      const std::string& raw = r.raw_output_contents(i);
      if ((g.output_index + 1) * width > raw.size()) {
        return InvalidArgument("output " + g.output + " has no element " +
                               std::to_string(g.output_index));
      }
      if (width == 4) {
        float f;
        std::memcpy(&f, raw.data() + g.output_index * 4, 4);
        return static_cast<double>(f);
      }
      double d;
      std::memcpy(&d, raw.data() + g.output_index * 8, 8);
      return d;
    }
    const auto& c = out.contents();
    if (width == 4 && g.output_index < c.fp32_contents_size())
      return c.fp32_contents(g.output_index);
    if (width == 8 && g.output_index < c.fp64_contents_size())
      return c.fp64_contents(g.output_index);
    return InvalidArgument("output " + g.output + " has no element " +
                           std::to_string(g.output_index));
  }
  return InvalidArgument("the answer has no output " + g.output);
}

double ParamNumber(const Params& params, const std::string& name) {
  auto it = params.find(name);
  if (it == params.end()) return 0;
  if (it->second == "true") return 1;
  if (it->second == "false") return 0;
  double d = 0;
  std::from_chars(it->second.data(), it->second.data() + it->second.size(), d);
  return d;
}

}  // namespace

Gate::Gate(const std::string& server, features::FeatureStore* store, features::FeatureSpecPtr spec,
           std::shared_ptr<grpc::ChannelCredentials> credentials)
    : impl_(std::make_unique<Impl>()) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  impl_->channel = grpc::CreateCustomChannel(
      server, credentials ? credentials : grpc::InsecureChannelCredentials(), args);
  impl_->stub = GRPCInferenceService::NewStub(impl_->channel);
  impl_->store = store;
  impl_->spec = std::move(spec);
}

Gate::~Gate() {
  std::unique_lock lock(impl_->mu);
  impl_->idle.wait_for(lock, std::chrono::seconds(10), [&] { return impl_->pending == 0; });
}

bool Gate::Connect(int timeout_ms) {
  return impl_->channel->WaitForConnected(std::chrono::system_clock::now() +
                                          std::chrono::milliseconds(timeout_ms));
}

Status Gate::Validate(const TxnSpec& spec) const {
  for (const auto& [name, type] : spec.types) {
    if (!type.gate || !type.gate->uses_features()) continue;
    const std::string at = "types." + name + ".gate";
    if (!impl_->spec || !impl_->store) {
      return InvalidArgument(at + " reads features: give --feature-spec (and --redis)");
    }
    const features::EntitySpec* e = impl_->spec->FindEntity(type.gate->entity);
    if (!e)
      return InvalidArgument(at + ".entity: no entity '" + type.gate->entity + "' in " +
                             impl_->spec->source);
    for (const GateElement& el : type.gate->vector) {
      if (el.feature.empty()) continue;
      auto ref = impl_->spec->Resolve(el.feature);
      if (!ref.ok()) return InvalidArgument(at + ".vector: " + ref.status().message());
      const auto& g = impl_->spec->groups[ref->group];
      if (g.entity != type.gate->entity || g.features[ref->feature].elements != 1) {
        return InvalidArgument(at + ".vector: " + el.feature + " must be a scalar feature of " +
                               type.gate->entity);
      }
    }
  }
  return OkStatus();
}

void Gate::Score(const GateSpec& gate, const Params& params, CallTrace trace,
                 std::function<void(GateResult)> done) {
  const auto deadline =
      std::chrono::system_clock::now() + std::chrono::milliseconds(gate.timeout_ms);
  auto infer = [this, &gate, params, deadline, trace = std::move(trace),
                done](std::vector<float> vec) {
    auto call = std::make_shared<Call>();
    call->ctx.set_deadline(deadline);
    if (!trace.traceparent.empty()) call->ctx.AddMetadata("traceparent", trace.traceparent);
    if (!trace.request_id.empty()) call->ctx.AddMetadata("x-request-id", trace.request_id);
    call->request.set_model_name(gate.model);
    call->request.set_model_version(gate.version);
    auto* in = call->request.add_inputs();
    in->set_name(gate.input);
    in->set_datatype("FP32");
    in->add_shape(1);
    in->add_shape(static_cast<int64_t>(vec.size()));
    call->request.add_raw_input_contents()->assign(reinterpret_cast<const char*>(vec.data()),
                                                   vec.size() * sizeof(float));
    const GateSpec* g = &gate;
    impl_->stub->async()->ModelInfer(
        &call->ctx, &call->request, &call->response, [call, g, done](grpc::Status st) {
          if (!st.ok()) {
            done(Error("model " + g->model + ": " +
                       (st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED
                            ? "no answer within " + std::to_string(g->timeout_ms) + " ms"
                            : st.error_message())));
            return;
          }
          auto score = ReadScore(call->response, *g);
          if (!score.ok()) {
            done(Error("model " + g->model + ": " + score.status().message()));
          } else if (*score > g->threshold) {
            char buf[96];
            std::snprintf(buf, sizeof(buf), "fraud score %.4f above the threshold %.2f", *score,
                          g->threshold);
            done({GateResult::kRefuse, *score, buf});
          } else {
            done({GateResult::kPass, *score, ""});
          }
        });
  };
  auto fill = [&gate, params](const features::LookupResult* looked) {
    std::vector<float> vec;
    for (const GateElement& el : gate.vector) {
      if (!el.param.empty()) {
        vec.push_back(static_cast<float>(ParamNumber(params, el.param)));
      } else if (!el.feature.empty() && looked) {
        auto ref = looked->spec->Resolve(el.feature);
        size_t slot = 0;
        while (slot < looked->groups.size() && looked->groups[slot] != ref->group) ++slot;
        const auto& def = looked->spec->groups[ref->group].features[ref->feature];
        std::string_view bytes = looked->Value(0, slot, ref->feature, false);
        vec.push_back(static_cast<float>(features::ElementAsDouble(def.dtype, bytes.data(), 0)));
      } else {
        vec.push_back(static_cast<float>(el.constant));
      }
    }
    return vec;
  };
  if (!gate.uses_features()) {
    infer(fill(nullptr));
    return;
  }
  features::LookupRequest req;
  req.spec = impl_->spec;
  const features::EntitySpec* e = impl_->spec->FindEntity(gate.entity);
  auto id = features::CanonicalEntityId(e->key_type, params.at(gate.entity_param));
  if (!id.ok()) {
    done(Error("entity " + gate.entity + ": " + id.status().message()));
    return;
  }
  req.entities[gate.entity] = {*id};
  std::set<size_t> groups;
  for (const GateElement& el : gate.vector) {
    if (!el.feature.empty()) groups.insert(impl_->spec->Resolve(el.feature)->group);
  }
  req.groups.assign(groups.begin(), groups.end());
  req.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(gate.timeout_ms / 2);
  impl_->store->Lookup(std::move(req),
                       [infer, fill](features::LookupResult r) { infer(fill(&r)); });
}

}  // namespace dais::txn
