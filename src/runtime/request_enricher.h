// Seam between the runtime and the feature store: a request to a model that declares features
// (features.yaml) and does not carry all the feature inputs goes through the enricher, which
// fetches the features of the request's entities and fills the inputs before the request is
// queued. Implemented by features::Enricher; the runtime does not know about Redis.
#pragma once

#include <functional>

#include "runtime/inference_request.h"
#include "runtime/model_version.h"

namespace dais::runtime {

class RequestEnricher {
 public:
  virtual ~RequestEnricher() = default;
  // Either fills `request`'s inputs and calls `next(std::move(request))` (on any thread), or
  // answers `request->on_complete` with an error (InvalidArgument naming what was wrong).
  // `version` stays alive until then.
  virtual void Enrich(RequestPtr request, std::shared_ptr<ModelVersion> version,
                      std::function<void(RequestPtr)> next) = 0;
};

// True when the model declares features and the request lacks one of the inputs they fill.
bool NeedsFeatures(const InferenceRequest& request, const ModelVersion& version);

}  // namespace dais::runtime
