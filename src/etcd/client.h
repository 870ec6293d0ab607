// A client of etcd's v3 API (KV, Lease, Watch) over grpc++, on the .proto files etcd ships
// (proto/CMakeLists.txt). What the cluster roles need and nothing more: ranges, puts, deletes,
// transactions with compares (a leader's writes are conditioned on its key), leases with
// keep-alive, and watches that resume after a disconnect.
//
// Endpoints: several host:port of one etcd cluster; a call that finds its endpoint unavailable
// is retried once on each of the others, so one member down does not stop the caller.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "dais/status.h"
#include "tls/config.h"

namespace dais::etcd {

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;
};

struct RangeResult {
  std::vector<KeyValue> kvs;
  int64_t revision = 0;  // the store's revision when read
};

// One comparison of a transaction: `key`'s create / mod revision, version or value against a
// number or a value.
struct Compare {
  enum class Target { kVersion, kCreateRevision, kModRevision, kValue };
  enum class Op { kEqual, kNotEqual, kGreater, kLess };
  std::string key;
  Target target = Target::kVersion;
  Op op = Op::kEqual;
  int64_t number = 0;
  std::string value;
};

struct Op {
  enum class Kind { kPut, kDelete };
  Kind kind = Kind::kPut;
  std::string key;
  std::string value;
  int64_t lease = 0;
  bool prefix = false;  // kDelete: every key under `key`
};

struct TxnResult {
  bool succeeded = false;
  int64_t revision = 0;
};

// The smallest key greater than every key that starts with `prefix`.
std::string PrefixEnd(const std::string& prefix);

// TLS to etcd (etcd's --cert-file, and --client-cert-auth for client certificates):
// tls::ClientConfig's CA, certificate and key files.
using Tls = tls::ClientConfig;

// The process's etcd TLS, used by every Client whose options name none: the commands set it once
// from --etcd-cacert / --etcd-cert / --etcd-key, so that each role's clients (registration,
// watches, leader election) all use it.
void SetDefaultTls(Tls tls);

class Client {
 public:
  struct Options {
    // host:port, or http://host:port / https://host:port (https: TLS, with the system's CAs
    // unless tls or the process default names a CA).
    std::vector<std::string> endpoints;
    std::chrono::milliseconds call_timeout{3000};
    std::optional<Tls> tls = std::nullopt;  // unset: the process default (SetDefaultTls)
  };
  // Makes the channels; connects lazily (an etcd that is down is an error of the first call).
  // InvalidArgument for an empty or malformed endpoint list.
  static StatusOr<std::unique_ptr<Client>> Create(Options options);
  ~Client();

  StatusOr<RangeResult> Get(const std::string& key, bool prefix = false);
  // The revision of the write.
  StatusOr<int64_t> Put(const std::string& key, const std::string& value, int64_t lease = 0);
  StatusOr<int64_t> Delete(const std::string& key, bool prefix = false);
  StatusOr<TxnResult> Txn(const std::vector<Compare>& compares, const std::vector<Op>& success,
                          const std::vector<Op>& failure = {});

  // Drops the history before `revision` (watches from an older revision get a compaction).
  Status Compact(int64_t revision);

  // A lease of `ttl_seconds`; its id.
  StatusOr<int64_t> GrantLease(int64_t ttl_seconds);
  Status RevokeLease(int64_t lease);
  // Renews `lease` once; NotFound when it has expired (its keys are gone). Returns the TTL left.
  StatusOr<int64_t> KeepAliveOnce(int64_t lease);

  const Options& options() const { return options_; }
  struct Impl;
  Impl* impl() const { return impl_.get(); }

 private:
  explicit Client(Options options);
  Options options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dais::etcd
