#include "runtime/model_config.h"

#include <fmt/format.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <utility>

#include "common/utf8.h"

namespace dais::runtime {
namespace {

namespace pb = google::protobuf;
using inference::ModelConfig;
using inference::ModelInstanceGroup;

// Durations in microseconds above this (about 11.6 days) are rejected so that deadline arithmetic
// in nanoseconds cannot overflow.
constexpr uint64_t kMaxMicroseconds = 1'000'000'000'000;
// Instances of one model across all groups; a guard against a typo creating millions of threads.
constexpr int64_t kMaxInstances = 1024;
// The scheduler keeps priority levels in 32 bits.
constexpr uint64_t kMaxPriorityLevels = std::numeric_limits<uint32_t>::max();

// ---------------------------------------------------------------------------------------------
// UTF-8

// The first string (field value or map key) in `m` that is not valid UTF-8, as a field path;
// empty when all are valid.
std::string FindInvalidUtf8(const pb::Message& m, const std::string& prefix) {
  const pb::Descriptor* d = m.GetDescriptor();
  const pb::Reflection* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor* f = d->field(i);
    const std::string name = prefix.empty() ? f->name() : prefix + "." + f->name();
    if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING) {
      if (f->is_repeated()) {
        for (int k = 0; k < r->FieldSize(m, f); ++k) {
          if (!IsValidUtf8(r->GetRepeatedString(m, f, k))) return name;
        }
      } else if (!IsValidUtf8(r->GetString(m, f))) {
        return name;
      }
    } else if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int k = 0; k < r->FieldSize(m, f); ++k) {
          std::string bad = FindInvalidUtf8(r->GetRepeatedMessage(m, f, k), name);
          if (!bad.empty()) return bad;
        }
      } else if (r->HasField(m, f)) {
        std::string bad = FindInvalidUtf8(r->GetMessage(m, f), name);
        if (!bad.empty()) return bad;
      }
    }
  }
  return "";
}

// ---------------------------------------------------------------------------------------------
// Parsing

// Keeps the first error protobuf reports, so that nothing reaches stderr.
class FirstErrorCollector : public pb::io::ErrorCollector {
 public:
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (has_error_) return;
    has_error_ = true;
    line_ = line;
    column_ = column;
    message_ = message;
  }
  void AddWarning(int, pb::io::ColumnNumber, const std::string&) override {}

  bool has_error() const { return has_error_; }
  // "<path>:<line>:<col>: <message>" with 1-based positions, or "<path>: <message>".
  std::string Format(const std::string& path) const {
    if (line_ < 0) return fmt::format("{}: {}", path, message_);
    return fmt::format("{}:{}:{}: {}", path, line_ + 1, column_ + 1, message_);
  }

 private:
  bool has_error_ = false;
  int line_ = -1;
  int column_ = -1;
  std::string message_;
};

// ---------------------------------------------------------------------------------------------
// Shapes

bool DimsValid(const pb::RepeatedField<int64_t>& dims) {
  return std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d >= 1 || d == -1; });
}

