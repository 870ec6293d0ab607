// KServeHttp's routes without a socket: each request goes straight to the handler over a real
// InferenceServer and ModelManager (identity-backend models), and the test reads the status code
// and body the codec answers with. Inference itself (encoded on an I/O thread) is covered by the
// integration suite.
#include "frontends/http/kserve_http.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "common/status_testing.h"

namespace dais::frontends::http {
namespace {

namespace fs = std::filesystem;

class KServeHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = fs::temp_directory_path() /
            ("dais-kserve-http-test-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(repo_);
    fs::create_directories(repo_ / "echo" / "1");
    std::ofstream(repo_ / "echo" / "config.pbtxt") << R"(name: "echo"
backend: "identity"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 2 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 2 ] } ]
)";
  }
  void TearDown() override {
    kserve_.reset();
    server_.reset();
    if (manager_) manager_->Stop();
    fs::remove_all(repo_);
  }

  void Start(runtime::ModelControlMode mode, KServeHttpOptions options = {}) {
    runtime::ManagerOptions o;
    o.repositories = {repo_.string()};
    o.mode = mode;
    manager_ = std::make_unique<runtime::ModelManager>(o);
    ASSERT_OK(manager_->Start());
    server_ = std::make_unique<server::InferenceServer>(manager_.get());
    kserve_ = std::make_unique<KServeHttp>(server_.get(), &io_, std::move(options));
  }

  Response Call(const std::string& method, const std::string& path, std::string body = "",
                bool metrics_port = false,
                std::vector<std::pair<std::string, std::string>> headers = {}) {
    Request r;
    r.method = method;
    r.path = path;
    r.body = std::move(body);
    r.headers = std::move(headers);
    std::promise<Response> p;
    Responder w = [&p](Response resp) { p.set_value(std::move(resp)); };
    metrics_port ? kserve_->HandleMetricsOnly(std::move(r), w) : kserve_->Handle(std::move(r), w);
    return p.get_future().get();
  }

  static rapidjson::Document Json(const Response& r) {
    rapidjson::Document d;
    d.Parse(r.body.c_str());
    return d;
  }

  fs::path repo_;
  Server* io_ = nullptr;
  std::unique_ptr<runtime::ModelManager> manager_;
  std::unique_ptr<server::InferenceServer> server_;
  std::unique_ptr<KServeHttp> kserve_;
};

TEST_F(KServeHttpTest, ServerAndModelRoutes) {
  Start(runtime::ModelControlMode::kNone);
  Response r = Call("GET", "/v2");
  EXPECT_EQ(r.status, 200);
  EXPECT_STREQ(Json(r)["name"].GetString(), "dais");
  EXPECT_EQ(Call("GET", "/v2/health/live").status, 200);
  EXPECT_EQ(Call("GET", "/v2/health/ready").status, 200);
  r = Call("GET", "/v2/models/echo");
  ASSERT_EQ(r.status, 200) << r.body;
  auto meta = Json(r);
  EXPECT_STREQ(meta["versions"][0].GetString(), "1");
  EXPECT_EQ(meta["inputs"][0]["shape"][0].GetInt(), -1);
  EXPECT_EQ(Call("GET", "/v2/models/echo/versions/1/ready").status, 200);
  EXPECT_EQ(Call("GET", "/v2/models/nope/ready").status, 404);
  r = Call("GET", "/v2/models/echo/config");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("\"max_batch_size\":8"), std::string::npos) << r.body;
  r = Call("GET", "/v2/models/stats");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(Json(r)["model_stats"].Size(), 1u);
  EXPECT_EQ(Call("GET", "/v2/models/echo/versions/1/stats").status, 200);
  EXPECT_EQ(Call("GET", "/v2/models/nope/stats").status, 404);
}

