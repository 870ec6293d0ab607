#include "memory_grpc_load.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "memory.grpc.pb.h"

namespace {

namespace pb = dais::memory::v1;
using Clock = std::chrono::steady_clock;

struct Slot {
  std::unique_ptr<pb::Memory::Stub> stub;
  std::unique_ptr<grpc::ClientContext> context;
  pb::SearchResponse response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<pb::SearchResponse>> reader;
  Clock::time_point sent;
};

}  // namespace

GrpcLoadResult GrpcSearchLoad(int port, const std::vector<float>& queries, int dim, int nq, int ef,
                              int concurrency, double seconds) {
  GrpcLoadResult r;
  std::vector<pb::SearchRequest> requests(nq);
  for (int q = 0; q < nq; ++q) {
    requests[q].set_collection("bench");
    requests[q].set_k(10);
    requests[q].set_ef(static_cast<uint32_t>(ef));
    requests[q].set_without_payload(true);
    for (int j = 0; j < dim; ++j) requests[q].add_vector(queries[q * dim + j]);
  }
  const std::string target = "127.0.0.1:" + std::to_string(port);
  std::vector<Slot> slots(concurrency);
  for (int i = 0; i < concurrency; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection per slot
    args.SetInt("dais.bench.slot", i);
    auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
      std::fprintf(stderr, "gRPC load: cannot connect to %s\n", target.c_str());
      return r;
    }
    slots[i].stub = pb::Memory::NewStub(channel);
  }
  grpc::CompletionQueue cq;
  size_t next = 0;
  auto start = [&](size_t i) {
    Slot& s = slots[i];
    s.context = std::make_unique<grpc::ClientContext>();
    s.response.Clear();
    s.sent = Clock::now();
    s.reader = s.stub->PrepareAsyncSearch(s.context.get(), requests[next++ % nq], &cq);
    s.reader->StartCall();
    s.reader->Finish(&s.response, &s.status, reinterpret_cast<void*>(i));
  };
  for (int i = 0; i < concurrency; ++i) start(i);
  const Clock::time_point begin = Clock::now() + std::chrono::seconds(1);  // after the warm-up
  const Clock::time_point end =
      begin + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<double> latencies;
  int in_flight = concurrency;
  void* tag = nullptr;
  bool ok = false;
  while (in_flight > 0 && cq.Next(&tag, &ok)) {
    const auto i = reinterpret_cast<size_t>(tag);
    const Clock::time_point now = Clock::now();
    if (slots[i].sent >= begin && now <= end) {
      if (ok && slots[i].status.ok()) {
        latencies.push_back(std::chrono::duration<double, std::micro>(now - slots[i].sent).count());
      } else {
        ++r.errors;
      }
    }
    if (now < end) {
      start(i);
    } else {
      --in_flight;
    }
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (latencies.empty()) return r;
  r.qps = static_cast<double>(latencies.size()) / seconds;
  std::sort(latencies.begin(), latencies.end());
  r.p50_us = latencies[latencies.size() / 2];
  r.p99_us = latencies[latencies.size() * 99 / 100];
  return r;
}
