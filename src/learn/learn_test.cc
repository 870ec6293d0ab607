#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/status_testing.h"
#include "learn/join.h"
#include "learn/training_spec.h"
#include "learn/xgb_train.h"

namespace dais::learn {
namespace {

namespace fs = std::filesystem;

class LearnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("learn_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "repo/fraud/1");
    fs::create_directories(dir_ / "offline/feedback/dt=2026-12-05");
    fs::create_directories(dir_ / "offline/labels/dt=2026-12-05");
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  void Gz(const std::string& name, const std::vector<std::string>& lines) {
    gzFile f = gzopen((dir_ / name).c_str(), "wb");
    for (const auto& l : lines) gzputs(f, (l + "\n").c_str());
    gzclose(f);
  }
  std::string Spec(const std::string& extra = "") {
    return Write("training.yaml",
                 "model: fraud\nrepository: repo\nfeedback: offline/feedback\n"
                 "labels: offline/labels\nlabel: fraud\ninput: input__0\nwindow: 10s\n"
                 "holdout: 5s\n" +
                     extra);
  }
  static std::string Prediction(const std::string& id, int64_t t, float x, int rows = 1) {
    std::string data = std::to_string(x) + "," + std::to_string(x * 2);
    std::string shape = "[" + std::to_string(rows) + ",2]";
    if (rows == 2) data += "," + data;
    return R"({"entry_id":")" + id + "-" + std::to_string(t) +
           R"(","stream":"fb","record":{"id":")" + id + R"(","model":"fraud","time_ms":)" +
           std::to_string(t) +
           R"(,"entity_ids":["u1"],"inputs":[{"name":"input__0","datatype":"FP32","shape":)" +
           shape + R"(,"data":[)" + data + "]}]}}";
  }
  static std::string Label(const std::string& id, int64_t received, int value) {
    return R"({"entry_id":")" + id + "-" + std::to_string(received) +
           R"(","stream":"labels","request_id":")" + id + R"(","entity_ids":[],"time_ms":")" +
           std::to_string(received) + R"(","labels":{"fraud":)" + std::to_string(value) +
           R"(},"source":"cb","received_ms":")" + std::to_string(received) + R"("})";
  }
  fs::path dir_;
};

TEST_F(LearnTest, SpecErrorsNameTheField) {
  ASSERT_OK(LoadTrainingSpec(Spec()));
  auto missing = LoadTrainingSpec(Write("a.yaml", "model: fraud\n"));
  EXPECT_NE(missing.status().message().find("repository: is required"), std::string::npos)
      << missing.status().message();
  auto unknown = LoadTrainingSpec(Spec("lable: x\n"));
  EXPECT_NE(unknown.status().message().find(":9: lable: unknown field"), std::string::npos)
      << unknown.status().message();
  auto metric = LoadTrainingSpec(Spec("metric: f1\n"));
  EXPECT_NE(metric.status().message().find("metric: auc, logloss or accuracy"), std::string::npos);
  auto epochs = LoadTrainingSpec(Spec("torch: {epochs: 0}\n"));
  EXPECT_NE(epochs.status().message().find("torch.epochs"), std::string::npos);
  auto torch_field = LoadTrainingSpec(Spec("torch: {lr: 1}\n"));
  EXPECT_NE(torch_field.status().message().find("torch.lr: unknown field"), std::string::npos);
  ASSERT_OK_AND_ASSIGN(TrainingSpec torch_spec,
                       LoadTrainingSpec(Spec("torch: {epochs: 5, learning_rate: 0.1}\n")));
  EXPECT_EQ(torch_spec.epochs, 5);
  EXPECT_EQ(torch_spec.learning_rate, 0.1);
  EXPECT_EQ(torch_spec.batch_size, 64);
  auto rounds = LoadTrainingSpec(Spec("xgboost: {rounds: 0}\n"));
  EXPECT_NE(rounds.status().message().find("xgboost.rounds"), std::string::npos);
  std::string text;
  std::getline(std::ifstream(Spec()), text, '\0');
  text.replace(text.find("window: 10s"), 11, "window: soon");
  auto window = LoadTrainingSpec(Write("w.yaml", text));
  EXPECT_NE(window.status().message().find("window: a positive duration"), std::string::npos);
  text.replace(text.find("window: soon"), 12, "window: 10s");
  for (const char* share : {"holdout: 25%", "holdout: 0%", "holdout: 100%", "holdout: x%"}) {
    text.replace(text.find("holdout: "),
                 text.find('\n', text.find("holdout: ")) - text.find("holdout: "), share);
    auto h = LoadTrainingSpec(Write("h.yaml", text));
    if (std::string(share) == "holdout: 25%") {
      ASSERT_OK(h.status());
      EXPECT_DOUBLE_EQ(h->holdout_fraction, 0.25);
      EXPECT_EQ(h->holdout_ms, 0);
    } else {
      EXPECT_NE(h.status().message().find("holdout: a share"), std::string::npos) << share;
    }
  }
  fs::remove_all(dir_ / "offline/labels");
  auto no_labels = LoadTrainingSpec(Spec());
  EXPECT_EQ(no_labels.status().code(), StatusCode::kNotFound);
  EXPECT_NE(no_labels.status().message().find("labels: no directory"), std::string::npos);
}

