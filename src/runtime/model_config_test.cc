#include "runtime/model_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <limits>
#include <string>
#include <vector>

#include "common/status_testing.h"

namespace dais::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// Configs use the R"cfg(...)cfg" delimiter, which clang-format leaves as written (it reformats
// R"pb(...)pb" as text proto).

constexpr char kPath[] = "models/resnet/config.pbtxt";

// A Triton PyTorch config as people write them.
constexpr char kPytorchConfig[] = R"cfg(
name: "resnet"
platform: "pytorch_libtorch"
max_batch_size: 8
input [
  {
    name: "INPUT__0"
    data_type: TYPE_FP32
    format: FORMAT_NCHW
    dims: [ 3, 224, 224 ]
  }
]
output [
  {
    name: "OUTPUT__0"
    data_type: TYPE_FP32
    dims: [ 1000 ]
  }
]
instance_group [ { count: 2 kind: KIND_CPU } ]
dynamic_batching {
  preferred_batch_size: [ 4, 8 ]
  max_queue_delay_microseconds: 100
}
parameters: { key: "INFERENCE_MODE" value: { string_value: "true" } }
)cfg";

// A Triton FIL (tree model) config.
constexpr char kFilConfig[] = R"cfg(
backend: "fil"
max_batch_size: 32768
input [ { name: "input__0" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "output__0" data_type: TYPE_FP32 dims: [ 2 ] } ]
instance_group [ { kind: KIND_AUTO } ]
parameters [
  { key: "model_type" value: { string_value: "xgboost_json" } },
  { key: "output_class" value: { string_value: "true" } },
  { key: "predict_proba" value: { string_value: "true" } },
  { key: "threshold" value: { string_value: "0.5" } }
]
dynamic_batching {}
)cfg";

constexpr char kMinimal[] = R"cfg(
backend: "pytorch"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 1 ] } ]
)cfg";

std::string Minimal(std::string_view extra) { return std::string(kMinimal) + std::string(extra); }

inference::ModelConfig Parse(std::string_view text) {
  auto config = ParseModelConfig(text, kPath);
  EXPECT_OK(config);
  return config.ok() ? *config : inference::ModelConfig();
}

Status Validate(inference::ModelConfig* config, const std::string& dir,
                std::vector<std::string>* warnings = nullptr, bool allow_gpu = false) {
  std::vector<std::string> ignored;
  return ValidateModelConfig(config, kPath, dir, allow_gpu, warnings ? warnings : &ignored);
}

// Parses and validates `text` as the config of directory "m".
Status ParseAndValidate(std::string_view text, std::vector<std::string>* warnings = nullptr) {
  auto config = ParseModelConfig(text, kPath);
  if (!config.ok()) return config.status();
  return Validate(&*config, "m", warnings);
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  return all;
}

TEST(ModelConfigTest, ParsesAndValidatesPytorchConfig) {
  inference::ModelConfig c = Parse(kPytorchConfig);
  std::vector<std::string> warnings;
  ASSERT_OK(Validate(&c, "resnet", &warnings));
  EXPECT_THAT(warnings, IsEmpty());
  EXPECT_EQ(c.name(), "resnet");
  EXPECT_EQ(c.backend(), "pytorch");
  EXPECT_EQ(c.platform(), "pytorch_libtorch");
  EXPECT_EQ(c.max_batch_size(), 8);
  ASSERT_EQ(c.input_size(), 1);
  EXPECT_EQ(c.input(0).data_type(), inference::TYPE_FP32);
  EXPECT_EQ(c.input(0).format(), inference::ModelInput::FORMAT_NCHW);
  EXPECT_THAT(c.input(0).dims(), ElementsAre(3, 224, 224));
  ASSERT_EQ(c.output_size(), 1);
  EXPECT_THAT(c.output(0).dims(), ElementsAre(1000));
  ASSERT_EQ(c.instance_group_size(), 1);
  EXPECT_EQ(c.instance_group(0).count(), 2);
  EXPECT_EQ(c.instance_group(0).name(), "resnet_0");
  EXPECT_THAT(c.dynamic_batching().preferred_batch_size(), ElementsAre(4, 8));
  EXPECT_EQ(c.dynamic_batching().max_queue_delay_microseconds(), 100u);
  EXPECT_EQ(ConfigParameter(c, "INFERENCE_MODE"), "true");
  EXPECT_EQ(ConfigParameter(c, "absent"), "");
  ASSERT_TRUE(c.version_policy().has_latest());
  EXPECT_EQ(c.version_policy().latest().num_versions(), 1u);
}

