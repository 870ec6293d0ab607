// KServe v2 / Open Inference Protocol HTTP request and response bodies, with Triton's binary
// tensor data extension (https://github.com/triton-inference-server/server/blob/main/docs/protocol/
// extension_binary_data.md).
//
// These functions check the body against the protocol only (well-formed JSON, known datatypes,
// data length matching the shape, binary sizes adding up). Checks against the model's
// configuration (input names, datatypes, dims) are the runtime's.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "dais/datatype.h"
#include "dais/status.h"
#include "runtime/inference_request.h"

namespace dais::frontends::http {

// Parses an inference request body into `request` (model name/version are set by the caller).
// `body` is moved into request->body; binary inputs borrow from it (no copy), JSON inputs are
// converted into owned bytes. `header_length` is the Inference-Header-Content-Length header
// value, or 0 when absent (the whole body is JSON).
// JSON nested deeper than `max_json_depth` is refused.
// Errors are InvalidArgument with a message naming the input and the problem.
Status ParseInferRequest(std::string body, size_t header_length, runtime::InferenceRequest* request,
                         int max_json_depth = 100);

// ParseInferRequest without its simdjson reader: rapidjson reads every body. For
// bench/infer_codec_bench, which measures one against the other.
Status ParseInferRequestWithRapidjson(std::string body, size_t header_length,
                                      runtime::InferenceRequest* request, int max_json_depth = 100);

// A raw binary request (Inference-Header-Content-Length: 0, Triton's binary data extension): the
// body is the bytes of the model's one input `name`, whose datatype and configured shape (batch
// dimension already set to 1) are given. At most one dimension may be -1; it is deduced from the
// body's size. A BYTES input must hold one element (dims 1 or -1): the body is that element's
// bytes. Every output is answered as binary data. InvalidArgument when the body does not fit.
Status ParseRawInferRequest(std::string body, const std::string& name, DataType dtype,
                            std::vector<int64_t> shape, runtime::InferenceRequest* request);

struct EncodedResponse {
  std::string body;
  size_t header_length = 0;  // > 0: set Inference-Header-Content-Length to this
};
// Serializes a response. Outputs flagged binary go after the JSON header as raw bytes with
// parameters.binary_data_size; the others go as JSON "data" (flat, row-major).
EncodedResponse SerializeInferResponse(const runtime::InferenceResponse& response);

// {"error": "<message>"}
std::string ErrorJson(const std::string& message);

}  // namespace dais::frontends::http
