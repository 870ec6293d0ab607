// The model configuration (config.pbtxt): parsing, validation with defaults, version-policy
// selection and the JSON served at /v2/models/{m}/config.
//
// The schema is Triton's ModelConfig (proto/model_config.proto). Which fields dais honours,
// ignores with a warning, or rejects is listed in docs/model-config.md.
//
// All functions are pure: they touch no files and no global state, and are safe to call from any
// thread on distinct arguments.
#pragma once

#include <google/protobuf/message.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dais/status.h"
#include "model_config.pb.h"

namespace dais::runtime {

// Parses protobuf text format into a ModelConfig. Nothing is validated beyond the syntax and the
// schema (unknown fields and enum names are errors). `path` only names the file in messages.
// Errors: InvalidArgument "<path>:<line>:<col>: <protobuf's message>", with 1-based line and
// column, for the first problem found (e.g. 'Message type "inference.ModelConfig" has no field
// named "foo".'). Protobuf prints nothing to stderr.
StatusOr<inference::ModelConfig> ParseModelConfig(std::string_view text, const std::string& path);

// Validates a parsed config and fills in defaults, in place. On error `config` may be partly
// normalised and must be discarded.
//
// `model_dir_name` is the model's directory name: an empty config.name becomes it; a different
// one is an error (Triton requires them equal). `allow_gpu` is true when this build can run
// KIND_GPU instance groups. Messages about fields that are accepted but have no effect in dais
// are appended to `warnings` (not null) for the caller to log; nothing is logged here.
//
// Defaults filled in: backend from platform ("pytorch_libtorch" -> "pytorch") and platform from
// backend ("pytorch" -> "pytorch_libtorch"); version_policy latest{num_versions: 1} (and 0 -> 1);
// one instance group {count: 1, kind: KIND_CPU} when none is given; per group count 0 -> 1,
// KIND_AUTO -> KIND_CPU, empty name -> "<model>_<index>".
//
// Errors: InvalidArgument "<path>: <what is wrong>". Fields whose meaning dais cannot provide
// (sequence_batching, ensemble_scheduling, decoupled, batch_input, ...) fail with
// "<path>: field '<field>' is not supported by dais".
Status ValidateModelConfig(inference::ModelConfig* config, const std::string& path,
                           const std::string& model_dir_name, bool allow_gpu,
                           std::vector<std::string>* warnings);

// The versions among `available` (any order, duplicates allowed) that `policy` serves, ascending
// and without duplicates. An unset policy behaves as latest{num_versions: 1}; num_versions 0 as 1.
// Versions a 'specific' policy names that are not available are left out: the caller reports them.
std::vector<int64_t> SelectVersions(const inference::ModelVersionPolicy& policy,
                                    std::vector<int64_t> available);

// JSON as Triton's /config endpoint returns it: proto field names, enums by name, 64-bit integers
// as JSON numbers (not strings), repeated and map fields always present (possibly empty), scalar
// fields present even at their default value, unset message fields and unset oneof members left
// out. Map keys are JSON strings. Non-finite floats are the strings "NaN", "Infinity",
// "-Infinity" as in protobuf's JSON mapping. Works for any message, not only ModelConfig.
std::string ModelConfigToJson(const google::protobuf::Message& config);

// The batching parameters dais reads itself (docs/batching.md).
inline constexpr const char* kBatchingPolicyParameter = "batching_policy";
inline constexpr const char* kLatencyTargetParameter = "latency_target_microseconds";
inline constexpr const char* kInlineExecutionParameter = "inline_execution_max_microseconds";

// parameters[key].string_value, or "" when the key is absent.
std::string ConfigParameter(const inference::ModelConfig& config, const std::string& key);

}  // namespace dais::runtime