TEST(ModelConfigTest, ParsesAndValidatesFilConfig) {
  inference::ModelConfig c = Parse(kFilConfig);
  ASSERT_OK(Validate(&c, "trees"));
  EXPECT_EQ(c.name(), "trees");
  EXPECT_EQ(c.backend(), "fil");
  EXPECT_EQ(c.platform(), "");
  EXPECT_EQ(ConfigParameter(c, "model_type"), "xgboost_json");
  EXPECT_EQ(ConfigParameter(c, "output_class"), "true");
  EXPECT_EQ(ConfigParameter(c, "predict_proba"), "true");
  EXPECT_EQ(ConfigParameter(c, "threshold"), "0.5");
  ASSERT_EQ(c.instance_group_size(), 1);
  EXPECT_EQ(c.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);
  EXPECT_EQ(c.instance_group(0).count(), 1);
  EXPECT_TRUE(c.has_dynamic_batching());
}

TEST(ModelConfigTest, DefaultInstanceGroupIsOneCpuInstance) {
  inference::ModelConfig c = Parse(kMinimal);
  ASSERT_OK(Validate(&c, "m"));
  ASSERT_EQ(c.instance_group_size(), 1);
  EXPECT_EQ(c.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);
  EXPECT_EQ(c.instance_group(0).count(), 1);
  EXPECT_EQ(c.instance_group(0).name(), "m_0");
}

TEST(ModelConfigTest, DynamicBatchingWithPriorityLevelsAndQueuePolicy) {
  inference::ModelConfig c = Parse(Minimal(R"cfg(
dynamic_batching {
  max_queue_delay_microseconds: 500
  priority_levels: 3
  default_priority_level: 2
  default_queue_policy {
    timeout_action: DELAY
    default_timeout_microseconds: 1000
    allow_timeout_override: true
    max_queue_size: 16
  }
  priority_queue_policy { key: 1 value: { max_queue_size: 4 } }
  priority_queue_policy { key: 3 value: { timeout_action: REJECT default_timeout_microseconds: 10 } }
}
)cfg"));
  ASSERT_OK(Validate(&c, "m"));
  const auto& db = c.dynamic_batching();
  EXPECT_EQ(db.priority_levels(), 3u);
  EXPECT_EQ(db.default_priority_level(), 2u);
  EXPECT_EQ(db.default_queue_policy().timeout_action(), inference::ModelQueuePolicy::DELAY);
  EXPECT_EQ(db.default_queue_policy().default_timeout_microseconds(), 1000u);
  EXPECT_EQ(db.default_queue_policy().max_queue_size(), 16u);
  EXPECT_TRUE(db.default_queue_policy().allow_timeout_override());
  ASSERT_EQ(db.priority_queue_policy().size(), 2u);
  EXPECT_EQ(db.priority_queue_policy().at(1).max_queue_size(), 4u);
  EXPECT_EQ(db.priority_queue_policy().at(3).default_timeout_microseconds(), 10u);
}

TEST(ModelConfigTest, PriorityLevelErrors) {
  Status s = ParseAndValidate(
      Minimal("dynamic_batching { priority_levels: 2 default_priority_level: 3 }"));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("default_priority_level 3 must be in [1, priority_levels = 2]"));

  s = ParseAndValidate(Minimal("dynamic_batching { priority_levels: 2 }"));
  EXPECT_THAT(s.message(), HasSubstr("default_priority_level 0"));

  s = ParseAndValidate(Minimal(R"cfg(
dynamic_batching {
  priority_levels: 2
  default_priority_level: 1
  priority_queue_policy { key: 5 value: {} }
})cfg"));
  EXPECT_THAT(s.message(), HasSubstr("priority_queue_policy level 5"));

  s = ParseAndValidate(Minimal("dynamic_batching { priority_levels: 4294967296 }"));
  EXPECT_THAT(s.message(), HasSubstr("priority_levels 4294967296 exceeds"));

  s = ParseAndValidate(Minimal("dynamic_batching { max_queue_delay_microseconds: 1000000000001 }"));
  EXPECT_THAT(s.message(), HasSubstr("max_queue_delay_microseconds is 1000000000001"));

  // Without priority levels, Triton ignores the per-level settings; so does dais, with a warning.
  std::vector<std::string> warnings;
  s = ParseAndValidate(Minimal("dynamic_batching { priority_queue_policy { key: 1 value: {} } }"),
                       &warnings);
  EXPECT_OK(s);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("'dynamic_batching.priority_queue_policy' is ignored"));
}

