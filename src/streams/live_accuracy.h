// Live accuracy of a model's versions from the streams dais already writes: the feedback stream
// (each answer with its request id, version and outputs) joined with the label stream (labels by
// request id, POST /labels). For the leading scheduler's rollout analysis
// (gateway/rollout.h, `--min-accuracy-delta`): how many of each version's answers made since a
// step began got a label, and how many of those were right.
//
// An answer's score is the last value of its first output when that holds 1 or 2 values (a
// binary classifier's p or [1 - p, p]); it is right when score >= 0.5 and label >= 0.5, or both
// below. Answers of several rows (a batch) are not judged: a label judges one request. A label
// read before its answer (the feedback stream is written asynchronously) waits for it; each
// answer counts once (its first label).
//
// Reading is incremental (XRANGE from where the last call stopped, exclusive ranges), at most
// 20,000 entries of each stream per call; at most 1,000,000 answers and 100,000 waiting labels
// are kept per join (more are not counted). Not thread-safe: the controller's thread calls it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>

#include "dais/status.h"
#include "redis/client.h"

namespace dais::streams {

struct AnswerCounts {
  int64_t labeled = 0, correct = 0;
};

class LiveAccuracy {
 public:
  // redis://HOST:PORT/STREAM of each; InvalidArgument naming a malformed one. Redis need not be
  // up yet.
  static StatusOr<std::unique_ptr<LiveAccuracy>> Create(const std::string& feedback_url,
                                                        const std::string& label_url);
  ~LiveAccuracy();

  // The counts per version (of `versions`) of `model`'s answers made since `since_ms`, labelled
  // by `label`, after reading what is new on both streams. A call with other arguments starts a
  // join of its own (the last 16 are kept).
  StatusOr<std::map<int64_t, AnswerCounts>> Counts(const std::string& model,
                                                   const std::set<int64_t>& versions,
                                                   const std::string& label, int64_t since_ms);

 private:
  struct Join {
    std::string feedback_cursor, label_cursor;                          // the next XRANGE start
    std::unordered_map<std::string, std::pair<int64_t, bool>> answers;  // id -> version, p>=0.5
    std::unordered_map<std::string, bool> waiting;                      // id -> label >= 0.5
    std::map<int64_t, AnswerCounts> counts;
    uint64_t used = 0;  // for eviction
  };
  LiveAccuracy(std::unique_ptr<redis::Client> feedback, std::string feedback_stream,
               std::unique_ptr<redis::Client> labels, std::string label_stream);
  Status ReadFeedback(Join& j, const std::string& model, const std::set<int64_t>& versions);
  Status ReadLabels(Join& j, const std::string& label);
  void Judge(Join& j, int64_t version, bool predicted, bool actual);

  std::unique_ptr<redis::Client> feedback_, labels_;
  const std::string feedback_stream_, label_stream_;
  std::map<std::string, Join> joins_;
  uint64_t calls_ = 0;
};

}  // namespace dais::streams
