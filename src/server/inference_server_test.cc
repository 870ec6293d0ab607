// InferenceServer's operations and error paths on a real ModelManager over a temporary
// repository of identity-backend models (the runtime's own test backend: OUTPUT0 = INPUT0).
#include "server/inference_server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>

#include "common/status_testing.h"

namespace dais::server {
namespace {

namespace fs = std::filesystem;

constexpr const char* kConfig = R"(name: "$NAME"
backend: "identity"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 2 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 2 ] } ]
version_policy: { all: {} }
parameters [ { key: "execute_delay_ms" value: { string_value: "$DELAY" } } ]
)";

std::string Config(const std::string& name, int execute_delay_ms) {
  std::string c = kConfig;
  c.replace(c.find("$NAME"), 5, name);
  c.replace(c.find("$DELAY"), 6, std::to_string(execute_delay_ms));
  return c;
}

class InferenceServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = fs::temp_directory_path() /
            ("dais-server-test-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(repo_);
    WriteModel("echo", {1, 2}, 0);
    WriteModel("slow", {1}, 300);
  }
  void TearDown() override {
    server_.reset();
    if (manager_) manager_->Stop();
    manager_.reset();
    fs::remove_all(repo_);
  }

  void WriteModel(const std::string& name, std::vector<int> versions, int execute_delay_ms) {
    fs::create_directories(repo_ / name);
    std::ofstream(repo_ / name / "config.pbtxt") << Config(name, execute_delay_ms);
    for (int v : versions) fs::create_directories(repo_ / name / std::to_string(v));
  }

  void Start(runtime::ModelControlMode mode, std::vector<std::string> startup = {}) {
    runtime::ManagerOptions o;
    o.repositories = {repo_.string()};
    o.mode = mode;
    o.startup_models = std::move(startup);
    manager_ = std::make_unique<runtime::ModelManager>(o);
    ASSERT_OK(manager_->Start());
    server_ = std::make_unique<InferenceServer>(manager_.get());
  }

  static runtime::RequestPtr EchoRequest(const std::string& model, int64_t version = -1) {
    auto r = std::make_unique<runtime::InferenceRequest>();
    r->model_name = model;
    r->model_version = version;
    Tensor t;
    t.name = "INPUT0";
    t.dtype = DataType::kInt32;
    t.shape = {1, 2};
    int32_t values[2] = {7, -3};
    std::memcpy(t.Allocate(sizeof(values)), values, sizeof(values));
    r->inputs.push_back(std::move(t));
    return r;
  }

  // Runs one inference and waits for its answer.
  StatusOr<runtime::ResponsePtr> Infer(runtime::RequestPtr r) {
    std::promise<StatusOr<runtime::ResponsePtr>> p;
    server_->Infer(std::move(r), [&p](StatusOr<runtime::ResponsePtr> result, InFlight) {
      p.set_value(std::move(result));
    });
    return p.get_future().get();
  }

  // Runs a repository request; the status it was refused with, or the one `done` got.
  Status Repository(RepositoryAction action, const std::string& model, bool params = false) {
    std::promise<Status> p;
    Status s = server_->Repository(action, model, params, [&p](Status r) { p.set_value(r); });
    if (!s.ok()) return s;
    return p.get_future().get();
  }

  fs::path repo_;
  std::unique_ptr<runtime::ModelManager> manager_;
  std::unique_ptr<InferenceServer> server_;
};

TEST_F(InferenceServerTest, InferAnswersWithTheModelsOutput) {
  Start(runtime::ModelControlMode::kNone);
  ASSERT_OK_AND_ASSIGN(runtime::ResponsePtr r, Infer(EchoRequest("echo")));
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0].name, "OUTPUT0");
  int32_t out[2];
  ASSERT_EQ(r->outputs[0].data.size(), sizeof(out));
  std::memcpy(out, r->outputs[0].data.data(), sizeof(out));
  EXPECT_EQ(out[0], 7);
  EXPECT_EQ(out[1], -3);
  EXPECT_EQ(r->model_version, "2");  // the highest ready version
  // The count drops once `done` has returned (it held the InFlight).
  EXPECT_TRUE(server_->WaitIdle(std::chrono::steady_clock::now() + std::chrono::seconds(10)));
}

