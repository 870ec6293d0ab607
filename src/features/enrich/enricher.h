// Feature-enriched inference: fills a request's feature inputs from the FeatureStore.
// Entity ids come from the input named by features.yaml's `entity_input` (INT64, INT32 or BYTES,
// shape [n] or [n, 1]) or from parameters.entity_ids; each id becomes one batch row.
// Stale, missing and defaulted features use the declared defaults; the response reports each
// row's status in parameters.feature_status.
#pragma once

#include "features/store/feature_store.h"
#include "runtime/request_enricher.h"

namespace dais::features {

// A neighbour found by a knn lookup (feature_spec.h KnnSpec).
struct KnnHit {
  std::string id;
  float score = 0;
};
// Searches vector memory for a knn lookup (the server's collections; cmd wires it).
using KnnSearch =
    std::function<StatusOr<std::vector<KnnHit>>(const KnnSpec& knn, std::vector<float> query)>;

class Enricher : public runtime::RequestEnricher {
 public:
  explicit Enricher(FeatureStore* store) : store_(store) {}  // borrows
  void Enrich(runtime::RequestPtr request, std::shared_ptr<runtime::ModelVersion> version,
              std::function<void(runtime::RequestPtr)> next) override;
  // Serves the specs' knn inputs. Without it a knn input fails the request (FailedPrecondition
  // naming --memory). Call before serving.
  void SetKnnSearch(KnnSearch search) { knn_ = std::move(search); }

 private:
  FeatureStore* store_;
  KnnSearch knn_;
};

}  // namespace dais::features