std::string DimsString(const pb::RepeatedField<int64_t>& dims) {
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

// Element counts of the runs of fixed dimensions separated by variable (-1) dimensions, e.g.
// [2, 3, -1, 4] -> {6, 4}; false on overflow.
bool FixedRunProducts(const pb::RepeatedField<int64_t>& dims, std::vector<int64_t>* runs) {
  runs->assign(1, 1);
  for (int64_t d : dims) {
    if (d == -1) {
      runs->push_back(1);
    } else if (__builtin_mul_overflow(runs->back(), d, &runs->back())) {
      return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Validation

class Validator {
 public:
  Validator(ModelConfig* config, const std::string& path, bool allow_gpu,
            std::vector<std::string>* warnings)
      : c_(*config), path_(path), allow_gpu_(allow_gpu), warnings_(*warnings) {}

  Status Run(const std::string& model_dir_name) {
    RETURN_IF_ERROR(CheckName(model_dir_name));
    RETURN_IF_ERROR(CheckBackend());
    RETURN_IF_ERROR(CheckRejectedTopLevel());
    if (c_.max_batch_size() < 0) {
      return Error(fmt::format("max_batch_size must be >= 0, got {}", c_.max_batch_size()));
    }
    RETURN_IF_ERROR(CheckInputs());
    RETURN_IF_ERROR(CheckOutputs());
    RETURN_IF_ERROR(CheckDynamicBatching());
    RETURN_IF_ERROR(CheckInstanceGroups());
    RETURN_IF_ERROR(CheckVersionPolicy());
    RETURN_IF_ERROR(CheckWarmup());
    WarnIgnoredTopLevel();
    return OkStatus();
  }

 private:
  Status Error(std::string_view message) const {
    return InvalidArgument(fmt::format("{}: {}", path_, message));
  }
  Status Unsupported(std::string_view field, std::string_view why = "") const {
    return InvalidArgument(fmt::format("{}: field '{}' is not supported by dais{}", path_, field,
                                       why.empty() ? "" : fmt::format(" ({})", why)));
  }
  void Ignored(std::string_view field, std::string_view why) {
    warnings_.push_back(fmt::format("{}: field '{}' is ignored by dais: {}", path_, field, why));
  }

  Status CheckName(const std::string& model_dir_name) {
    if (c_.name().empty()) c_.set_name(model_dir_name);
    if (c_.name() != model_dir_name) {
      return Error(fmt::format("model name '{}' differs from its directory name '{}'", c_.name(),
                               model_dir_name));
    }
    if (c_.name().empty()) return Error("model name is empty");
    return OkStatus();
  }

  Status CheckBackend() {
    const std::string& platform = c_.platform();
    const std::string& backend = c_.backend();
    if (platform.empty() && backend.empty()) {
      return Error("must specify 'platform' or 'backend'");
    }
    if (!platform.empty() && platform != "pytorch_libtorch") {
      return Error(fmt::format(
          "platform '{}' is not supported by dais (supported: platform 'pytorch_libtorch', "
          "backend 'pytorch', 'fil' or 'identity')",
          platform));
    }
    if (!backend.empty() && backend != "pytorch" && backend != "fil" && backend != "identity") {
      return Error(fmt::format(
          "backend '{}' is not supported by dais (supported: 'pytorch', 'fil', 'identity')",
          backend));
    }
    if (platform == "pytorch_libtorch" && !backend.empty() && backend != "pytorch") {
      return Error(
          fmt::format("platform '{}' requires backend 'pytorch', got '{}'", platform, backend));
    }
    if (platform == "pytorch_libtorch" || backend == "pytorch") {
      c_.set_platform("pytorch_libtorch");
      c_.set_backend("pytorch");
    }
    // Triton's backends are shared libraries named by 'runtime'; dais links its backends in, so
    // only the default library name (or none) means the same thing here.
    if (!c_.runtime().empty() && c_.runtime() != fmt::format("libtriton_{}.so", c_.backend())) {
      return Unsupported("runtime",
                         fmt::format("'{}'; backends are built into dais", c_.runtime()));
    }
    return OkStatus();
  }

  Status CheckRejectedTopLevel() {
    if (c_.has_sequence_batching()) return Unsupported("sequence_batching");
    if (c_.has_ensemble_scheduling()) return Unsupported("ensemble_scheduling");
    if (c_.model_transaction_policy().decoupled()) {
      return Unsupported("model_transaction_policy.decoupled");
    }
    if (c_.batch_input_size() > 0) return Unsupported("batch_input");
    if (c_.batch_output_size() > 0) return Unsupported("batch_output");
    if (c_.model_repository_agents().agents_size() > 0) {
      return Unsupported("model_repository_agents", "an agent may verify or transform model files");
    }
    if (c_.model_operations().op_library_filename_size() > 0) {
      return Unsupported("model_operations", "custom operation libraries are not loaded");
    }
    return OkStatus();
  }

  void WarnIgnoredTopLevel() {
    if (c_.has_optimization()) {
      Ignored("optimization", "it tunes other backends and CUDA, not results");
    }
    if (!c_.metric_tags().empty()) Ignored("metric_tags", "metrics carry no per-model tags");
    if (c_.response_cache().enable()) {
      Ignored("response_cache", "dais has no response cache; every request runs the model");
    }
    if (c_.has_model_metrics()) Ignored("model_metrics", "histogram buckets are fixed");
  }

  // Checks what ModelInput and ModelOutput share. `what` is e.g. "input 'x'".
  template <typename IO>
  Status CheckTensor(const IO& io, const std::string& what, std::set<std::string>* names) {
    if (io.name().empty()) return Error(fmt::format("{} must specify 'name'", what));
    if (!names->insert(io.name()).second) {
      return Error(fmt::format("{} is declared more than once", what));
    }
    if (io.data_type() == inference::TYPE_INVALID || !inference::DataType_IsValid(io.data_type())) {
      return Error(fmt::format("{} must specify a valid 'data_type'", what));
    }
    if (io.dims_size() == 0) {
      return Error(
          fmt::format("{} must specify 'dims' (for one value per batch item use dims: [1] with "
                      "reshape: {{ shape: [] }})",
                      what));
    }
    if (!DimsValid(io.dims())) {
      return Error(fmt::format("{} dims {}: each dimension must be >= 1, or -1 for variable size",
                               what, DimsString(io.dims())));
    }
    std::vector<int64_t> dims_runs;
    if (!FixedRunProducts(io.dims(), &dims_runs)) {
      return Error(fmt::format("{} dims {} have too many elements", what, DimsString(io.dims())));
    }
    if (io.has_reshape()) {
      const auto& shape = io.reshape().shape();
      if (!DimsValid(shape)) {
        return Error(fmt::format("{} reshape {}: each dimension must be >= 1, or -1", what,
                                 DimsString(shape)));
      }
      if (shape.empty() && c_.max_batch_size() == 0) {
        return Error(fmt::format("{} cannot have an empty reshape when max_batch_size is 0", what));
      }
      std::vector<int64_t> reshape_runs;
      if (!FixedRunProducts(shape, &reshape_runs) || reshape_runs != dims_runs) {
        return Error(fmt::format(
            "{} reshape {} is not compatible with dims {}: the variable dimensions and the "
            "element counts between them must match",
            what, DimsString(shape), DimsString(io.dims())));
      }
    }
    return OkStatus();
  }

  Status CheckInputs() {
    if (c_.input_size() == 0) return Error("must declare at least one input");
    std::set<std::string> names;
    for (int i = 0; i < c_.input_size(); ++i) {
      const inference::ModelInput& in = c_.input(i);
      const std::string what = fmt::format("input '{}'", in.name());
      RETURN_IF_ERROR(CheckTensor(in, what, &names));
      if (!inference::ModelInput_Format_IsValid(in.format())) {
        return Error(fmt::format("{} has an unknown 'format'", what));
      }
      if (in.format() != inference::ModelInput::FORMAT_NONE && in.dims_size() != 3) {
        return Error(fmt::format("{} with format {} must have 3 dims, got {}", what,
                                 inference::ModelInput_Format_Name(in.format()),
                                 DimsString(in.dims())));
      }
      const std::string field = fmt::format("input[{}]", i);
      if (in.is_shape_tensor()) return Unsupported(field + ".is_shape_tensor");
      if (in.allow_ragged_batch()) return Unsupported(field + ".allow_ragged_batch");
      if (in.is_non_linear_format_io()) return Unsupported(field + ".is_non_linear_format_io");
      if (in.optional()) {
        Ignored(field + ".optional", "every request must still carry the input");
      }
    }
    return OkStatus();
  }

  Status CheckOutputs() {
    if (c_.output_size() == 0) return Error("must declare at least one output");
    std::set<std::string> names;
    for (int i = 0; i < c_.output_size(); ++i) {
      const inference::ModelOutput& out = c_.output(i);
      const std::string what = fmt::format("output '{}'", out.name());
      RETURN_IF_ERROR(CheckTensor(out, what, &names));
      const std::string field = fmt::format("output[{}]", i);
      if (!out.label_filename().empty()) {
        Ignored(field + ".label_filename",
                "the classification extension is not supported, so labels are never returned");
      }
      if (out.is_shape_tensor()) return Unsupported(field + ".is_shape_tensor");
      if (out.is_non_linear_format_io()) return Unsupported(field + ".is_non_linear_format_io");
    }
    return OkStatus();
  }

  // A file name inside the model directory: relative and without "..". Empty is fine.
  Status CheckRelativePath(const std::string& p, const std::string& what) {
    if (p.empty()) return OkStatus();
    bool escapes = p.front() == '/' || p.find('\0') != std::string::npos;
    size_t start = 0;
    while (!escapes && start <= p.size()) {
      size_t end = p.find('/', start);
      if (end == std::string::npos) end = p.size();
      if (p.compare(start, end - start, "..") == 0) escapes = true;
      start = end + 1;
    }
    if (escapes) {
      return Error(
          fmt::format("{} '{}' must be a relative path inside the model directory", what, p));
    }
    return OkStatus();
  }

  Status CheckMicroseconds(uint64_t us, std::string_view field) {
    if (us > kMaxMicroseconds) {
      return Error(fmt::format("{} is {}; dais accepts at most {}", field, us, kMaxMicroseconds));
    }
    return OkStatus();
  }

  Status CheckQueuePolicy(const inference::ModelQueuePolicy& q, const std::string& field) {
    if (!inference::ModelQueuePolicy_TimeoutAction_IsValid(q.timeout_action())) {
      return Error(fmt::format("{}.timeout_action is unknown", field));
    }
    return CheckMicroseconds(q.default_timeout_microseconds(),
                             field + ".default_timeout_microseconds");
  }

  // parameters batching_policy ("triton" | "adaptive"), latency_target_microseconds and
  // inline_execution_max_microseconds (docs/batching.md).
  Status CheckBatchingParameters() {
    const std::string policy = ConfigParameter(c_, kBatchingPolicyParameter);
    if (!policy.empty() && policy != "triton" && policy != "adaptive") {
      return Error(
          fmt::format("parameters {}: '{}' is not a policy; use \"triton\" or "
                      "\"adaptive\"",
                      kBatchingPolicyParameter, policy));
    }
    if (policy == "adaptive" && !c_.has_dynamic_batching()) {
      return Error(fmt::format("parameters {}: \"adaptive\" needs dynamic_batching",
                               kBatchingPolicyParameter));
    }
    for (const char* key : {kLatencyTargetParameter, kInlineExecutionParameter}) {
      const std::string v = ConfigParameter(c_, key);
      if (v.empty()) continue;
      uint64_t us = 0;
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), us);
      if (ec != std::errc() || end != v.data() + v.size()) {
        return Error(
            fmt::format("parameters {}: '{}' is not a whole number of microseconds", key, v));
      }
      RETURN_IF_ERROR(CheckMicroseconds(us, fmt::format("parameters {}", key)));
    }
    return OkStatus();
  }

  Status CheckDynamicBatching() {
    RETURN_IF_ERROR(CheckBatchingParameters());
    if (!c_.has_dynamic_batching()) return OkStatus();
    const inference::ModelDynamicBatching& db = c_.dynamic_batching();
    if (c_.max_batch_size() == 0) {
      return Error("dynamic_batching requires max_batch_size > 0");
    }
    for (int32_t size : db.preferred_batch_size()) {
      if (size <= 0 || size > c_.max_batch_size()) {
        return Error(fmt::format(
            "dynamic_batching preferred_batch_size {} must be in [1, max_batch_size = {}]", size,
            c_.max_batch_size()));
      }
    }
    RETURN_IF_ERROR(CheckMicroseconds(db.max_queue_delay_microseconds(),
                                      "dynamic_batching.max_queue_delay_microseconds"));
    RETURN_IF_ERROR(
        CheckQueuePolicy(db.default_queue_policy(), "dynamic_batching.default_queue_policy"));
    if (db.preserve_ordering()) {
      Ignored("dynamic_batching.preserve_ordering",
              "each response goes back to its own request, so ordering across requests cannot "
              "change a result");
    }
    const uint64_t levels = db.priority_levels();
    if (levels > kMaxPriorityLevels) {
      return Error(fmt::format("dynamic_batching priority_levels {} exceeds {}", levels,
                               kMaxPriorityLevels));
    }
    if (levels > 0) {
      if (db.default_priority_level() < 1 || db.default_priority_level() > levels) {
        return Error(fmt::format(
            "dynamic_batching default_priority_level {} must be in [1, priority_levels = {}]",
            db.default_priority_level(), levels));
      }
    } else {
      if (db.default_priority_level() != 0) {
        Ignored("dynamic_batching.default_priority_level", "priority_levels is 0");
      }
      if (!db.priority_queue_policy().empty()) {
        Ignored("dynamic_batching.priority_queue_policy", "priority_levels is 0");
      }
    }
    for (const auto& [level, policy] : db.priority_queue_policy()) {
      if (levels > 0 && (level < 1 || level > levels)) {
        return Error(fmt::format(
            "dynamic_batching priority_queue_policy level {} must be in [1, priority_levels = {}]",
            level, levels));
      }
      RETURN_IF_ERROR(CheckQueuePolicy(
          policy, fmt::format("dynamic_batching.priority_queue_policy[{}]", level)));
    }
    return OkStatus();
  }

  Status CheckInstanceGroups() {
    if (c_.instance_group_size() == 0) {
      ModelInstanceGroup* group = c_.add_instance_group();
      group->set_kind(ModelInstanceGroup::KIND_CPU);
    }
    bool any_gpu = false;
    int64_t total = 0;
    for (int i = 0; i < c_.instance_group_size(); ++i) {
      ModelInstanceGroup& g = *c_.mutable_instance_group(i);
      const std::string field = fmt::format("instance_group[{}]", i);
      if (g.name().empty()) g.set_name(fmt::format("{}_{}", c_.name(), i));
      if (g.count() < 0) {
        return Error(fmt::format("{}.count must be >= 1, got {}", field, g.count()));
      }
      if (g.count() == 0) g.set_count(1);
      for (int32_t gpu : g.gpus()) {
        if (gpu < 0) return Error(fmt::format("{}.gpus has negative GPU id {}", field, gpu));
      }
      switch (g.kind()) {
        case ModelInstanceGroup::KIND_AUTO:
          g.set_kind(ModelInstanceGroup::KIND_CPU);
          if (g.gpus_size() > 0) {
            warnings_.push_back(fmt::format(
                "{}: {} has kind KIND_AUTO, which dais places on CPU; its 'gpus' are ignored",
                path_, field));
            g.clear_gpus();
          }
          break;
        case ModelInstanceGroup::KIND_CPU:
          if (g.gpus_size() > 0) {
            return Error(fmt::format("{} has kind KIND_CPU and must not list 'gpus'", field));
          }
          break;
        case ModelInstanceGroup::KIND_GPU:
          if (!allow_gpu_) {
            return Unsupported(field + ".kind",
                               "KIND_GPU needs a dais build with GPU support; use KIND_CPU");
          }
          any_gpu = true;
          break;
        case ModelInstanceGroup::KIND_MODEL:
          return Unsupported(field + ".kind", "KIND_MODEL; use KIND_CPU or KIND_GPU");
        default:
          return Error(fmt::format("{}.kind is unknown", field));
      }
      const int64_t per_group =
          int64_t{g.count()} *
          (g.kind() == ModelInstanceGroup::KIND_GPU && g.gpus_size() > 0 ? g.gpus_size() : 1);
      total += per_group;
      if (total > kMaxInstances) {
        return Error(fmt::format("instance groups ask for more than {} instances", kMaxInstances));
      }
      if (g.secondary_devices_size() > 0) return Unsupported(field + ".secondary_devices");
      if (g.profile_size() > 0) return Unsupported(field + ".profile", "TensorRT only");
      if (g.has_rate_limiter()) {
        Ignored(field + ".rate_limiter", "instances are not rate limited; results are the same");
      }
      if (g.passive()) {
        Ignored(field + ".passive", "every instance receives requests; results are the same");
      }
      if (!g.host_policy().empty()) {
        Ignored(field + ".host_policy", "no per-host-policy thread or memory binding");
      }
    }
    if (!c_.cc_model_filenames().empty()) {
      if (any_gpu) {
        return Unsupported("cc_model_filenames",
                           "per-compute-capability model files are not selected");
      }
      Ignored("cc_model_filenames", "it only applies to GPU instances");
    }
    return OkStatus();
  }

  Status CheckVersionPolicy() {
    inference::ModelVersionPolicy* policy = c_.mutable_version_policy();
    switch (policy->policy_choice_case()) {
      case inference::ModelVersionPolicy::POLICY_CHOICE_NOT_SET:
        policy->mutable_latest()->set_num_versions(1);
        break;
      case inference::ModelVersionPolicy::kLatest:
        if (policy->latest().num_versions() == 0) policy->mutable_latest()->set_num_versions(1);
        break;
      case inference::ModelVersionPolicy::kAll:
        break;
      case inference::ModelVersionPolicy::kSpecific:
        if (policy->specific().versions_size() == 0) {
          return Error("version_policy specific must list at least one version");
        }
        for (int64_t v : policy->specific().versions()) {
          if (v < 1) {
            return Error(fmt::format("version_policy specific version {} must be >= 1", v));
          }
        }
        break;
    }
    return OkStatus();
  }

  Status CheckWarmup() {
    // Triton skips samples of batch size 0; removing them here makes every consumer agree.
    auto* samples = c_.mutable_model_warmup();
    for (int i = 0; i < samples->size();) {
      if (samples->Get(i).batch_size() != 0) {
        ++i;
        continue;
      }
      warnings_.push_back(
          fmt::format("{}: model_warmup[{}] '{}' has batch_size 0 and is removed "
                      "(Triton skips such samples)",
                      path_, i, samples->Get(i).name()));
      samples->erase(samples->begin() + i);
    }
    for (int i = 0; i < c_.model_warmup_size(); ++i) {
      const inference::ModelWarmup& w = c_.model_warmup(i);
      const std::string what = fmt::format("model_warmup[{}] '{}'", i, w.name());
      if (w.name().empty()) return Error(fmt::format("{} must specify 'name'", what));
      const uint32_t max_batch = static_cast<uint32_t>(std::max(1, c_.max_batch_size()));
      if (w.batch_size() > max_batch) {
        return Error(fmt::format("{} batch_size {} exceeds {}", what, w.batch_size(), max_batch));
      }
      for (const auto& [name, input] : w.inputs()) {
        const inference::ModelInput* in = nullptr;
        for (const auto& candidate : c_.input()) {
          if (candidate.name() == name) in = &candidate;
        }
        const std::string iwhat = fmt::format("{} input '{}'", what, name);
        if (in == nullptr) return Error(fmt::format("{} is not a model input", iwhat));
        if (input.data_type() != in->data_type()) {
          return Error(fmt::format("{} has data_type {}, the model input has {}", iwhat,
                                   inference::DataType_Name(input.data_type()),
                                   inference::DataType_Name(in->data_type())));
        }
        bool dims_match = input.dims_size() == in->dims_size();
        for (int k = 0; dims_match && k < input.dims_size(); ++k) {
          const int64_t want = in->dims(k);
          const int64_t got = input.dims(k);
          dims_match = got >= 0 && (want == -1 || got == want);
        }
        if (!dims_match) {
          return Error(fmt::format("{} dims {} do not match the model input dims {}", iwhat,
                                   DimsString(input.dims()), DimsString(in->dims())));
        }
        std::vector<int64_t> runs;
        if (!FixedRunProducts(input.dims(), &runs)) {
          return Error(fmt::format("{} dims have too many elements", iwhat));
        }
        switch (input.input_data_type_case()) {
          case inference::ModelWarmup::Input::kZeroData:
          case inference::ModelWarmup::Input::kRandomData:
            break;
          case inference::ModelWarmup::Input::kInputDataFile:
            if (input.input_data_file().empty()) {
              return Error(fmt::format("{} input_data_file is empty", iwhat));
            }
            RETURN_IF_ERROR(CheckRelativePath(input.input_data_file(), iwhat + " input_data_file"));
            break;
          case inference::ModelWarmup::Input::INPUT_DATA_TYPE_NOT_SET:
            return Error(
                fmt::format("{} must set one of zero_data, random_data or input_data_file", iwhat));
        }
      }
      for (const auto& in : c_.input()) {
        if (w.inputs().count(in.name()) == 0) {
          return Error(fmt::format("{} gives no data for input '{}'", what, in.name()));
        }
      }
    }
    return OkStatus();
  }

  ModelConfig& c_;
  const std::string& path_;
  const bool allow_gpu_;
  std::vector<std::string>& warnings_;
};

}  // namespace

StatusOr<inference::ModelConfig> ParseModelConfig(std::string_view text, const std::string& path) {
  if (text.size() > static_cast<size_t>(INT_MAX)) {
    return InvalidArgument(fmt::format("{}: file is too large ({} bytes)", path, text.size()));
  }
  FirstErrorCollector errors;
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  pb::io::ArrayInputStream input(text.data(), static_cast<int>(text.size()));
  inference::ModelConfig config;
  if (!parser.Parse(&input, &config)) {
    if (errors.has_error()) return InvalidArgument(errors.Format(path));
    return InvalidArgument(fmt::format("{}: not a valid model configuration", path));
  }
  const std::string bad = FindInvalidUtf8(config, "");
  if (!bad.empty()) {
    return InvalidArgument(fmt::format("{}: field '{}' is not valid UTF-8", path, bad));
  }
  return config;
}

Status ValidateModelConfig(inference::ModelConfig* config, const std::string& path,
                           const std::string& model_dir_name, bool allow_gpu,
                           std::vector<std::string>* warnings) {
  return Validator(config, path, allow_gpu, warnings).Run(model_dir_name);
}

std::vector<int64_t> SelectVersions(const inference::ModelVersionPolicy& policy,
                                    std::vector<int64_t> available) {
  std::sort(available.begin(), available.end());
  available.erase(std::unique(available.begin(), available.end()), available.end());
  switch (policy.policy_choice_case()) {
    case inference::ModelVersionPolicy::kAll:
      return available;
    case inference::ModelVersionPolicy::kSpecific: {
      std::vector<int64_t> selected;
      for (int64_t v : available) {
        const auto& wanted = policy.specific().versions();
        if (std::find(wanted.begin(), wanted.end(), v) != wanted.end()) selected.push_back(v);
      }
      return selected;
    }
    case inference::ModelVersionPolicy::kLatest:
    case inference::ModelVersionPolicy::POLICY_CHOICE_NOT_SET:
      break;
  }
  size_t n = policy.has_latest() ? policy.latest().num_versions() : 1;
  if (n == 0) n = 1;
  if (n < available.size()) available.erase(available.begin(), available.end() - n);
  return available;
}

std::string ConfigParameter(const inference::ModelConfig& config, const std::string& key) {
  auto it = config.parameters().find(key);
  return it == config.parameters().end() ? "" : it->second.string_value();
}

}  // namespace dais::runtime
