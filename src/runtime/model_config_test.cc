#include "runtime/model_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <limits>
#include <string>
#include <vector>

namespace dais {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr char kPath[] = "models/resnet/config.pbtxt";

// A Triton PyTorch config as people write them.
constexpr char kPytorchConfig[] = R"pb(
  name: "resnet"
  platform: "pytorch_libtorch"
  max_batch_size: 8 input
  [ {
    name: "INPUT__0"
    data_type: TYPE_FP32
    format: FORMAT_NCHW
    dims: [ 3, 224, 224 ]
  }] output
  [ {
    name: "OUTPUT__0"
    data_type: TYPE_FP32
    dims: [ 1000 ]
    label_filename: "labels.txt"
  }] instance_group
  [ { count: 2 kind: KIND_CPU }]
  dynamic_batching {
    preferred_batch_size: [ 4, 8 ]
    max_queue_delay_microseconds: 100
  }
  parameters: {
    key: "INFERENCE_MODE"
    value: { string_value: "true" }
  }
)pb";

// A Triton FIL (tree model) config.
constexpr char kFilConfig[] = R"pb(
  backend: "fil"
  max_batch_size: 32768 input
  [ {
    name: "input__0"
    data_type: TYPE_FP32
    dims: [ 16 ]
  }] output
  [ {
    name: "output__0"
    data_type: TYPE_FP32
    dims: [ 2 ]
  }] instance_group
  [ { kind: KIND_AUTO }] parameters
  [ {
    key: "model_type"
    value: { string_value: "xgboost_json" }
  }
    , {
      key: "output_class"
      value: { string_value: "true" }
    }
    , {
      key: "predict_proba"
      value: { string_value: "true" }
    }
    , {
      key: "threshold"
      value: { string_value: "0.5" }
    }]
  dynamic_batching {}
)pb";

inference::ModelConfig Parse(std::string_view text) {
  auto config = ParseModelConfig(text, kPath);
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return config.ok() ? *config : inference::ModelConfig();
}

Status Validate(inference::ModelConfig* config, const std::string& dir = "resnet",
                std::vector<std::string>* warnings = nullptr, bool allow_gpu = false) {
  std::vector<std::string> ignored;
  return ValidateModelConfig(config, kPath, dir, allow_gpu, warnings ? warnings : &ignored);
}

// Parses and validates `text` (named for directory `dir`); returns the status.
Status ParseAndValidate(std::string_view text, const std::string& dir = "m",
                        std::vector<std::string>* warnings = nullptr) {
  auto config = ParseModelConfig(text, kPath);
  if (!config.ok()) return config.status();
  return Validate(&*config, dir, warnings);
}

constexpr char kMinimal[] = R"pb(
  backend: "pytorch"
  max_batch_size: 4 input
  [ {
    name: "x"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }] output
  [ {
    name: "y"
    data_type: TYPE_FP32
    dims: [ 1 ]
  }]
)pb";

std::string Minimal(std::string_view extra) { return std::string(kMinimal) + std::string(extra); }

TEST(ModelConfigTest, ParsesAndValidatesPytorchConfig) {
  inference::ModelConfig c = Parse(kPytorchConfig);
  std::vector<std::string> warnings;
  ASSERT_TRUE(Validate(&c, "resnet", &warnings).ok());
  EXPECT_THAT(warnings, IsEmpty());
  EXPECT_EQ(c.name(), "resnet");
  EXPECT_EQ(c.backend(), "pytorch");
  EXPECT_EQ(c.platform(), "pytorch_libtorch");
  EXPECT_EQ(c.max_batch_size(), 8);
  ASSERT_EQ(c.input_size(), 1);
  EXPECT_EQ(c.input(0).data_type(), inference::TYPE_FP32);
  EXPECT_THAT(c.input(0).dims(), ElementsAre(3, 224, 224));
  EXPECT_EQ(c.output(0).label_filename(), "labels.txt");
  ASSERT_EQ(c.instance_group_size(), 1);
  EXPECT_EQ(c.instance_group(0).count(), 2);
  EXPECT_EQ(c.instance_group(0).name(), "resnet_0");
  EXPECT_THAT(c.dynamic_batching().preferred_batch_size(), ElementsAre(4, 8));
  EXPECT_EQ(c.dynamic_batching().max_queue_delay_microseconds(), 100u);
  EXPECT_EQ(ConfigParameter(c, "INFERENCE_MODE"), "true");
  EXPECT_EQ(ConfigParameter(c, "absent"), "");
  // Defaults.
  ASSERT_TRUE(c.version_policy().has_latest());
  EXPECT_EQ(c.version_policy().latest().num_versions(), 1u);
}