TEST(ModelConfigTest, PreferredBatchSizeAboveMaxIsAnError) {
  Status s = ParseAndValidate(Minimal("dynamic_batching { preferred_batch_size: [ 2, 16 ] }"));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("preferred_batch_size 16 must be in [1, max_batch_size = 4]"));
  s = ParseAndValidate(Minimal("dynamic_batching { preferred_batch_size: [ 0 ] }"));
  EXPECT_THAT(s.message(), HasSubstr("preferred_batch_size 0"));
}

std::string Param(std::string_view key, std::string_view value) {
  return "parameters { key: \"" + std::string(key) + "\" value: { string_value: \"" +
         std::string(value) + "\" } }\n";
}

TEST(ModelConfigTest, BatchingParameters) {
  EXPECT_OK(
      ParseAndValidate(Minimal("dynamic_batching { }\n" + Param("batching_policy", "adaptive") +
                               Param("latency_target_microseconds", "5000") +
                               Param("inline_execution_max_microseconds", "0"))));
  EXPECT_OK(ParseAndValidate(Minimal(Param("batching_policy", "triton"))));
  Status s = ParseAndValidate(Minimal("dynamic_batching { }\n" + Param("batching_policy", "aimd")));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("parameters batching_policy: 'aimd' is not a policy; use \"triton\" or "
                        "\"adaptive\""));
  s = ParseAndValidate(Minimal(Param("batching_policy", "adaptive")));
  EXPECT_THAT(s.message(), HasSubstr("\"adaptive\" needs dynamic_batching"));
  s = ParseAndValidate(
      Minimal("dynamic_batching { }\n" + Param("latency_target_microseconds", "5ms")));
  EXPECT_THAT(s.message(), HasSubstr("parameters latency_target_microseconds: '5ms' is not a whole "
                                     "number of microseconds"));
  s = ParseAndValidate(Minimal(Param("inline_execution_max_microseconds", "-1")));
  EXPECT_THAT(s.message(), HasSubstr("'-1' is not a whole number"));
  s = ParseAndValidate(Minimal(Param("latency_target_microseconds", "99999999999999")));
  EXPECT_THAT(s.message(), HasSubstr("latency_target_microseconds is 99999999999999"));
}

TEST(ModelConfigTest, DynamicBatchingNeedsBatching) {
  Status s = ParseAndValidate(R"cfg(
backend: "fil"
max_batch_size: 0
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching {}
)cfg");
  EXPECT_THAT(s.message(), HasSubstr("dynamic_batching requires max_batch_size > 0"));
  EXPECT_THAT(ParseAndValidate(
                  std::string(kMinimal).replace(std::string(kMinimal).find("max_batch_size: 4"), 17,
                                                "max_batch_size: -1"))
                  .message(),
              HasSubstr("max_batch_size must be >= 0"));
}

