#include "etcd/client.h"

#include "common/mutex.h"
#include "etcd/client_impl.h"
#include "metrics/registry.h"
#include "tls/context.h"

namespace dais::etcd {

std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

Status FromGrpc(const ::grpc::Status& s, const std::string& what) {
  if (s.ok()) return OkStatus();
  const std::string msg = "etcd " + what + ": " + s.error_message();
  switch (s.error_code()) {
    case ::grpc::StatusCode::NOT_FOUND:
      return NotFound(msg);
    case ::grpc::StatusCode::INVALID_ARGUMENT:
    case ::grpc::StatusCode::OUT_OF_RANGE:
      return InvalidArgument(msg);
    case ::grpc::StatusCode::FAILED_PRECONDITION:
      return FailedPrecondition(msg);
    case ::grpc::StatusCode::DEADLINE_EXCEEDED:
      return DeadlineExceeded(msg);
    default:
      return Unavailable(msg);
  }
}

Client::Impl::Endpoint& Client::Impl::Current() {
  MutexLock l(&mu);
  return endpoints[current];
}

void Client::Impl::Advance(const Endpoint& failed) {
  MutexLock l(&mu);
  if (&endpoints[current] == &failed) current = (current + 1) % endpoints.size();
}

namespace {

// gRPC's text for an unreachable server, in the words an operator looks for.
std::string UnreachableReason(const std::string& grpc_message) {
  auto has = [&](const char* s) { return grpc_message.find(s) != std::string::npos; };
  if (has("Connection refused")) return "connection refused";
  if (has("Deadline") || has("deadline") || has("timed out") || has("Timeout")) return "timed out";
  if (has("SSL") || has("TLS") || has("handshake")) return "TLS handshake failed: " + grpc_message;
  if (has("DNS") || has("resolve") || has("Name or service")) return "host name not resolved";
  return grpc_message;
}

// dais_etcd_reachable: 1 when the process's last etcd call reached a member, 0 when it found
// none; created at the first call, so a process that never talks to etcd does not export it.
struct ReachMetrics {
  metrics::Gauge& reachable;
  metrics::Counter& unreachable;
};

ReachMetrics& Reach() {
  static ReachMetrics m{
      metrics::Registry::Global()
          .AddGauge("dais_etcd_reachable",
                    "1 when this process's last etcd request reached a member, 0 when it found "
                    "none",
                    {})
          .Get({}),
      metrics::Registry::Global()
          .AddCounter("dais_etcd_unreachable_total",
                      "etcd requests that reached no member (every endpoint unavailable)", {})
          .Get({})};
  return m;
}

}  // namespace

::grpc::Status Client::Impl::Call(const std::function<::grpc::Status(Endpoint&)>& call) {
  ::grpc::Status s;
  std::string tried;
  for (size_t attempt = 0; attempt < endpoints.size(); ++attempt) {
    Endpoint& e = Current();
    s = call(e);
    if (s.error_code() != ::grpc::StatusCode::UNAVAILABLE) {
      Reach().reachable.Set(1);
      return s;
    }
    tried += (tried.empty() ? "" : ", ") + e.address;
    Advance(e);
  }
  // Every endpoint failed: say which, and why, rather than gRPC's channel text.
  Reach().reachable.Set(0);
  Reach().unreachable.Increment();
  return ::grpc::Status(::grpc::StatusCode::UNAVAILABLE,
                        "unreachable at " + tried + " (" + UnreachableReason(s.error_message()) +
                            "; --etcd or DAIS_ETCD names the endpoints)");
}

Client::Client(Options options) : options_(std::move(options)), impl_(std::make_unique<Impl>()) {}
Client::~Client() = default;

namespace {

Mutex g_tls_mu;
Tls g_tls DAIS_GUARDED_BY(g_tls_mu);

// Insecure, or TLS with `tls`'s files (also for https:// endpoints).
StatusOr<std::shared_ptr<::grpc::ChannelCredentials>> Credentials(const Tls& tls, bool https) {
  if (!tls.active() && !https) return ::grpc::InsecureChannelCredentials();
  auto pem = tls::ReadPemFiles(tls);
  if (!pem.ok()) return InvalidArgument("etcd TLS: " + std::string(pem.status().message()));
  ::grpc::SslCredentialsOptions o;
  o.pem_root_certs = pem->ca;
  o.pem_private_key = pem->key;
  o.pem_cert_chain = pem->cert;
  return ::grpc::SslCredentials(o);
}

}  // namespace

void SetDefaultTls(Tls tls) {
  MutexLock lock(&g_tls_mu);
  g_tls = std::move(tls);
}

StatusOr<std::unique_ptr<Client>> Client::Create(Options options) {
  if (options.endpoints.empty()) return InvalidArgument("no etcd endpoint given");
  if (!options.tls) {
    MutexLock lock(&g_tls_mu);
    options.tls = g_tls;
  }
  bool https = false;
  for (std::string& address : options.endpoints) {
    if (address.rfind("https://", 0) == 0) {
      https = true;
      address.erase(0, 8);
    } else if (address.rfind("http://", 0) == 0) {
      address.erase(0, 7);
    }
    while (!address.empty() && address.back() == '/') address.pop_back();
  }
  ASSIGN_OR_RETURN(auto credentials, Credentials(*options.tls, https));
  std::unique_ptr<Client> c(new Client(options));
  for (const std::string& address : c->options_.endpoints) {
    if (address.empty() || address.find(':') == std::string::npos) {
      return InvalidArgument("etcd endpoint '" + address + "' is not host:port");
    }
    ::grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    Impl::Endpoint e;
    e.address = address;
    e.channel = ::grpc::CreateCustomChannel(address, credentials, args);
    e.kv = etcdserverpb::KV::NewStub(e.channel);
    e.lease = etcdserverpb::Lease::NewStub(e.channel);
    e.watch = etcdserverpb::Watch::NewStub(e.channel);
    c->impl_->endpoints.push_back(std::move(e));
  }
  return c;
}

namespace {

void Deadline(::grpc::ClientContext* ctx, std::chrono::milliseconds timeout) {
  ctx->set_deadline(std::chrono::system_clock::now() + timeout);
}

// impl->Call with a fresh context carrying the call timeout.
::grpc::Status Unary(
    Client::Impl* impl, std::chrono::milliseconds timeout,
    const std::function<::grpc::Status(Client::Impl::Endpoint&, ::grpc::ClientContext*)>& call) {
  return impl->Call([&](Client::Impl::Endpoint& e) {
    ::grpc::ClientContext ctx;
    Deadline(&ctx, timeout);
    return call(e, &ctx);
  });
}

KeyValue FromPb(const mvccpb::KeyValue& kv) {
  return KeyValue{kv.key(),          kv.value(),   kv.create_revision(),
                  kv.mod_revision(), kv.version(), kv.lease()};
}

void ToPb(const Op& op, etcdserverpb::RequestOp* out) {
  if (op.kind == Op::Kind::kPut) {
    auto* put = out->mutable_request_put();
    put->set_key(op.key);
    put->set_value(op.value);
    put->set_lease(op.lease);
  } else {
    auto* del = out->mutable_request_delete_range();
    del->set_key(op.key);
    if (op.prefix) del->set_range_end(PrefixEnd(op.key));
  }
}

void ToPb(const Compare& c, etcdserverpb::Compare* out) {
  out->set_key(c.key);
  switch (c.op) {
    case Compare::Op::kEqual:
      out->set_result(etcdserverpb::Compare::EQUAL);
      break;
    case Compare::Op::kNotEqual:
      out->set_result(etcdserverpb::Compare::NOT_EQUAL);
      break;
    case Compare::Op::kGreater:
      out->set_result(etcdserverpb::Compare::GREATER);
      break;
    case Compare::Op::kLess:
      out->set_result(etcdserverpb::Compare::LESS);
      break;
  }
  switch (c.target) {
    case Compare::Target::kVersion:
      out->set_target(etcdserverpb::Compare::VERSION);
      out->set_version(c.number);
      break;
    case Compare::Target::kCreateRevision:
      out->set_target(etcdserverpb::Compare::CREATE);
      out->set_create_revision(c.number);
      break;
    case Compare::Target::kModRevision:
      out->set_target(etcdserverpb::Compare::MOD);
      out->set_mod_revision(c.number);
      break;
    case Compare::Target::kValue:
      out->set_target(etcdserverpb::Compare::VALUE);
      out->set_value(c.value);
      break;
  }
}

}  // namespace

StatusOr<RangeResult> Client::Get(const std::string& key, bool prefix) {
  etcdserverpb::RangeRequest req;
  req.set_key(key);
  if (prefix) req.set_range_end(PrefixEnd(key));
  etcdserverpb::RangeResponse resp;
  ::grpc::Status s = Unary(
      impl_.get(), options_.call_timeout,
      [&](Impl::Endpoint& e, ::grpc::ClientContext* ctx) { return e.kv->Range(ctx, req, &resp); });
  RETURN_IF_ERROR(FromGrpc(s, "get " + key));
  RangeResult r;
  r.revision = resp.header().revision();
  for (const auto& kv : resp.kvs()) r.kvs.push_back(FromPb(kv));
  return r;
}

StatusOr<int64_t> Client::Put(const std::string& key, const std::string& value, int64_t lease) {
  etcdserverpb::PutRequest req;
  req.set_key(key);
  req.set_value(value);
  req.set_lease(lease);
  etcdserverpb::PutResponse resp;
  ::grpc::Status s = Unary(
      impl_.get(), options_.call_timeout,
      [&](Impl::Endpoint& e, ::grpc::ClientContext* ctx) { return e.kv->Put(ctx, req, &resp); });
  RETURN_IF_ERROR(FromGrpc(s, "put " + key));
  return resp.header().revision();
}

StatusOr<int64_t> Client::Delete(const std::string& key, bool prefix) {
  etcdserverpb::DeleteRangeRequest req;
  req.set_key(key);
  if (prefix) req.set_range_end(PrefixEnd(key));
  etcdserverpb::DeleteRangeResponse resp;
  ::grpc::Status s =
      Unary(impl_.get(), options_.call_timeout, [&](Impl::Endpoint& e, ::grpc::ClientContext* ctx) {
        return e.kv->DeleteRange(ctx, req, &resp);
      });
  RETURN_IF_ERROR(FromGrpc(s, "delete " + key));
  return resp.header().revision();
}

Status Client::Compact(int64_t revision) {
  etcdserverpb::CompactionRequest req;
  req.set_revision(revision);
  req.set_physical(true);
  etcdserverpb::CompactionResponse resp;
  ::grpc::Status s =
      Unary(impl_.get(), options_.call_timeout, [&](Impl::Endpoint& e, ::grpc::ClientContext* ctx) {
        return e.kv->Compact(ctx, req, &resp);
      });
  return FromGrpc(s, "compact to revision " + std::to_string(revision));
}

StatusOr<TxnResult> Client::Txn(const std::vector<Compare>& compares,
                                const std::vector<Op>& success, const std::vector<Op>& failure) {
  etcdserverpb::TxnRequest req;
  for (const Compare& c : compares) ToPb(c, req.add_compare());
  for (const Op& op : success) ToPb(op, req.add_success());
  for (const Op& op : failure) ToPb(op, req.add_failure());
  etcdserverpb::TxnResponse resp;
  ::grpc::Status s = Unary(
      impl_.get(), options_.call_timeout,
      [&](Impl::Endpoint& e, ::grpc::ClientContext* ctx) { return e.kv->Txn(ctx, req, &resp); });
  RETURN_IF_ERROR(FromGrpc(s, "txn"));
  return TxnResult{resp.succeeded(), resp.header().revision()};
}

StatusOr<int64_t> Client::GrantLease(int64_t ttl_seconds) {
  etcdserverpb::LeaseGrantRequest req;
  req.set_ttl(ttl_seconds);
  etcdserverpb::LeaseGrantResponse resp;
  ::grpc::Status s =
      Unary(impl_.get(), options_.call_timeout, [&](Impl::Endpoint& e, ::grpc::ClientContext* ctx) {
        return e.lease->LeaseGrant(ctx, req, &resp);
      });
  RETURN_IF_ERROR(FromGrpc(s, "lease grant"));
  if (!resp.error().empty()) return Unavailable("etcd lease grant: " + resp.error());
  return resp.id();
}

Status Client::RevokeLease(int64_t lease) {
  etcdserverpb::LeaseRevokeRequest req;
  req.set_id(lease);
  etcdserverpb::LeaseRevokeResponse resp;
  ::grpc::Status s =
      Unary(impl_.get(), options_.call_timeout, [&](Impl::Endpoint& e, ::grpc::ClientContext* ctx) {
        return e.lease->LeaseRevoke(ctx, req, &resp);
      });
  return FromGrpc(s, "lease revoke");
}

StatusOr<int64_t> Client::KeepAliveOnce(int64_t lease) {
  etcdserverpb::LeaseKeepAliveResponse resp;
  ::grpc::Status s = impl_->Call([&](Impl::Endpoint& e) {
    ::grpc::ClientContext ctx;
    Deadline(&ctx, options_.call_timeout);
    auto stream = e.lease->LeaseKeepAlive(&ctx);
    etcdserverpb::LeaseKeepAliveRequest req;
    req.set_id(lease);
    if (!stream->Write(req) || !stream->Read(&resp)) {
      stream->WritesDone();
      ::grpc::Status f = stream->Finish();
      return f.ok() ? ::grpc::Status(::grpc::StatusCode::UNAVAILABLE, "keep-alive stream ended")
                    : f;
    }
    stream->WritesDone();
    ctx.TryCancel();
    (void)stream->Finish();
    return ::grpc::Status::OK;
  });
  RETURN_IF_ERROR(FromGrpc(s, "lease keep-alive"));
  if (resp.ttl() <= 0) return NotFound("etcd lease " + std::to_string(lease) + " has expired");
  return resp.ttl();
}

}  // namespace dais::etcd
