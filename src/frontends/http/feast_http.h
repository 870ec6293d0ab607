// Feast-compatible feature server endpoints (JSON in, JSON or a Status out), so Feast users can
// point their clients at dais. The protocol lives here; the lookups and writes are the feature
// store's (features/store/feature_store.h):
//   POST /get-online-features  {"features": ["group:feature", ...] | "feature_service": "<model>",
//                               "entities": {"<entity>": [ids...]}, "full_feature_names": bool,
//                               "project": "<domain>" (optional)}
//     -> {"metadata": {"feature_names": [...]}, "results": [{"values", "statuses",
//         "event_timestamps"}, ...]}  (entity columns first, as Feast does)
//   POST /push  {"push_source_name": "<group>", "df": {"<entity>": [...], "event_timestamp":
//               [...], "<feature>": [...]}, "to": "online", "project": "<domain>" (optional)}
// Errors are Status codes (http_status.h makes them HTTP statuses). Value statuses: PRESENT; STALE
// -> OUTSIDE_MAX_AGE (value shown); NOT_FOUND (null); DEFAULTED (the declared default: the online
// tier did not answer in time).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "dais/status.h"
#include "features/store/feature_store.h"

namespace dais::frontends::http {

// What /push accepts. `now_us` is the wall clock in Unix microseconds (a seam for tests).
struct PushOptions {
  // Event times further ahead of now are refused: one such row would otherwise shadow every
  // correct later push of its entity (they are older) until the record expires.
  std::chrono::microseconds max_future_skew{std::chrono::minutes(5)};
  std::function<int64_t()> now_us;  // default: the system clock
};

class FeastHttp {
 public:
  // Every spec the server knows (standalone --feature-spec files and models' features.yaml).
  using SpecList = std::function<std::vector<features::FeatureSpecPtr>()>;
  // A model's spec by name (feature_service), or null.
  using ServiceSpec = std::function<features::FeatureSpecPtr(const std::string&)>;
  // The response body, or why the request failed (InvalidArgument: bad input; NotFound: no such
  // feature service; Unavailable: the online store did not take a push).
  using Done = std::function<void(StatusOr<std::string> json)>;

  FeastHttp(features::FeatureStore* store, SpecList specs, ServiceSpec services,
            PushOptions push = {});

  // JSON bodies nested deeper are refused (default 100). Call before serving.
  void set_max_json_depth(int depth) { max_json_depth_ = depth; }

  // Both answer through `done` exactly once, on any thread.
  void GetOnlineFeatures(std::string_view body, Done done);
  void Push(std::string_view body, Done done);

 private:
  features::FeatureStore* store_;
  SpecList specs_;
  ServiceSpec services_;
  PushOptions push_;
  int max_json_depth_ = 100;
};

// "2026-11-30T12:00:00Z" (seconds; fractions dropped, as Feast prints them).
std::string IsoTimestamp(int64_t unix_us);

}  // namespace dais::frontends::http