TEST(ModelConfigTest, VersionPolicies) {
  inference::ModelConfig c = Parse(Minimal("version_policy: { latest: { num_versions: 2 } }"));
  ASSERT_OK(Validate(&c, "m"));
  EXPECT_THAT(SelectVersions(c.version_policy(), {3, 1, 7, 5}), ElementsAre(5, 7));
  EXPECT_THAT(SelectVersions(c.version_policy(), {4}), ElementsAre(4));
  EXPECT_THAT(SelectVersions(c.version_policy(), {}), IsEmpty());

  c = Parse(Minimal("version_policy: { all: {} }"));
  ASSERT_OK(Validate(&c, "m"));
  EXPECT_THAT(SelectVersions(c.version_policy(), {3, 1, 3, 2}), ElementsAre(1, 2, 3));

  c = Parse(Minimal("version_policy: { specific: { versions: [ 1, 3, 9 ] } }"));
  ASSERT_OK(Validate(&c, "m"));
  EXPECT_THAT(SelectVersions(c.version_policy(), {4, 3, 2, 1}), ElementsAre(1, 3));

  // Unset, and num_versions 0, mean the single latest version.
  EXPECT_THAT(SelectVersions(inference::ModelVersionPolicy(), {2, 10, 9}), ElementsAre(10));
  inference::ModelVersionPolicy zero;
  zero.mutable_latest();
  EXPECT_THAT(SelectVersions(zero, {2, 10, 9}), ElementsAre(10));
}

TEST(ModelConfigTest, VersionPolicyErrors) {
  EXPECT_THAT(ParseAndValidate(Minimal("version_policy: { specific: {} }")).message(),
              HasSubstr("at least one version"));
  EXPECT_THAT(ParseAndValidate(Minimal("version_policy: { specific: { versions: 0 } }")).message(),
              HasSubstr("version 0 must be >= 1"));
}

TEST(ModelConfigTest, UnknownFieldErrorNamesFieldAndLine) {
  auto c = ParseModelConfig("name: \"m\"\nmax_batch_size: 1\n  max_batch_sise: 4\n", kPath);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("models/resnet/config.pbtxt:3:"));
  EXPECT_THAT(c.status().message(), HasSubstr("no field named \"max_batch_sise\""));

  c = ParseModelConfig("input { data_type: TYPE_FLOAT32 }", kPath);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("models/resnet/config.pbtxt:1:"));
  EXPECT_THAT(c.status().message(), HasSubstr("TYPE_FLOAT32"));
}

TEST(ModelConfigTest, SyntaxErrorHasLineAndColumn) {
  auto c = ParseModelConfig("name: \"m\"\ninput [ { name: \"x\" dims: [ 1, ] } ]\n", kPath);
  ASSERT_FALSE(c.ok());
  // Protobuf points at the token after the trailing comma: line 2, column 32.
  EXPECT_THAT(c.status().message(), HasSubstr("models/resnet/config.pbtxt:2:32: "));

  c = ParseModelConfig("name: \"a\"\nname: \"b\"\n", kPath);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr(":2:"));
  EXPECT_THAT(c.status().message(), HasSubstr("specified multiple times"));
}

TEST(ModelConfigTest, InvalidUtf8IsAnError) {
  auto c = ParseModelConfig("name: \"\\xff\"", kPath);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("field 'name' is not valid UTF-8"));
}

TEST(ModelConfigTest, RejectedFields) {
  struct Case {
    std::string extra;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"sequence_batching {}", "sequence_batching"},
      {R"cfg(ensemble_scheduling { step [ { model_name: "a" model_version: -1 } ] })cfg",
       "ensemble_scheduling"},
      {"model_transaction_policy { decoupled: true }", "model_transaction_policy.decoupled"},
      {R"cfg(batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "n" source_input: "x" } ])cfg",
       "batch_input"},
      {R"cfg(model_repository_agents { agents [ { name: "checksum" } ] })cfg",
       "model_repository_agents"},
      {R"cfg(model_operations { op_library_filename: "libops.so" })cfg", "model_operations"},
      {"instance_group [ { kind: KIND_GPU } ]", "instance_group[0].kind"},
      {"instance_group [ { kind: KIND_MODEL } ]", "instance_group[0].kind"},
      {R"cfg(instance_group [ { profile: "0" } ])cfg", "instance_group[0].profile"},
      {R"cfg(runtime: "model.py")cfg", "runtime"},
  };
  for (const Case& c : cases) {
    Status s = ParseAndValidate(Minimal(c.extra));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.extra;
    EXPECT_THAT(s.message(), HasSubstr(std::string(kPath) + ": field '" + c.field +
                                       "' is not supported by dais"))
        << c.extra;
  }
  Status s = ParseAndValidate(R"cfg(
backend: "pytorch"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] allow_ragged_batch: true } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 1 ] } ]
)cfg");
  EXPECT_THAT(s.message(), HasSubstr("field 'input[0].allow_ragged_batch' is not supported"));
}

