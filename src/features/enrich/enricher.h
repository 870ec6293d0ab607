// Feature-enriched inference: fills a request's feature inputs from the FeatureStore.
// Entity ids come from the input named by features.yaml's `entity_input` (INT64, INT32 or BYTES,
// shape [n] or [n, 1]) or from parameters.entity_ids; each id becomes one batch row.
// Stale, missing and defaulted features use the declared defaults; the response reports each
// row's status in parameters.feature_status.
#pragma once

#include "features/store/feature_store.h"
#include "runtime/request_enricher.h"

namespace dais::features {

class Enricher : public runtime::RequestEnricher {
 public:
  explicit Enricher(FeatureStore* store) : store_(store) {}  // borrows
  void Enrich(runtime::RequestPtr request, std::shared_ptr<runtime::ModelVersion> version,
              std::function<void(runtime::RequestPtr)> next) override;

 private:
  FeatureStore* store_;
};

}  // namespace dais::features