TEST(ModelConfigTest, ParsesAndValidatesFilConfig) {
  inference::ModelConfig c = Parse(kFilConfig);
  ASSERT_TRUE(Validate(&c, "trees").ok());
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
  ASSERT_TRUE(Validate(&c, "m").ok());
  ASSERT_EQ(c.instance_group_size(), 1);
  EXPECT_EQ(c.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);
  EXPECT_EQ(c.instance_group(0).count(), 1);
  EXPECT_EQ(c.instance_group(0).name(), "m_0");
}

TEST(ModelConfigTest, DynamicBatchingWithPriorityLevelsAndQueuePolicy) {
  inference::ModelConfig c = Parse(Minimal(R"pb(
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
      priority_queue_policy {
        key: 1
        value: { max_queue_size: 4 }
      }
      priority_queue_policy {
        key: 3
        value: { timeout_action: REJECT default_timeout_microseconds: 10 }
      }
    })pb"));
  ASSERT_TRUE(Validate(&c, "m").ok());
  const auto& db = c.dynamic_batching();
  EXPECT_EQ(db.priority_levels(), 3u);
  EXPECT_EQ(db.default_priority_level(), 2u);
  EXPECT_EQ(db.default_queue_policy().timeout_action(), inference::ModelQueuePolicy::DELAY);
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

  s = ParseAndValidate(Minimal(R"pb(dynamic_batching {
                                      priority_levels: 2
                                      default_priority_level: 1
                                      priority_queue_policy {
                                        key: 5
                                        value: {}
                                      }
                                    })pb"));
  EXPECT_THAT(s.message(), HasSubstr("priority_queue_policy level 5"));

  std::vector<std::string> warnings;
  s = ParseAndValidate(Minimal("dynamic_batching { priority_queue_policy { key: 1 value: {} } }"),
                       "m", &warnings);
  EXPECT_TRUE(s.ok()) << s.ToString();
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

TEST(ModelConfigTest, DynamicBatchingNeedsBatching) {
  Status s = ParseAndValidate(R"pb(
    backend: "fil"
    max_batch_size: 0 input
    [ {
      name: "x"
      data_type: TYPE_FP32
      dims: [ 4 ]
    }] output
    [ {
      name: "y"
      data_type: TYPE_FP32
      dims: [ 1 ]
    }]
    dynamic_batching {}
  )pb");
  EXPECT_THAT(s.message(), HasSubstr("dynamic_batching requires max_batch_size > 0"));
}

TEST(ModelConfigTest, VersionPolicies) {
  inference::ModelConfig c = Parse(Minimal("version_policy: { latest: { num_versions: 2 } }"));
  ASSERT_TRUE(Validate(&c, "m").ok());
  EXPECT_THAT(SelectVersions(c.version_policy(), {3, 1, 7, 5}), ElementsAre(5, 7));
  EXPECT_THAT(SelectVersions(c.version_policy(), {4}), ElementsAre(4));
  EXPECT_THAT(SelectVersions(c.version_policy(), {}), IsEmpty());

  c = Parse(Minimal("version_policy: { all: {} }"));
  ASSERT_TRUE(Validate(&c, "m").ok());
  EXPECT_THAT(SelectVersions(c.version_policy(), {3, 1, 3, 2}), ElementsAre(1, 2, 3));

  c = Parse(Minimal("version_policy: { specific: { versions: [ 1, 3, 9 ] } }"));
  ASSERT_TRUE(Validate(&c, "m").ok());
  EXPECT_THAT(SelectVersions(c.version_policy(), {1, 2, 3, 4}), ElementsAre(1, 3));

  // Unset and num_versions 0 mean the single latest version.
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
  EXPECT_THAT(c.status().message(), HasSubstr("max_batch_sise"));
}

TEST(ModelConfigTest, SyntaxErrorHasLineAndColumn) {
  auto c = ParseModelConfig("name: \"m\"\ninput [ { name: \"x\" dims: [ 1, ] } ]\n", kPath);
  ASSERT_FALSE(c.ok());
  // Protobuf points at the token after the trailing comma: line 2, column 32.
  EXPECT_THAT(c.status().message(), HasSubstr("models/resnet/config.pbtxt:2:32: "));

  c = ParseModelConfig("input { data_type: TYPE_FLOAT32 }", kPath);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("models/resnet/config.pbtxt:1:"));
  EXPECT_THAT(c.status().message(), HasSubstr("TYPE_FLOAT32"));
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
      {R"pb(ensemble_scheduling { step
                                  [ { model_name: "a" model_version: -1 }] })pb",
       "ensemble_scheduling"},
      {"model_transaction_policy { decoupled: true }", "model_transaction_policy.decoupled"},
      {R"pb(batch_input
            [ { kind: BATCH_ELEMENT_COUNT target_name: "n" source_input: "x" }])pb",
       "batch_input"},
      {R"pb(model_repository_agents { agents
                                      [ { name: "checksum" }] })pb",
       "model_repository_agents"},
      {R"pb(model_operations { op_library_filename: "libops.so" })pb", "model_operations"},
      {"instance_group [ { kind: KIND_GPU } ]", "instance_group[0].kind"},
      {"instance_group [ { kind: KIND_MODEL } ]", "instance_group[0].kind"},
      {R"pb(instance_group
            [ { profile: "0" }])pb",
       "instance_group[0].profile"},
      {R"pb(runtime: "model.py")pb", "runtime"},
  };
  for (const Case& c : cases) {
    Status s = ParseAndValidate(Minimal(c.extra));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.extra;
    EXPECT_THAT(s.message(), HasSubstr(std::string(kPath) + ": field '" + c.field +
                                       "' is not supported by dais"))
        << c.extra;
  }
  Status s = ParseAndValidate(R"pb(
    backend: "pytorch"
    max_batch_size: 4 input
    [ {
      name: "x"
      data_type: TYPE_FP32
      dims: [ 4 ]
      allow_ragged_batch: true
    }] output
    [ {
      name: "y"
      data_type: TYPE_FP32
      dims: [ 1 ]
    }])pb");
  EXPECT_THAT(s.message(), HasSubstr("field 'input[0].allow_ragged_batch' is not supported"));
}

