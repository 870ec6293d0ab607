#include "cluster/training_job.h"

#include <gtest/gtest.h>

#include "common/status_testing.h"

namespace dais::cluster {
namespace {

TEST(TrainingJobTest, ParsesAndRoundTrips) {
  ASSERT_OK_AND_ASSIGN(TrainingJobSpec j, ParseTrainingJobYaml(R"(
kind: training
name: fraud-retrain
config: /srv/fraud-training.yaml
schedule: {every: 30m, after_labels: 500, label_stream: redis://127.0.0.1:6379/labels}
resources: {cpu_milli: 2000, memory_mib: 2048}
constraints: {node_labels: {pool: batch}}
release:
  strategy: canary
  route: fraud
  deployment: fraud-v1
  steps: [10, 100]
  interval: 2s
  max_error_rate: 2%
  max_psi: 0.25
)"));
  EXPECT_EQ(j.every_ms, 30 * 60 * 1000);
  EXPECT_EQ(j.after_labels, 500);
  EXPECT_EQ(j.release.interval_ms, 2000);
  EXPECT_DOUBLE_EQ(j.release.max_error_rate, 0.02);
  EXPECT_EQ(j.release.steps, (std::vector<int>{10, 100}));
  const DeploymentSpec d = j.AsDeployment();
  EXPECT_EQ(d.name, "training:fraud-retrain");
  EXPECT_EQ(d.model, d.name);
  EXPECT_EQ(d.priority, "best-effort");
  EXPECT_EQ(d.cpu_milli, 2000);
  EXPECT_EQ(d.node_labels.at("pool"), "batch");
  ASSERT_OK_AND_ASSIGN(TrainingJobSpec back, ParseTrainingJobYaml(TrainingJobToJson(j)));
  EXPECT_EQ(TrainingJobToJson(back), TrainingJobToJson(j));
}

TEST(TrainingJobTest, ErrorsNameTheField) {
  auto err = [](const std::string& yaml) {
    auto j = ParseTrainingJobYaml(yaml);
    return j.ok() ? std::string("ok") : j.status().message();
  };
  const std::string base = "name: t\nconfig: /c.yaml\n";
  EXPECT_NE(err(base).find("schedule: give every"), std::string::npos) << err(base);
  EXPECT_NE(err("name: t\nschedule: {every: 1m}\n").find("config: required"), std::string::npos);
  EXPECT_NE(err(base + "schedule: {every: 1y}\n").find("schedule.every"), std::string::npos);
  EXPECT_NE(err(base + "schedule: {after_labels: 5}\n").find("schedule.label_stream"),
            std::string::npos);
  EXPECT_NE(err(base + "schedule: {every: 1m, cron: x}\n").find("schedule.cron: unknown field"),
            std::string::npos);
  EXPECT_NE(err(base + "schedule: {every: 1m}\nrelease: {strategy: blue}\n")
                .find("release.strategy: 'blue'"),
            std::string::npos);
  EXPECT_NE(err(base + "schedule: {every: 1m}\nrelease: {strategy: canary, deployment: d}\n")
                .find("release.route: required"),
            std::string::npos);
  EXPECT_NE(err(base + "schedule: {every: 1m}\nrelease: {strategy: canary, route: r}\n")
                .find("release.deployment: required"),
            std::string::npos);
  EXPECT_NE(err(base + "schedule: {every: 1m}\nrelease: {strategy: canary, route: r, "
                       "deployment: d, steps: [50, 20]}\n")
                .find("release.steps"),
            std::string::npos);
  EXPECT_NE(err(base + "schedule: {every: 1m}\nrelease: {max_error_rate: lots}\n")
                .find("release.max_error_rate"),
            std::string::npos);
  EXPECT_NE(err("name: Bad_Name\nconfig: c\nschedule: {every: 1m}\n").find("name: 'Bad_Name'"),
            std::string::npos);
}

TEST(TrainingJobTest, RunStateRoundTrips) {
  TrainingRunState s;
  s.runs = 3;
  s.last_start_ms = 10;
  s.last_end_ms = 20;
  s.last_exit = 0;
  s.last_result = "published version 4";
  s.labels_seen = 1200;
  s.published = 4;
  s.release_pending = 4;
  s.node = "n1";
  ASSERT_OK_AND_ASSIGN(TrainingRunState back, TrainingRunStateFromJson(TrainingRunStateToJson(s)));
  EXPECT_EQ(TrainingRunStateToJson(back), TrainingRunStateToJson(s));
  EXPECT_FALSE(TrainingRunStateFromJson("[1]").ok());
}

}  // namespace
}  // namespace dais::cluster
