// Client's insides, shared with watch.cc and lease_keeper.cc (not part of the interface).
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>

#include "etcd/client.h"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace dais::etcd {

struct Client::Impl {
  struct Endpoint {
    std::string address;
    std::shared_ptr<::grpc::Channel> channel;
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
    std::unique_ptr<etcdserverpb::Watch::Stub> watch;
  };
  std::vector<Endpoint> endpoints;
  Mutex mu;
  size_t current DAIS_GUARDED_BY(mu) = 0;

  // Runs `call` on the current endpoint and, while it fails with UNAVAILABLE, on each other one
  // (the first that answers becomes current). The status of the last attempt otherwise.
  ::grpc::Status Call(const std::function<::grpc::Status(Endpoint&)>& call);
  Endpoint& Current();
  void Advance(const Endpoint& failed);
};

// A grpc status as a dais Status naming etcd.
Status FromGrpc(const ::grpc::Status& s, const std::string& what);

}  // namespace dais::etcd