TEST(ModelConfigTest, GpuAllowedWhenBuiltWithGpu) {
  inference::ModelConfig c = Parse(Minimal("instance_group [ { kind: KIND_GPU gpus: [ 0, 1 ] } ]"));
  std::vector<std::string> warnings;
  EXPECT_TRUE(Validate(&c, "m", &warnings, /*allow_gpu=*/true).ok());
  EXPECT_EQ(c.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_GPU);
}

TEST(ModelConfigTest, IgnoredFieldsWarn) {
  std::vector<std::string> warnings;
  Status s = ParseAndValidate(Minimal(R"pb(
                                optimization {
                                  execution_accelerators { cpu_execution_accelerator
                                                           [ { name: "openvino" }] }
                                }
                                metric_tags { key: "team" value: "search" }
                                response_cache { enable: true } instance_group
                                [ {
                                  kind: KIND_AUTO
                                  gpus: [ 0 ]
                                  rate_limiter { priority: 2 }
                                }]
                              )pb"),
                              "m", &warnings);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::string all;
  for (const auto& w : warnings) all += w + "\n";
  EXPECT_EQ(warnings.size(), 5u) << all;
  EXPECT_THAT(all, HasSubstr("field 'optimization' is ignored by dais"));
  EXPECT_THAT(all, HasSubstr("field 'metric_tags' is ignored by dais"));
  EXPECT_THAT(all, HasSubstr("field 'response_cache' is ignored by dais"));
  EXPECT_THAT(all, HasSubstr("field 'instance_group[0].rate_limiter' is ignored by dais"));
  EXPECT_THAT(all, HasSubstr("KIND_AUTO"));
}

TEST(ModelConfigTest, NameMismatchIsAnError) {
  inference::ModelConfig c = Parse(kPytorchConfig);
  Status s = Validate(&c, "resnet50");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("model name 'resnet' differs from its directory name 'resnet50'"));
}