TEST(ModelConfigTest, GpuAllowedWhenBuiltWithGpu) {
  inference::ModelConfig c = Parse(Minimal("instance_group [ { kind: KIND_GPU gpus: [ 0, 1 ] } ]"));
  EXPECT_OK(Validate(&c, "m", nullptr, /*allow_gpu=*/true));
  EXPECT_EQ(c.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_GPU);
  EXPECT_THAT(c.instance_group(0).gpus(), ElementsAre(0, 1));

  EXPECT_THAT(
      ParseAndValidate(Minimal("instance_group [ { kind: KIND_CPU gpus: [ 0 ] } ]")).message(),
      HasSubstr("KIND_CPU and must not list 'gpus'"));
  EXPECT_THAT(ParseAndValidate(Minimal("instance_group [ { count: 1025 } ]")).message(),
              HasSubstr("more than 1024 instances"));
}

TEST(ModelConfigTest, IgnoredFieldsWarn) {
  std::vector<std::string> warnings;
  Status s = ParseAndValidate(Minimal(R"cfg(
optimization { execution_accelerators { cpu_execution_accelerator [ { name: "openvino" } ] } }
metric_tags { key: "team" value: "search" }
response_cache { enable: true }
instance_group [ { kind: KIND_AUTO gpus: [ 0 ] rate_limiter { priority: 2 } } ]
)cfg"),
                              &warnings);
  ASSERT_OK(s);
  std::string all = Joined(warnings);
  EXPECT_EQ(warnings.size(), 5u) << all;
  EXPECT_THAT(all, HasSubstr("field 'optimization' is ignored by dais"));
  EXPECT_THAT(all, HasSubstr("field 'metric_tags' is ignored by dais"));
  EXPECT_THAT(all, HasSubstr("field 'response_cache' is ignored by dais"));
  EXPECT_THAT(all, HasSubstr("field 'instance_group[0].rate_limiter' is ignored by dais"));
  EXPECT_THAT(all, HasSubstr("KIND_AUTO, which dais places on CPU"));

  warnings.clear();
  s = ParseAndValidate(R"cfg(
backend: "pytorch"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] optional: true } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 1 ] label_filename: "labels.txt" } ]
dynamic_batching { preserve_ordering: true }
)cfg",
                       &warnings);
  ASSERT_OK(s);
  all = Joined(warnings);
  EXPECT_EQ(warnings.size(), 3u) << all;
  EXPECT_THAT(all, HasSubstr("field 'input[0].optional' is ignored by dais"));
  EXPECT_THAT(all, HasSubstr("field 'output[0].label_filename' is ignored by dais"));
  EXPECT_THAT(all, HasSubstr("field 'dynamic_batching.preserve_ordering' is ignored by dais"));
}

TEST(ModelConfigTest, NameMismatchIsAnError) {
  inference::ModelConfig c = Parse(kPytorchConfig);
  Status s = Validate(&c, "resnet50");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("model name 'resnet' differs from its directory name 'resnet50'"));
}

