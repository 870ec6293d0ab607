#include "runtime/model_stats.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "metrics/registry.h"

namespace dais::runtime {
namespace {

Tensor Fp32(std::vector<int64_t> shape, const std::vector<float>& values) {
  Tensor t;
  t.dtype = DataType::kFp32;
  t.shape = std::move(shape);
  std::memcpy(t.Allocate(values.size() * sizeof(float)), values.data(),
              values.size() * sizeof(float));
  return t;
}

// The dais_inference_score count of (model, version) in the exposition.
int64_t ScoreCount(const std::string& model) {
  const std::string text = metrics::Registry::Global().Expose();
  const std::string key = "dais_inference_score_count{model=\"" + model + "\",version=\"1\"} ";
  const size_t at = text.find(key);
  return at == std::string::npos ? -1 : std::stoll(text.substr(at + key.size()));
}

TEST(ModelStatsTest, ScoresCountOnePerRow) {
  ModelStats stats("scores_test", "1");
  stats.RecordScores(Fp32({3}, {0.1f, 0.5f, 0.9f}), 3);  // a batching model: 3 rows of p
  EXPECT_EQ(ScoreCount("scores_test"), 3);
  stats.RecordScores(Fp32({2}, {0.3f, 0.7f}), 1);  // one row of [1 - p, p]
  EXPECT_EQ(ScoreCount("scores_test"), 4);
  stats.RecordScores(Fp32({2, 2}, {0.3f, 0.7f, 0.6f, 0.4f}), 2);
  EXPECT_EQ(ScoreCount("scores_test"), 6);
  stats.RecordScores(Fp32({1, 3}, {0.1f, 0.2f, 0.7f}), 1);  // three classes: not a score
  EXPECT_EQ(ScoreCount("scores_test"), 6);
}

}  // namespace
}  // namespace dais::runtime