TEST(ModelConfigTest, PlatformAndBackendChecks) {
  EXPECT_THAT(ParseAndValidate(R"pb(max_batch_size: 1 input
                                    [ {
                                      name: "x"
                                      data_type: TYPE_FP32
                                      dims: [ 1 ]
                                    }] output
                                    [ {
                                      name: "y"
                                      data_type: TYPE_FP32
                                      dims: [ 1 ]
                                    }])pb")
                  .message(),
              HasSubstr("must specify 'platform' or 'backend'"));
  std::string onnx = kMinimal;
  onnx.replace(onnx.find("pytorch"), 7, "onnxruntime");
  EXPECT_THAT(ParseAndValidate(onnx).message(),
              HasSubstr("backend 'onnxruntime' is not supported"));
  EXPECT_THAT(ParseAndValidate(Minimal(R"pb(platform: "tensorflow_savedmodel")pb")).message(),
              HasSubstr("platform 'tensorflow_savedmodel' is not supported"));
  inference::ModelConfig c = Parse(Minimal(R"pb(runtime: "libtriton_pytorch.so")pb"));
  EXPECT_TRUE(Validate(&c, "m").ok());
}

TEST(ModelConfigTest, TensorChecks) {
  auto error = [](std::string_view input, std::string_view output = R"pb(
    {
      name: "y"
      data_type: TYPE_FP32
      dims: [ 1 ]
    })pb") {
    return ParseAndValidate("backend: \"pytorch\" max_batch_size: 2 input [" + std::string(input) +
                            "] output [" + std::string(output) + "]")
        .message();
  };
  EXPECT_THAT(error(R"pb({
                           name: "x"
                           data_type: TYPE_FP32
                           dims: [ 0 ]
                         })pb"),
              HasSubstr("each dimension must be >= 1"));
  EXPECT_THAT(error(R"pb({ name: "x" data_type: TYPE_FP32 })pb"), HasSubstr("must specify 'dims'"));
  EXPECT_THAT(error(R"pb({
                           name: "x"
                           dims: [ 1 ]
                         })pb"), HasSubstr("valid 'data_type'"));
  EXPECT_THAT(error(R"pb({
                           data_type: TYPE_FP32
                           dims: [ 1 ]
                         })pb"),
              HasSubstr("must specify 'name'"));
  EXPECT_THAT(error(R"pb({
                           name: "x"
                           data_type: TYPE_FP32
                           dims: [ 1 ]
                         }
                         , {
                           name: "x"
                           data_type: TYPE_FP32
                           dims: [ 2 ]
                         })pb"),
              HasSubstr("input 'x' is declared more than once"));
  EXPECT_THAT(error(R"pb({
                           name: "x"
                           data_type: TYPE_FP32
                           dims: [ 4 ]
                           reshape: { shape: [ 3 ] }
                         })pb"),
              HasSubstr("not compatible with dims"));
  EXPECT_THAT(error(R"pb({
                           name: "x"
                           data_type: TYPE_FP32
                           dims: [ -1, 4 ]
                           reshape: { shape: [ 4 ] }
                         })pb"),
              HasSubstr("not compatible with dims"));
  EXPECT_THAT(error(R"pb({
                           name: "x"
                           data_type: TYPE_FP32
                           format: FORMAT_NHWC
                           dims: [ 4 ]
                         })pb"),
              HasSubstr("must have 3 dims"));
  EXPECT_THAT(error(R"pb({
                           name: "x"
                           data_type: TYPE_FP32
                           dims: [ 1 ]
                         })pb",
                    R"pb({
                           name: "y"
                           data_type: TYPE_FP32
                           dims: [ 1 ]
                           label_filename: "../x"
                         })pb"),
              HasSubstr("must be a relative path"));
  EXPECT_THAT(error(R"pb({
                           name: "x"
                           data_type: TYPE_FP32
                           dims: [ 9223372036854775807, 2 ]
                         })pb"),
              HasSubstr("too many elements"));
  // Compatible reshapes, including the documented scalar-per-item form.
  EXPECT_TRUE(ParseAndValidate(R"pb(backend: "pytorch"
                                    max_batch_size: 2 input
                                    [ {
                                      name: "a"
                                      data_type: TYPE_FP32
                                      dims: [ 1 ]
                                      reshape: { shape: [] }
                                    }
                                      , {
                                        name: "b"
                                        data_type: TYPE_INT64
                                        dims: [ 2, -1, 6 ]
                                        reshape: { shape: [ 1, 2, -1, 3, 2 ] }
                                      }] output
                                    [ {
                                      name: "y"
                                      data_type: TYPE_FP32
                                      dims: [ -1 ]
                                    }])pb")
                  .ok());
}