TEST(ModelConfigTest, PlatformAndBackendChecks) {
  EXPECT_THAT(ParseAndValidate(R"cfg(
max_batch_size: 1
input [ { name: "x" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 1 ] } ]
)cfg")
                  .message(),
              HasSubstr("must specify 'platform' or 'backend'"));
  std::string onnx = kMinimal;
  onnx.replace(onnx.find("pytorch"), 7, "onnxruntime");
  EXPECT_THAT(ParseAndValidate(onnx).message(),
              HasSubstr("backend 'onnxruntime' is not supported"));
  EXPECT_THAT(ParseAndValidate(Minimal(R"cfg(platform: "tensorflow_savedmodel")cfg")).message(),
              HasSubstr("platform 'tensorflow_savedmodel' is not supported"));
  EXPECT_THAT(ParseAndValidate(
                  R"cfg(platform: "pytorch_libtorch" backend: "fil" max_batch_size: 1
                        input [ { name: "x" data_type: TYPE_FP32 dims: [ 1 ] } ]
                        output [ { name: "y" data_type: TYPE_FP32 dims: [ 1 ] } ])cfg")
                  .message(),
              HasSubstr("requires backend 'pytorch'"));
  inference::ModelConfig c = Parse(Minimal(R"cfg(runtime: "libtriton_pytorch.so")cfg"));
  EXPECT_OK(Validate(&c, "m"));
}

// Validates a config with the given input list and output list; returns the error message.
std::string TensorError(
    std::string_view inputs,
    std::string_view outputs = R"cfg({ name: "y" data_type: TYPE_FP32 dims: [ 1 ] })cfg") {
  return ParseAndValidate("backend: \"pytorch\" max_batch_size: 2 input [" + std::string(inputs) +
                          "] output [" + std::string(outputs) + "]")
      .message();
}

TEST(ModelConfigTest, TensorChecks) {
  EXPECT_THAT(TensorError(R"cfg({ name: "x" data_type: TYPE_FP32 dims: [ 0 ] })cfg"),
              HasSubstr("each dimension must be >= 1"));
  EXPECT_THAT(TensorError(R"cfg({ name: "x" data_type: TYPE_FP32 })cfg"),
              HasSubstr("must specify 'dims'"));
  EXPECT_THAT(TensorError(R"cfg({ name: "x" dims: [ 1 ] })cfg"), HasSubstr("valid 'data_type'"));
  EXPECT_THAT(TensorError(R"cfg({ data_type: TYPE_FP32 dims: [ 1 ] })cfg"),
              HasSubstr("must specify 'name'"));
  EXPECT_THAT(TensorError(R"cfg({ name: "x" data_type: TYPE_FP32 dims: [ 1 ] },
                                { name: "x" data_type: TYPE_FP32 dims: [ 2 ] })cfg"),
              HasSubstr("input 'x' is declared more than once"));
  EXPECT_THAT(
      TensorError(
          R"cfg({ name: "x" data_type: TYPE_FP32 dims: [ 4 ] reshape: { shape: [ 3 ] } })cfg"),
      HasSubstr("not compatible with dims"));
  EXPECT_THAT(
      TensorError(
          R"cfg({ name: "x" data_type: TYPE_FP32 dims: [ -1, 4 ] reshape: { shape: [ 4 ] } })cfg"),
      HasSubstr("not compatible with dims"));
  EXPECT_THAT(
      TensorError(R"cfg({ name: "x" data_type: TYPE_FP32 format: FORMAT_NHWC dims: [ 4 ] })cfg"),
      HasSubstr("must have 3 dims"));
  EXPECT_THAT(
      TensorError(R"cfg({ name: "x" data_type: TYPE_FP32 dims: [ 9223372036854775807, 2 ] })cfg"),
      HasSubstr("too many elements"));
  EXPECT_THAT(TensorError(R"cfg({ name: "x" data_type: TYPE_FP32 dims: [ 1 ] })cfg",
                          R"cfg({ name: "y" data_type: TYPE_FP32 dims: [ 1 ] },
                                { name: "y" data_type: TYPE_FP32 dims: [ 1 ] })cfg"),
              HasSubstr("output 'y' is declared more than once"));
  // Compatible reshapes, including the documented scalar-per-item form.
  EXPECT_TRUE(ParseAndValidate(R"cfg(
backend: "pytorch"
max_batch_size: 2
input [
  { name: "a" data_type: TYPE_FP32 dims: [ 1 ] reshape: { shape: [] } },
  { name: "b" data_type: TYPE_INT64 dims: [ 2, -1, 6 ] reshape: { shape: [ 1, 2, -1, 3, 2 ] } }
]
output [ { name: "y" data_type: TYPE_FP32 dims: [ -1 ] } ]
)cfg")
                  .ok());
  // ... but an empty reshape needs batching.
  EXPECT_THAT(ParseAndValidate(R"cfg(
backend: "pytorch"
input [ { name: "a" data_type: TYPE_FP32 dims: [ 1 ] reshape: { shape: [] } } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 1 ] } ]
)cfg")
                  .message(),
              HasSubstr("cannot have an empty reshape when max_batch_size is 0"));
}

