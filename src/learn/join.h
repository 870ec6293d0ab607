// The point-in-time join of `dais train`: archived feedback records (what a model was asked and
// answered, with the features it saw) with the labels that arrived within a window after each
// prediction, and never after the training cut-off (no leakage: a label that arrived after the
// cut-off does not exist for this training, whatever time it names).
//
// A prediction's label: one whose request_id is the prediction's id and that was received within
// [prediction time, + window]; otherwise one for the same entity ids whose time_ms is within that
// window. Several: the last received. None: when the window closed before the cut-off, the
// spec's `unlabeled` value (or the prediction is left out); when it is still open, left out
// (unknown yet). Records of a batch of several rows are left out (a label judges one request).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dais/status.h"
#include "learn/training_spec.h"

namespace dais::learn {

struct Dataset {
  int num_features = 0;
  std::vector<float> x;  // rows x num_features, row-major, rows by prediction time
  std::vector<float> y;
  std::vector<int64_t> time_ms;
  size_t rows() const { return y.size(); }
};

struct JoinStats {
  uint64_t files = 0;
  uint64_t predictions = 0;       // feedback records of the model read
  uint64_t other_models = 0;      // records of other models, skipped
  uint64_t unusable = 0;          // batched, no such input, other width, after the cut-off
  uint64_t labels = 0;            // label entries carrying the label, received by the cut-off
  uint64_t labels_late = 0;       // received after the cut-off: ignored
  uint64_t labels_unmatched = 0;  // by the cut-off, matching no prediction
  uint64_t labeled = 0;
  uint64_t defaulted = 0;   // window closed without a label: the `unlabeled` value
  uint64_t left_out = 0;    // no label: window still open, or no `unlabeled` value
  uint64_t duplicates = 0;  // lines of a stream entry already read (compaction overlap)
};

// Labelled rows kept in the offline store's layout, as an edge trainer of `dais fed join` or a
// federation's held-out set has them: <dir>/dt=YYYY-MM-DD/*.jsonl.gz, each line
// {"x": [numbers], "y": number} (every row as wide as the first). InvalidArgument naming the
// file and line of a bad row; FailedPrecondition when the folder holds no row.
StatusOr<Dataset> LoadRows(const std::string& dir);

// Reads <dir>/dt=*/*.jsonl.gz (parts and compacted files) of both datasets. `progress` gets a
// line now and then (files and rows read). InvalidArgument naming the file and line for a line
// that is not JSON; FailedPrecondition when nothing is left to train on.
StatusOr<Dataset> JoinFeedbackAndLabels(const TrainingSpec& spec, int64_t cutoff_ms,
                                        JoinStats* stats,
                                        const std::function<void(const std::string&)>& progress);

// The rows whose prediction time is in [from_ms, to_ms).
Dataset Slice(const Dataset& d, int64_t from_ms, int64_t to_ms);

}  // namespace dais::learn