TEST(ModelConfigTest, WarmupChecks) {
  EXPECT_TRUE(ParseAndValidate(Minimal(R"pb(model_warmup
                                            [ {
                                              name: "zeros"
                                              batch_size: 4
                                              count: 2
                                              inputs {
                                                key: "x"
                                                value: {
                                                  data_type: TYPE_FP32
                                                  dims: [ 4 ]
                                                  zero_data: true
                                                }
                                              }
                                            }])pb"))
                  .ok());
  EXPECT_THAT(ParseAndValidate(Minimal(R"pb(model_warmup
                                            [ {
                                              name: "big"
                                              batch_size: 5
                                              inputs {
                                                key: "x"
                                                value: {
                                                  data_type: TYPE_FP32
                                                  dims: [ 4 ]
                                                  zero_data: true
                                                }
                                              }
                                            }])pb"))
                  .message(),
              HasSubstr("batch_size 5 exceeds 4"));
  EXPECT_THAT(ParseAndValidate(Minimal(R"pb(model_warmup
                                            [ {
                                              name: "w"
                                              batch_size: 1
                                              inputs {
                                                key: "z"
                                                value: {
                                                  data_type: TYPE_FP32
                                                  dims: [ 4 ]
                                                  zero_data: true
                                                }
                                              }
                                            }])pb"))
                  .message(),
              HasSubstr("input 'z' is not a model input"));
  EXPECT_THAT(ParseAndValidate(Minimal(R"pb(model_warmup
                                            [ {
                                              name: "w"
                                              batch_size: 1
                                              inputs {
                                                key: "x"
                                                value: {
                                                  data_type: TYPE_INT32
                                                  dims: [ 4 ]
                                                  zero_data: true
                                                }
                                              }
                                            }])pb"))
                  .message(),
              HasSubstr("has data_type TYPE_INT32, the model input has TYPE_FP32"));
  EXPECT_THAT(ParseAndValidate(Minimal(R"pb(model_warmup
                                            [ {
                                              name: "w"
                                              batch_size: 1
                                              inputs {
                                                key: "x"
                                                value: {
                                                  data_type: TYPE_FP32
                                                  dims: [ 5 ]
                                                  random_data: true
                                                }
                                              }
                                            }])pb"))
                  .message(),
              HasSubstr("do not match"));
  EXPECT_THAT(ParseAndValidate(Minimal(R"pb(model_warmup
                                            [ { name: "w" batch_size: 1 }])pb"))
                  .message(),
              HasSubstr("gives no data for input 'x'"));
  EXPECT_THAT(ParseAndValidate(Minimal(R"pb(model_warmup
                                            [ {
                                              name: "w"
                                              batch_size: 1
                                              inputs {
                                                key: "x"
                                                value: {
                                                  data_type: TYPE_FP32
                                                  dims: [ 4 ]
                                                  input_data_file: "/etc/passwd"
                                                }
                                              }
                                            }])pb"))
                  .message(),
              HasSubstr("must be a relative path"));
}

TEST(ModelConfigTest, JsonHasNumbersAndEnumNames) {
  inference::ModelConfig c = Parse(kPytorchConfig);
  ASSERT_TRUE(Validate(&c, "resnet").ok());
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

TEST(ModelConfigTest, JsonLargeIntegersAndFloats) {
  inference::ModelConfig c;
  c.add_input()->add_dims(int64_t{1} << 40);
  c.mutable_dynamic_batching()->set_max_queue_delay_microseconds(UINT64_MAX);
  const std::string json = ModelConfigToJson(c);
  EXPECT_THAT(json, HasSubstr(R"("dims":[1099511627776])"));
  EXPECT_THAT(json, HasSubstr(R"("max_queue_delay_microseconds":18446744073709551615)"));

  inference::ModelSequenceBatching seq;
  seq.mutable_direct()->set_minimum_slot_utilization(0.1f);
  EXPECT_THAT(ModelConfigToJson(seq), HasSubstr(R"("minimum_slot_utilization":0.1})"));
  inference::ModelSequenceBatching::Control control;
  control.add_fp32_false_true(std::numeric_limits<float>::quiet_NaN());
  control.add_fp32_false_true(1.0f);
  EXPECT_THAT(ModelConfigToJson(control), HasSubstr(R"("fp32_false_true":["NaN",1])"));
}

}  // namespace
}  // namespace dais