TEST_F(InferenceServerTest, InferErrorsNameTheProblem) {
  Start(runtime::ModelControlMode::kNone);
  auto unknown = Infer(EchoRequest("nope"));
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("nope"), std::string::npos);
  auto bad_version = Infer(EchoRequest("echo", 7));
  EXPECT_FALSE(bad_version.ok());
  auto r = EchoRequest("echo");
  r->inputs[0].name = "WRONG";
  auto bad_input = Infer(std::move(r));
  EXPECT_EQ(bad_input.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_input.status().message().find("WRONG"), std::string::npos);
}

TEST_F(InferenceServerTest, DrainRefusesNewRequestsAndWaitsForInFlightOnes) {
  Start(runtime::ModelControlMode::kNone);
  std::promise<StatusOr<runtime::ResponsePtr>> slow;
  server_->Infer(EchoRequest("slow"), [&slow](StatusOr<runtime::ResponsePtr> result, InFlight) {
    slow.set_value(std::move(result));
  });
  EXPECT_EQ(server_->in_flight(), 1);
  server_->StartDraining();
  EXPECT_EQ(server_->Ready().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(server_->AcceptingInference().code(), StatusCode::kUnavailable);
  auto refused = Infer(EchoRequest("echo"));
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(server_->Admit().status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(server_->WaitIdle(std::chrono::steady_clock::now() + std::chrono::seconds(30)));
  ASSERT_OK(slow.get_future().get());  // the admitted one was answered
  EXPECT_FALSE(server_->Health().ok);
  EXPECT_TRUE(server_->Health().draining);
}

TEST_F(InferenceServerTest, InFlightLastsAsLongAsTheFrontendHoldsIt) {
  Start(runtime::ModelControlMode::kNone);
  std::promise<InFlight> held;
  server_->Infer(EchoRequest("echo"), [&held](StatusOr<runtime::ResponsePtr>, InFlight in_flight) {
    held.set_value(in_flight);  // a frontend that answers later, from its own thread
  });
  InFlight token = held.get_future().get();
  EXPECT_EQ(server_->in_flight(), 1);
  token = InFlight();
  EXPECT_TRUE(server_->WaitIdle(std::chrono::steady_clock::now() + std::chrono::seconds(10)));
}

TEST_F(InferenceServerTest, ReadinessMetadataAndModelReady) {
  Start(runtime::ModelControlMode::kNone);
  ASSERT_OK(server_->Ready());
  // Start-up work after the loads (the offline feature import) holds readiness back.
  server_->SetStarting(true);
  Status starting = server_->Ready();
  EXPECT_EQ(starting.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(starting.message().find("starting"), std::string::npos);
  server_->SetStarting(false);
  ASSERT_OK(server_->Ready());
  EXPECT_TRUE(server_->Health().ok);
  ASSERT_OK(server_->ModelReady("echo", 1));
  EXPECT_EQ(server_->ModelReady("nope", -1).code(), StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(ModelMetadata m, server_->Metadata("echo", -1));
  EXPECT_EQ(m.name, "echo");
  EXPECT_EQ(m.versions, (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(m.platform, "identity");
  ASSERT_EQ(m.inputs.size(), 1u);
  EXPECT_EQ(m.inputs[0].datatype, "INT32");
  EXPECT_EQ(m.inputs[0].shape, (std::vector<int64_t>{-1, 2}));
  ASSERT_OK_AND_ASSIGN(ModelMetadata v1, server_->Metadata("echo", 1));
  EXPECT_EQ(v1.versions, (std::vector<std::string>{"1"}));
  EXPECT_EQ(server_->Metadata("nope", -1).status().code(), StatusCode::kNotFound);
}

TEST_F(InferenceServerTest, StatisticsSelection) {
  Start(runtime::ModelControlMode::kNone);
  ASSERT_OK(Infer(EchoRequest("echo", 1)));
  ASSERT_OK_AND_ASSIGN(auto all, server_->Statistics("", -1));
  EXPECT_EQ(all.size(), 3u);  // echo 1, echo 2, slow 1
  ASSERT_OK_AND_ASSIGN(auto echo, server_->Statistics("echo", -1));
  ASSERT_EQ(echo.size(), 2u);
  EXPECT_EQ(echo[0].version->version(), 1);
  EXPECT_EQ(echo[0].version->stats().inference_count.load(), 1u);
  ASSERT_OK_AND_ASSIGN(auto v2, server_->Statistics("echo", 2));
  ASSERT_EQ(v2.size(), 1u);
  EXPECT_EQ(v2[0].version->version(), 2);
  ASSERT_OK_AND_ASSIGN(auto every_v2, server_->Statistics("", 2));
  EXPECT_EQ(every_v2.size(), 1u);  // only echo has a version 2
  EXPECT_EQ(server_->Statistics("nope", -1).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(server_->Statistics("echo", 9).ok());
}

TEST_F(InferenceServerTest, RepositoryRefusedOutsideExplicitMode) {
  Start(runtime::ModelControlMode::kNone);
  Status s = server_->Repository(RepositoryAction::kUnload, "echo", false,
                                 [](Status) { ADD_FAILURE() << "done must not run"; });
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("--model-control-mode=explicit"), std::string::npos);
  ASSERT_OK(server_->ModelReady("echo", -1));
}

TEST_F(InferenceServerTest, RepositoryLoadUnloadInExplicitMode) {
  Start(runtime::ModelControlMode::kExplicit);
  EXPECT_FALSE(server_->ModelReady("echo", -1).ok());  // in the repository, not loaded
  EXPECT_EQ(Repository(RepositoryAction::kLoad, "echo", /*params=*/true).code(),
            StatusCode::kInvalidArgument);
  ASSERT_OK(Repository(RepositoryAction::kLoad, "echo"));
  ASSERT_OK(server_->ModelReady("echo", -1));
  ASSERT_OK(Infer(EchoRequest("echo")));
  Status missing = Repository(RepositoryAction::kLoad, "nope");
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("failed to load 'nope'"), std::string::npos);
  ASSERT_OK(Repository(RepositoryAction::kUnload, "echo"));
  EXPECT_NE(server_->ModelReady("echo", -1).code(), StatusCode::kOk);
  // The background thread lets its token go once `done` has returned.
  EXPECT_TRUE(server_->WaitIdle(std::chrono::steady_clock::now() + std::chrono::seconds(10)));
  server_->StartDraining();
  EXPECT_EQ(Repository(RepositoryAction::kLoad, "echo").code(), StatusCode::kUnavailable);
}

TEST_F(InferenceServerTest, APinnedVersionOverridesThePolicyUntilUnloaded) {
  Start(runtime::ModelControlMode::kExplicit);
  ASSERT_OK(manager_->LoadModel("echo", 1));
  EXPECT_EQ(manager_->ReadyVersions("echo"), (std::vector<int64_t>{1}));  // the policy says all
  manager_->Poll();                                                       // a rescan keeps the pin
  EXPECT_EQ(manager_->ReadyVersions("echo"), (std::vector<int64_t>{1}));
  ASSERT_OK(manager_->LoadModel("echo", 2));  // the pinned version moves: 1 retired
  EXPECT_EQ(manager_->ReadyVersions("echo"), (std::vector<int64_t>{2}));
  Status missing = manager_->LoadModel("echo", 9);
  EXPECT_EQ(missing.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.message().find("no version 9"), std::string::npos) << missing.ToString();
  EXPECT_NE(missing.message().find("versions there: 1, 2"), std::string::npos);
  ASSERT_OK(manager_->UnloadModel("echo"));
  ASSERT_OK(manager_->LoadModel("echo"));  // unpinned: the policy (all) again
  EXPECT_EQ(manager_->ReadyVersions("echo"), (std::vector<int64_t>{1, 2}));
}

TEST_F(InferenceServerTest, ABadModelFailsToLoadWithInvalidArgument) {
  fs::create_directories(repo_ / "broken" / "1");
  std::ofstream(repo_ / "broken" / "config.pbtxt") << "name: \"broken\"\nbackend: \"nosuch\"\n";
  Start(runtime::ModelControlMode::kExplicit);
  Status s = Repository(RepositoryAction::kLoad, "broken");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("failed to load 'broken'"), std::string::npos);
}

TEST_F(InferenceServerTest, HealthReportsTheFeatureTier) {
  Start(runtime::ModelControlMode::kNone);
  bool reachable = true;
  server_->SetFeatureHealth([&reachable] { return reachable; }, "redis");
  EXPECT_TRUE(server_->Health().ok);
  reachable = false;
  HealthReport h = server_->Health();
  EXPECT_FALSE(h.ok);
  EXPECT_TRUE(h.has_feature_store);
  EXPECT_FALSE(h.feature_store_ok);
  EXPECT_EQ(h.feature_tier, "redis");
}

}  // namespace
}  // namespace dais::server
