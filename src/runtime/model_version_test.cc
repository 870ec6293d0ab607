// ModelVersion on a fake backend with a fixed delay: batching, validation, drain on shutdown.
#include "runtime/model_version.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <thread>

#include "common/status_testing.h"
#include "runtime/model_config.h"

namespace dais::runtime {
namespace {

// Doubles its FP32 input after sleeping `delay`; records batch sizes.
class DoublerInstance : public BackendInstance {
 public:
  DoublerInstance(std::chrono::microseconds delay, std::vector<int64_t>* sizes, Mutex* mu)
      : delay_(delay), sizes_(sizes), mu_(mu) {}
  Status Execute(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) override {
    std::this_thread::sleep_for(delay_);
    const Tensor& in = inputs[0];
    {
      MutexLock lock(mu_);
      sizes_->push_back(in.shape[0]);
    }
    Tensor out;
    out.name = "OUTPUT__0";
    out.dtype = DataType::kFp32;
    out.shape = in.shape;
    float* dst = reinterpret_cast<float*>(out.Allocate(in.data.size()));
    const float* src = reinterpret_cast<const float*>(in.data.data());
    for (size_t i = 0; i < in.data.size() / 4; ++i) dst[i] = 2 * src[i];
    outputs->push_back(std::move(out));
    return OkStatus();
  }

 private:
  std::chrono::microseconds delay_;
  std::vector<int64_t>* sizes_;
  Mutex* mu_;
};

class FakeBackend : public Backend {
 public:
  explicit FakeBackend(std::chrono::microseconds delay) : delay_(delay) {}
  std::string_view name() const override { return "fake"; }
  StatusOr<std::unique_ptr<BackendInstance>> CreateInstance(const std::string&,
                                                            const inference::ModelConfig&,
                                                            int) override {
    return std::unique_ptr<BackendInstance>(new DoublerInstance(delay_, &sizes, &mu));
  }
  Mutex mu;
  std::vector<int64_t> sizes;

