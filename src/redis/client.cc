#include "redis/client.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <future>
#include <thread>
#include <utility>

#include "redis/router.h"

namespace dais::redis {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

// Owns the I/O thread and the Router that lives on it. Members are destroyed in reverse order:
// the Router (closed) before the io_context.
class Client::Impl {
 public:
  explicit Impl(ClientOptions options)
      : options_(std::move(options)),
        work_(asio::make_work_guard(io_)),
        router_(&io_, options_, &state_) {}

  void Start() {
    asio::post(io_, [this] { router_.Start(); });
    thread_ = std::thread([this] { io_.run(); });
  }

  void Stop() {
    asio::post(io_, [this] {
      router_.Shutdown();
      work_.reset();  // run() returns once the closed sockets' handlers have drained
    });
    thread_.join();
  }

  void Submit(std::vector<OpPtr> ops, Deadline deadline, BatchCallback cb) {
    asio::post(io_, [this, ops = std::move(ops), deadline, cb = std::move(cb)]() mutable {
      router_.Submit(std::move(ops), deadline, std::move(cb));
    });
  }

  bool OnIoThread() const { return std::this_thread::get_id() == thread_.get_id(); }
  Deadline DeadlineFor(std::chrono::milliseconds timeout) const {
    return Clock::now() + (timeout.count() > 0 ? timeout : options_.command_timeout);
  }

  const ClientOptions options_;
  ClientState state_;

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  Router router_;
  std::thread thread_;
};

namespace {

OpPtr MakeOp(std::string key, const Command& command, std::string encoded = {}) {
  auto op = std::make_shared<Op>();
  op->key = std::move(key);
  if (!encoded.empty()) {
    op->payload = std::move(encoded);
  } else if (command.empty()) {
    op->invalid = InvalidArgument("redis: empty command");
  } else {
    op->payload = EncodeCommand(command);
  }
  return op;
}

Command EvalCommand(std::string verb, std::string script_or_sha,
                    const std::vector<std::string>& keys, const std::vector<std::string>& args) {
  Command c;
  c.reserve(3 + keys.size() + args.size());
  c.push_back(std::move(verb));
  c.push_back(std::move(script_or_sha));
  c.push_back(std::to_string(keys.size()));
  c.insert(c.end(), keys.begin(), keys.end());
  c.insert(c.end(), args.begin(), args.end());
  return c;
}

BatchCallback Single(ReplyCallback cb) {
  return [cb = std::move(cb)](std::vector<StatusOr<Reply>> results) { cb(std::move(results[0])); };
}

template <typename T>
T Wait(const std::function<void(std::function<void(T)>)>& start) {
  auto promise = std::make_shared<std::promise<T>>();
  std::future<T> future = promise->get_future();
  start([promise](T value) { promise->set_value(std::move(value)); });
  return future.get();
}

const Status& OnIoThreadError() {
  static const Status s =
      FailedPrecondition("redis: blocking Run* called on the client's own I/O thread");
  return s;
}

}  // namespace

StatusOr<std::unique_ptr<Client>> Client::Create(ClientOptions options) {
  RETURN_IF_ERROR(PrepareTls(&options));
  RETURN_IF_ERROR(ValidateOptions(options));
  auto impl = std::make_unique<Impl>(std::move(options));
  impl->Start();
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Client::~Client() { impl_->Stop(); }

bool Client::cluster_mode() const { return impl_->state_.cluster_mode(); }
bool Client::Reachable() const { return impl_->state_.reachable(); }
bool Client::WaitUntilReachable(std::chrono::milliseconds timeout) const {
  return impl_->state_.WaitReachable(Clock::now() + timeout);
}
std::vector<std::string> Client::Masters() const { return impl_->state_.masters(); }
const ClientOptions& Client::options() const { return impl_->options_; }

void Client::Execute(KeyedCommand cmd, Deadline deadline, ReplyCallback cb) {
  impl_->Submit({MakeOp(std::move(cmd.key), cmd.command, std::move(cmd.encoded))}, deadline,
                Single(std::move(cb)));
}

void Client::ExecuteBatch(std::vector<KeyedCommand> cmds, Deadline deadline, BatchCallback cb) {
  std::vector<OpPtr> ops;
  ops.reserve(cmds.size());
  for (KeyedCommand& c : cmds) {
    ops.push_back(MakeOp(std::move(c.key), c.command, std::move(c.encoded)));
  }
  impl_->Submit(std::move(ops), deadline, std::move(cb));
}

void Client::Eval(const Script& script, std::vector<std::string> keys,
                  std::vector<std::string> args, Deadline deadline, ReplyCallback cb) {
  std::string key = keys.empty() ? std::string() : keys[0];
  OpPtr op = MakeOp(std::move(key), EvalCommand("EVALSHA", script.sha1(), keys, args));
  op->fallback = EncodeCommand(EvalCommand("EVAL", script.source(), keys, args));
  impl_->Submit({std::move(op)}, deadline, Single(std::move(cb)));
}

void Client::ExecuteOn(const std::string& node, Command cmd, Deadline deadline, ReplyCallback cb) {
  OpPtr op = MakeOp("", cmd);
  op->node = node;
  impl_->Submit({std::move(op)}, deadline, Single(std::move(cb)));
}

StatusOr<Reply> Client::Run(KeyedCommand cmd, std::chrono::milliseconds timeout) {
  if (impl_->OnIoThread()) return OnIoThreadError();
  return Wait<StatusOr<Reply>>([&](ReplyCallback cb) {
    Execute(std::move(cmd), impl_->DeadlineFor(timeout), std::move(cb));
  });
}

std::vector<StatusOr<Reply>> Client::RunBatch(std::vector<KeyedCommand> cmds,
                                              std::chrono::milliseconds timeout) {
  if (impl_->OnIoThread()) return std::vector<StatusOr<Reply>>(cmds.size(), OnIoThreadError());
  return Wait<std::vector<StatusOr<Reply>>>([&](BatchCallback cb) {
    ExecuteBatch(std::move(cmds), impl_->DeadlineFor(timeout), std::move(cb));
  });
}

StatusOr<Reply> Client::RunEval(const Script& script, std::vector<std::string> keys,
                                std::vector<std::string> args, std::chrono::milliseconds timeout) {
  if (impl_->OnIoThread()) return OnIoThreadError();
  return Wait<StatusOr<Reply>>([&](ReplyCallback cb) {
    Eval(script, std::move(keys), std::move(args), impl_->DeadlineFor(timeout), std::move(cb));
  });
}

StatusOr<Reply> Client::RunOn(const std::string& node, Command cmd,
                              std::chrono::milliseconds timeout) {
  if (impl_->OnIoThread()) return OnIoThreadError();
  return Wait<StatusOr<Reply>>([&](ReplyCallback cb) {
    ExecuteOn(node, std::move(cmd), impl_->DeadlineFor(timeout), std::move(cb));
  });
}

}  // namespace dais::redis