TEST(ModelConfigTest, WarmupChecks) {
  auto warmup_error = [](std::string_view samples) {
    return ParseAndValidate(Minimal("model_warmup [" + std::string(samples) + "]")).message();
  };
  EXPECT_TRUE(ParseAndValidate(Minimal(R"cfg(
model_warmup [ {
  name: "zeros" batch_size: 4 count: 2
  inputs { key: "x" value: { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } }
} ])cfg"))
                  .ok());
  EXPECT_THAT(warmup_error(R"cfg({ name: "big" batch_size: 5
      inputs { key: "x" value: { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } })cfg"),
              HasSubstr("batch_size 5 exceeds 4"));
  EXPECT_THAT(warmup_error(R"cfg({ name: "w" batch_size: 1
      inputs { key: "z" value: { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } })cfg"),
              HasSubstr("input 'z' is not a model input"));
  EXPECT_THAT(warmup_error(R"cfg({ name: "w" batch_size: 1
      inputs { key: "x" value: { data_type: TYPE_INT32 dims: [ 4 ] zero_data: true } } })cfg"),
              HasSubstr("has data_type TYPE_INT32, the model input has TYPE_FP32"));
  EXPECT_THAT(warmup_error(R"cfg({ name: "w" batch_size: 1
      inputs { key: "x" value: { data_type: TYPE_FP32 dims: [ 5 ] random_data: true } } })cfg"),
              HasSubstr("do not match"));
  EXPECT_THAT(warmup_error(R"cfg({ name: "w" batch_size: 1
      inputs { key: "x" value: { data_type: TYPE_FP32 dims: [ 4 ] } } })cfg"),
              HasSubstr("must set one of zero_data, random_data or input_data_file"));
  EXPECT_THAT(warmup_error(R"cfg({ name: "w" batch_size: 1 })cfg"),
              HasSubstr("gives no data for input 'x'"));
  EXPECT_THAT(warmup_error(R"cfg({ name: "w" batch_size: 1
      inputs { key: "x" value: { data_type: TYPE_FP32 dims: [ 4 ]
                                 input_data_file: "../../etc/passwd" } } })cfg"),
              HasSubstr("must be a relative path inside the model directory"));

  // Triton skips batch-0 samples; dais removes them so that no consumer runs them.
  inference::ModelConfig c = Parse(Minimal(R"cfg(
model_warmup [
  { name: "noop" },
  { name: "one" batch_size: 1
    inputs { key: "x" value: { data_type: TYPE_FP32 dims: [ 4 ] random_data: true } } }
])cfg"));
  std::vector<std::string> warnings;
  ASSERT_OK(Validate(&c, "m", &warnings));
  ASSERT_EQ(c.model_warmup_size(), 1);
  EXPECT_EQ(c.model_warmup(0).name(), "one");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("'noop' has batch_size 0 and is removed"));
}