 private:
  std::chrono::microseconds delay_;
};

inference::ModelConfig Config(const std::string& batching, int instances = 1) {
  std::string text = R"(
    name: "m" backend: "fake" max_batch_size: 8
    input [{ name: "INPUT__0" data_type: TYPE_FP32 dims: [2] }]
    output [{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: [2] }]
    instance_group [{ count: )" +
                     std::to_string(instances) + R"( kind: KIND_CPU }]
  )" + batching;
  auto c = ParseModelConfig(text, "test");
  EXPECT_OK(c);
  return *c;
}

RequestPtr Request(float a, float b, std::promise<StatusOr<ResponsePtr>>* done) {
  auto r = std::make_unique<InferenceRequest>();
  r->model_name = "m";
  Tensor t;
  t.name = "INPUT__0";
  t.dtype = DataType::kFp32;
  t.shape = {1, 2};
  float v[2] = {a, b};
  std::memcpy(t.Allocate(8), v, 8);
  r->inputs.push_back(std::move(t));
  r->on_complete = [done](StatusOr<ResponsePtr> res) { done->set_value(std::move(res)); };
  return r;
}

TEST(ModelVersionTest, ConcurrentRequestsAreBatchedAndAnsweredInOrder) {
  FakeBackend backend(std::chrono::milliseconds(20));
  auto mv = ModelVersion::Load("m", 1, "/nonexistent",
                               Config("dynamic_batching { max_queue_delay_microseconds: 50000 }"),
                               &backend);
  ASSERT_OK(mv);
  constexpr int kN = 8;
  std::vector<std::promise<StatusOr<ResponsePtr>>> done(kN);
  for (int i = 0; i < kN; ++i) {
    RequestPtr r = Request(static_cast<float>(i), 1.f, &done[i]);
    ASSERT_OK((*mv)->Enqueue(r));
  }
  for (int i = 0; i < kN; ++i) {
    auto res = done[i].get_future().get();
    ASSERT_OK(res);
    const float* out = reinterpret_cast<const float*>((*res)->outputs[0].data.data());
    EXPECT_EQ(out[0], 2.f * i);
    EXPECT_EQ(out[1], 2.f);
    EXPECT_EQ((*res)->outputs[0].shape, (std::vector<int64_t>{1, 2}));
  }
  MutexLock lock(&backend.mu);
  // The warm-up ran a batch of 1 first; then the 8 requests formed one full batch.
  ASSERT_EQ(backend.sizes.size(), 2u);
  EXPECT_EQ(backend.sizes[1], 8);
  EXPECT_EQ((*mv)->stats().execution_count.load(), 1u);
  EXPECT_EQ((*mv)->stats().inference_count.load(), 8u);
}

TEST(ModelVersionTest, ValidationNamesTheProblem) {
  FakeBackend backend(std::chrono::milliseconds(0));
  auto mv = ModelVersion::Load("m", 1, "/x", Config(""), &backend);
  ASSERT_OK(mv);
  std::promise<StatusOr<ResponsePtr>> done;
  RequestPtr r = Request(1, 2, &done);
  r->inputs[0].shape = {1, 3};
  Status s = (*mv)->Enqueue(r);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("shape [1,3] does not match the model's [-1,2]"), std::string::npos)
      << s.message();
  r = Request(1, 2, &done);
  r->inputs[0].name = "nope";
  s = (*mv)->Enqueue(r);
  EXPECT_NE(s.message().find("unknown input 'nope'"), std::string::npos) << s.message();
  r = Request(1, 2, &done);
  r->inputs[0].dtype = DataType::kInt32;
  s = (*mv)->Enqueue(r);
  EXPECT_NE(s.message().find("datatype INT32 does not match the model's FP32"), std::string::npos)
      << s.message();
  r = Request(1, 2, &done);
  r->outputs.push_back({"bad", false});
  s = (*mv)->Enqueue(r);
  EXPECT_NE(s.message().find("unknown output 'bad'"), std::string::npos) << s.message();
}

TEST(ModelVersionTest, ShutdownFinishesQueuedRequestsThenRefuses) {
  FakeBackend backend(std::chrono::milliseconds(10));
  auto mv = ModelVersion::Load("m", 1, "/x", Config(""), &backend);
  ASSERT_OK(mv);
  constexpr int kN = 5;
  std::vector<std::promise<StatusOr<ResponsePtr>>> done(kN);
  for (int i = 0; i < kN; ++i) {
    RequestPtr r = Request(1, 1, &done[i]);
    ASSERT_OK((*mv)->Enqueue(r));
  }
  (*mv)->Shutdown();
  for (int i = 0; i < kN; ++i) EXPECT_OK(done[i].get_future().get());
  std::promise<StatusOr<ResponsePtr>> late;
  RequestPtr r = Request(1, 1, &late);
  EXPECT_EQ((*mv)->Enqueue(r).code(), StatusCode::kUnavailable);
}

TEST(ModelVersionTest, FullQueueRejects) {
  FakeBackend backend(std::chrono::milliseconds(30));
  auto mv = ModelVersion::Load("m", 1, "/x",
                               Config("dynamic_batching { max_queue_delay_microseconds: 100000 "
                                      "default_queue_policy { max_queue_size: 2 } }"),
                               &backend);
  ASSERT_OK(mv);
  std::vector<std::promise<StatusOr<ResponsePtr>>> done(3);
  RequestPtr a = Request(1, 1, &done[0]), b = Request(1, 1, &done[1]), c = Request(1, 1, &done[2]);
  ASSERT_OK((*mv)->Enqueue(a));
  ASSERT_OK((*mv)->Enqueue(b));
  EXPECT_EQ((*mv)->Enqueue(c).code(), StatusCode::kUnavailable);
  (*mv)->Shutdown();  // answers a and b while their promises are alive
  EXPECT_OK(done[0].get_future().get());
}

// Runs `r` marked may_run_inline; returns the thread that answered it and whether the answer
// came before Enqueue returned.
std::pair<std::thread::id, bool> RunInline(ModelVersion& mv, bool may_run_inline) {
  std::promise<StatusOr<ResponsePtr>> done;
  RequestPtr r = Request(3, 4, &done);
  std::thread::id answered_by;
  bool answered = false;
  r->on_complete = [&](StatusOr<ResponsePtr> res) {
    answered_by = std::this_thread::get_id();
    answered = true;
    done.set_value(std::move(res));
  };
  r->may_run_inline = may_run_inline;
  EXPECT_OK(mv.Enqueue(r));
  const bool before_return = answered;
  auto res = done.get_future().get();
  EXPECT_OK(res);
  if (res.ok()) {
    EXPECT_EQ(reinterpret_cast<const float*>((*res)->outputs[0].data.data())[1], 8.f);
  }
  return {answered_by, before_return};
}

TEST(ModelVersionTest, IdleFastModelRunsOnTheCallingThread) {
  FakeBackend backend(std::chrono::milliseconds(0));
  auto mv = ModelVersion::Load("m", 1, "/x", Config("dynamic_batching { }"), &backend);
  ASSERT_OK(mv);
  for (int i = 0; i < 3; ++i) {
    auto [thread, before_return] = RunInline(**mv, true);
    EXPECT_EQ(thread, std::this_thread::get_id());
    EXPECT_TRUE(before_return);
  }
  // Not marked: queued and answered by the instance's thread.
  auto [thread, before_return] = RunInline(**mv, false);
  EXPECT_NE(thread, std::this_thread::get_id());
  (*mv)->Shutdown();
  MutexLock lock(&backend.mu);
  EXPECT_EQ(backend.sizes.size(), 5u);  // warm-up + 4
}

TEST(ModelVersionTest, InlineExecutionOffForSlowModelsOrByParameter) {
  FakeBackend slow(std::chrono::milliseconds(2));  // ~2 ms: over the 1 ms default
  auto mv = ModelVersion::Load("m", 1, "/x", Config("dynamic_batching { }"), &slow);
  ASSERT_OK(mv);
  EXPECT_NE(RunInline(**mv, true).first, std::this_thread::get_id());
  FakeBackend fast(std::chrono::milliseconds(0));
  auto off = ModelVersion::Load(
      "m", 1, "/x",
      Config("parameters { key: \"inline_execution_max_microseconds\" value: { string_value: "
             "\"0\" } }"),
      &fast);
  ASSERT_OK(off);
  EXPECT_NE(RunInline(**off, true).first, std::this_thread::get_id());
  // A queue delay means a lone request waits: not run inline either.
  auto delayed = ModelVersion::Load(
      "m", 1, "/x", Config("dynamic_batching { max_queue_delay_microseconds: 1000 }"), &fast);
  ASSERT_OK(delayed);
  EXPECT_NE(RunInline(**delayed, true).first, std::this_thread::get_id());
}

TEST(ModelVersionTest, InlineDefaultIsLongerForOneInstance) {
  // A 200 us model: over the 100 us default of a model with two instances (a request that comes
  // meanwhile could run beside it), under the 1 ms default of a model with one.
  FakeBackend backend(std::chrono::microseconds(200));
  auto one = ModelVersion::Load("m", 1, "/x", Config("dynamic_batching { }", 1), &backend);
  ASSERT_OK(one);
  RunInline(**one, true);  // the warm-up's cost is replaced by the first real batch's
  EXPECT_EQ(RunInline(**one, true).first, std::this_thread::get_id());
  auto two = ModelVersion::Load("m", 1, "/x", Config("dynamic_batching { }", 2), &backend);
  ASSERT_OK(two);
  for (int i = 0; i < 2; ++i) EXPECT_NE(RunInline(**two, true).first, std::this_thread::get_id());
  (*one)->Shutdown();
  (*two)->Shutdown();
}

TEST(ModelVersionTest, InlineAndInstanceThreadsNeverShareAnInstance) {
  // Many callers, half of them inline-capable, on one instance: the backend sees one batch at a
  // time (it would record overlapping calls), and every request is answered.
  class Exclusive : public BackendInstance {
   public:
    explicit Exclusive(std::atomic<int>* overlaps) : overlaps_(overlaps) {}
    Status Execute(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) override {
      if (running_.exchange(true)) overlaps_->fetch_add(1);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      Tensor out;
      out.name = "OUTPUT__0";
      out.dtype = DataType::kFp32;
      out.shape = inputs[0].shape;
      std::memcpy(out.Allocate(inputs[0].data.size()), inputs[0].data.data(),
                  inputs[0].data.size());
      outputs->push_back(std::move(out));
      running_ = false;
      return OkStatus();
    }

   private:
    std::atomic<bool> running_{false};
    std::atomic<int>* overlaps_;
  };
  class ExclusiveBackend : public Backend {
   public:
    std::string_view name() const override { return "fake"; }
    StatusOr<std::unique_ptr<BackendInstance>> CreateInstance(const std::string&,
                                                              const inference::ModelConfig&,
                                                              int) override {
      return std::unique_ptr<BackendInstance>(new Exclusive(&overlaps));
    }
    std::atomic<int> overlaps{0};
  } backend;
  auto mv = ModelVersion::Load("m", 1, "/x", Config("dynamic_batching { }"), &backend);
  ASSERT_OK(mv);
  constexpr int kThreads = 4, kEach = 200;
  std::atomic<int> answered{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        std::promise<StatusOr<ResponsePtr>> done;
        RequestPtr r = Request(1, 2, &done);
        r->may_run_inline = t % 2 == 0;
        ASSERT_OK((*mv)->Enqueue(r));
        if (done.get_future().get().ok()) answered.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  (*mv)->Shutdown();
  EXPECT_EQ(answered.load(), kThreads * kEach);
  EXPECT_EQ(backend.overlaps.load(), 0);
}

}  // namespace
}  // namespace dais::runtime