TEST_F(KServeHttpTest, ErrorsNameWhatWasWrong) {
  Start(runtime::ModelControlMode::kNone);
  Response r = Call("GET", "/v2/models/echo/versions/x/ready");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("invalid model version 'x'"), std::string::npos) << r.body;
  r = Call("GET", "/v2/models/echo/infer");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(Call("DELETE", "/v2/models/echo").status, 405);
  EXPECT_EQ(Call("GET", "/v2/no/such/route").status, 404);
  r = Call("POST", "/v2/repository/index", "{\"ready\": 1}");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("expected a boolean"), std::string::npos) << r.body;
  r = Call("POST", "/v2/repository/models/echo/unload");
  EXPECT_EQ(r.status, 503);  // Unavailable, as Triton: clients retry
  EXPECT_NE(r.body.find("--model-control-mode=explicit"), std::string::npos) << r.body;
  r = Call("POST", "/push", "{}");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("no feature store"), std::string::npos) << r.body;
  r = Call("GET", "/v2", "", /*metrics_port=*/true);
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("this port serves /metrics and /healthz"), std::string::npos) << r.body;
  EXPECT_EQ(Call("GET", "/healthz", "", /*metrics_port=*/true).status, 200);
}

TEST_F(KServeHttpTest, RepositoryAndDrain) {
  Start(runtime::ModelControlMode::kExplicit);
  EXPECT_EQ(Call("GET", "/v2/health/ready").status, 200);  // nothing is wanted yet
  Response r = Call("POST", "/v2/repository/models/echo/load", R"({"parameters": {"x": 1}})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("load parameters"), std::string::npos) << r.body;
  EXPECT_EQ(Call("POST", "/v2/repository/models/echo/load").status, 200);
  r = Call("POST", "/v2/repository/index", R"({"ready": true})");
  ASSERT_EQ(r.status, 200);
  EXPECT_STREQ(Json(r)[0]["state"].GetString(), "READY");
  r = Call("POST", "/v2/repository/models/nope/load");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("failed to load 'nope'"), std::string::npos) << r.body;
  server_->StartDraining();
  EXPECT_EQ(Call("GET", "/v2/health/ready").status, 400);
  EXPECT_EQ(Call("GET", "/healthz").status, 503);
  EXPECT_EQ(Call("POST", "/v2/repository/models/echo/unload").status, 503);
  EXPECT_EQ(Call("POST", "/v2/models/echo/infer", "{}").status, 503);
}

TEST_F(KServeHttpTest, RestrictedGroupsAndUnimplementedExtensions) {
  KServeHttpOptions o;
  ASSERT_OK_AND_ASSIGN(o.restrictions,
                       server::ApiRestrictions::Parse({"model-repository,trace:admin=yes"},
                                                      "--http-restricted-api", ""));
  Start(runtime::ModelControlMode::kNone, std::move(o));
  Response r = Call("POST", "/v2/repository/index");
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("This API is restricted, expecting header 'admin'"), std::string::npos)
      << r.body;
  EXPECT_EQ(Call("POST", "/v2/repository/index", "", false, {{"admin", "no"}}).status, 403);
  EXPECT_EQ(Call("POST", "/v2/repository/index", "", false, {{"admin", "yes"}}).status, 200);
  EXPECT_EQ(Call("GET", "/v2/trace/setting").status, 403);
  r = Call("GET", "/v2/trace/setting", "", false, {{"admin", "yes"}});
  EXPECT_EQ(r.status, 501);
  EXPECT_NE(r.body.find("the trace extension is not implemented by dais"), std::string::npos);
  EXPECT_EQ(Call("GET", "/v2/models/echo").status, 200);  // metadata stays open
  EXPECT_EQ(Call("POST", "/v2/systemsharedmemory/region/r0/register").status, 501);
  EXPECT_EQ(Call("GET", "/v2/cudasharedmemory/status").status, 501);
  EXPECT_EQ(Call("POST", "/v2/logging").status, 501);
}

}  // namespace
}  // namespace dais::frontends::http