TEST(ModelConfigTest, JsonHasNumbersAndEnumNames) {
  inference::ModelConfig c = Parse(kPytorchConfig);
  ASSERT_OK(Validate(&c, "resnet"));
  c.mutable_dynamic_batching()->set_priority_levels(2);
  c.mutable_dynamic_batching()->set_default_priority_level(1);
  (*c.mutable_dynamic_batching()->mutable_priority_queue_policy())[2].set_max_queue_size(3);
  const std::string json = ModelConfigToJson(c);
  EXPECT_THAT(json, HasSubstr(R"("name":"resnet","platform":"pytorch_libtorch")"));
  EXPECT_THAT(json, HasSubstr(R"("max_batch_size":8)"));
  EXPECT_THAT(json, HasSubstr(R"("data_type":"TYPE_FP32")"));
  EXPECT_THAT(json, HasSubstr(R"("format":"FORMAT_NCHW","dims":[3,224,224])"));
  EXPECT_THAT(json, HasSubstr(R"("dims":[1000])"));
  EXPECT_THAT(json, HasSubstr(R"("max_queue_delay_microseconds":100)"));
  EXPECT_THAT(json, HasSubstr(R"("version_policy":{"latest":{"num_versions":1}})"));
  EXPECT_THAT(json, HasSubstr(R"("kind":"KIND_CPU")"));
  EXPECT_THAT(json, HasSubstr(R"("parameters":{"INFERENCE_MODE":{"string_value":"true"}})"));
  EXPECT_THAT(json, HasSubstr(R"("priority_queue_policy":{"2":{"timeout_action":"REJECT")"));
  // Defaults are present; unset messages and unselected oneof members are not.
  EXPECT_THAT(json, HasSubstr(R"("is_shape_tensor":false)"));
  EXPECT_THAT(json, HasSubstr(R"("label_filename":"")"));
  EXPECT_THAT(json, HasSubstr(R"("batch_input":[])"));
  EXPECT_THAT(json, HasSubstr(R"("metric_tags":{})"));
  EXPECT_THAT(json, Not(HasSubstr("sequence_batching")));
  EXPECT_THAT(json, Not(HasSubstr("optimization")));
  EXPECT_THAT(json, Not(HasSubstr("\"reshape\"")));

  rapidjson::Document doc;
  ASSERT_FALSE(doc.Parse(json.c_str()).HasParseError());
  ASSERT_TRUE(doc["input"][0]["dims"][1].IsInt64());
  EXPECT_EQ(doc["input"][0]["dims"][1].GetInt64(), 224);
  EXPECT_TRUE(doc["dynamic_batching"]["priority_levels"].IsUint64());
}

TEST(ModelConfigTest, JsonLargeIntegersFloatsAndMapOrder) {
  inference::ModelConfig c;
  c.add_input()->add_dims(int64_t{1} << 40);
  auto* db = c.mutable_dynamic_batching();
  db->set_max_queue_delay_microseconds(UINT64_MAX);
  (*db->mutable_priority_queue_policy())[10];
  (*db->mutable_priority_queue_policy())[9];
  (*c.mutable_metric_tags())["b"] = "2";
  (*c.mutable_metric_tags())["a"] = "1";
  const std::string json = ModelConfigToJson(c);
  EXPECT_THAT(json, HasSubstr(R"("dims":[1099511627776])"));
  EXPECT_THAT(json, HasSubstr(R"("max_queue_delay_microseconds":18446744073709551615)"));
  EXPECT_THAT(json, HasSubstr(R"("priority_queue_policy":{"9":{)"));
  EXPECT_THAT(json, HasSubstr(R"("metric_tags":{"a":"1","b":"2"})"));

  inference::ModelSequenceBatching seq;
  seq.mutable_direct()->set_minimum_slot_utilization(0.1f);
  EXPECT_THAT(ModelConfigToJson(seq), HasSubstr(R"("minimum_slot_utilization":0.1})"));
  inference::ModelSequenceBatching::Control control;
  control.add_fp32_false_true(std::numeric_limits<float>::quiet_NaN());
  control.add_fp32_false_true(1.0f);
  control.add_fp32_false_true(-std::numeric_limits<float>::infinity());
  EXPECT_THAT(ModelConfigToJson(control), HasSubstr(R"("fp32_false_true":["NaN",1,"-Infinity"])"));
}

TEST(ModelConfigTest, JsonReplacesInvalidUtf8) {
  inference::ModelConfig c;
  c.set_name(
      "a\xff"
      "b");
  EXPECT_THAT(ModelConfigToJson(c), HasSubstr("\"name\":\"a\xEF\xBF\xBD"
                                              "b\""));
}

}  // namespace
}  // namespace dais::runtime