TEST_F(LearnTest, JoinUsesNoLabelReceivedAfterTheCutoff) {
  Gz("offline/feedback/dt=2026-12-05/part-a-1.jsonl.gz",
     {Prediction("r1", 1000, 0.1f), Prediction("r2", 2000, 0.2f), Prediction("r3", 3000, 0.3f),
      Prediction("r4", 4000, 0.4f, 2),  // a batch: left out
      Prediction("r5", 30000, 0.5f)});  // after the cut-off
  Gz("offline/labels/dt=2026-12-05/part-a-1.jsonl.gz",
     {Label("r1", 1500, 1), Label("r2", 2500, 0),
      Label("r3", 25000, 1),   // after the cut-off (20000): does not exist for this training
      Label("r3", 1000, 1),    // before its prediction: not about it
      Label("zz", 1200, 1)});  // matches nothing
  ASSERT_OK_AND_ASSIGN(TrainingSpec spec, LoadTrainingSpec(Spec()));
  JoinStats st;
  ASSERT_OK_AND_ASSIGN(Dataset d, JoinFeedbackAndLabels(spec, 20000, &st, [](auto&) {}));
  EXPECT_EQ(d.num_features, 2);
  ASSERT_EQ(d.rows(), 2u);  // r1, r2; r3's window closed unlabelled, no `unlabeled` value
  EXPECT_EQ(d.y, (std::vector<float>{1, 0}));
  EXPECT_EQ(st.labels_late, 1u);
  EXPECT_EQ(st.labels, 4u);
  EXPECT_EQ(st.labels_unmatched, 2u);
  EXPECT_EQ(st.unusable, 2u);  // the batch, the prediction after the cut-off
  EXPECT_EQ(st.left_out, 1u);

  ASSERT_OK_AND_ASSIGN(TrainingSpec with_default, LoadTrainingSpec(Spec("unlabeled: 0\n")));
  ASSERT_OK_AND_ASSIGN(Dataset d2, JoinFeedbackAndLabels(with_default, 20000, &st, [](auto&) {}));
  EXPECT_EQ(d2.y, (std::vector<float>{1, 0, 0}));  // r3 unlabelled after its window: 0
  // A cut-off inside r3's window: it is left out (its label might still come). With a value for
  // "no label", so are r1 and r2 while their windows are open, labelled or not (else the newest
  // rows would hold only what comes as labels).
  ASSERT_OK_AND_ASSIGN(Dataset d3, JoinFeedbackAndLabels(with_default, 12500, &st, [](auto&) {}));
  EXPECT_EQ(d3.y, (std::vector<float>{1, 0}));
  EXPECT_EQ(st.left_out, 1u);
  EXPECT_EQ(JoinFeedbackAndLabels(with_default, 5000, &st, [](auto&) {}).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(Slice(d2, 0, 2500).rows(), 2u);
}

TEST_F(LearnTest, AnEntryInTwoFilesCountsOnce) {
  // A compaction's target renamed in, its sources not yet removed: both hold the same entries.
  const std::vector<std::string> fb = {Prediction("r1", 1000, 0.1f), Prediction("r2", 2000, 0.2f)};
  const std::vector<std::string> lb = {Label("r1", 1500, 1), Label("r2", 2500, 0)};
  Gz("offline/feedback/dt=2026-12-05/part-a-1.jsonl.gz", fb);
  Gz("offline/feedback/dt=2026-12-05/compacted-1-0.jsonl.gz", fb);
  Gz("offline/labels/dt=2026-12-05/part-a-1.jsonl.gz", lb);
  Gz("offline/labels/dt=2026-12-05/compacted-1-0.jsonl.gz", lb);
  ASSERT_OK_AND_ASSIGN(TrainingSpec spec, LoadTrainingSpec(Spec()));
  JoinStats st;
  ASSERT_OK_AND_ASSIGN(Dataset d, JoinFeedbackAndLabels(spec, 20000, &st, [](auto&) {}));
  EXPECT_EQ(d.rows(), 2u);
  EXPECT_EQ(st.predictions, 2u);
  EXPECT_EQ(st.labels, 2u);
  EXPECT_EQ(st.duplicates, 4u);
}

TEST_F(LearnTest, NothingToTrainOnIsAClearError) {
  Gz("offline/feedback/dt=2026-12-05/part-a-1.jsonl.gz", {Prediction("r1", 1000, 0.1f)});
  ASSERT_OK_AND_ASSIGN(TrainingSpec spec, LoadTrainingSpec(Spec()));
  JoinStats st;
  auto d = JoinFeedbackAndLabels(spec, 20000, &st, [](auto&) {});
  EXPECT_EQ(d.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(d.status().message().find("nothing to train on"), std::string::npos);
  Gz("offline/labels/dt=2026-12-05/part-a-1.jsonl.gz", {"{not json"});
  auto bad = JoinFeedbackAndLabels(spec, 20000, &st, [](auto&) {});
  EXPECT_NE(bad.status().message().find("part-a-1.jsonl.gz:1: malformed JSON"), std::string::npos)
      << bad.status().message();
}

TEST(ScoreTest, AucLoglossAccuracy) {
  Scores s = Score({0.1f, 0.4f, 0.35f, 0.8f}, {0, 0, 1, 1});
  EXPECT_DOUBLE_EQ(s.auc, 0.75);
  EXPECT_DOUBLE_EQ(s.accuracy, 0.75);
  EXPECT_NEAR(s.logloss, (-std::log(0.9) - std::log(0.6) - std::log(0.35) - std::log(0.8)) / 4,
              1e-6);
  EXPECT_DOUBLE_EQ(Score({0.5f, 0.5f}, {0, 1}).auc, 0.5);  // ties share their rank
  EXPECT_TRUE(std::isnan(Score({0.5f}, {1}).auc));
  EXPECT_TRUE(HigherIsBetter("auc"));
  EXPECT_FALSE(HigherIsBetter("logloss"));
}

}  // namespace
}  // namespace dais::learn
