#include "frontends/connection_limit.h"

#include <sys/resource.h>

#include <algorithm>
#include <boost/asio/strand.hpp>
#include <cerrno>
#include <mutex>
#include <vector>

#include "common/logging.h"
#include "metrics/registry.h"

namespace dais::frontends {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// Every limiter of the process, for EvictOne across listeners.
Mutex g_limiters_mu;
std::vector<ConnectionLimiter*>& Limiters() {
  static auto* v = new std::vector<ConnectionLimiter*>();
  return *v;
}

}  // namespace

struct ConnectionLimiter::Metrics {
  metrics::Gauge& open;
  metrics::Counter& refused;
  metrics::Counter& refused_per_address;
  metrics::Counter& evicted;
  metrics::Counter& slow;
  metrics::Family<metrics::Counter>& accept_errors;
  std::string listener;
};

ConnectionLimiter::ConnectionLimiter(std::string listener, int64_t max_connections)
    : max_(std::max<int64_t>(1, max_connections)) {
  auto& r = metrics::Registry::Global();
  r.AddGauge("dais_listener_connections_max",
             "Connections a listener admits (--http-max-connections, --grpc-max-connections)",
             {"listener"})
      .Get({listener})
      .Set(static_cast<double>(max_));
  auto& refused = r.AddCounter(
      "dais_listener_connections_refused_total",
      "Connections closed at accept: the listener was at its limit with none of its connections "
      "idle or receiving (reason limit), or the client's address was at its cap (per_address)",
      {"listener", "reason"});
  metrics_ = new Metrics{
      r.AddGauge("dais_listener_connections", "Open connections of a listener", {"listener"})
          .Get({listener}),
      refused.Get({listener, "limit"}),
      refused.Get({listener, "per_address"}),
      r.AddCounter("dais_listener_connections_evicted_total",
                   "Idle (or, when none is, still receiving) connections closed to make room for "
                   "a new one at the limit",
                   {"listener"})
          .Get({listener}),
      r.AddCounter("dais_listener_slow_requests_total",
                   "Requests closed for arriving slower than the listener's minimum rate",
                   {"listener"})
          .Get({listener}),
      r.AddCounter("dais_listener_accept_errors_total",
                   "accept() failures (EMFILE: out of file descriptors, ...); the listener backs "
                   "off",
                   {"listener", "error"}),
      listener};
  MutexLock lock(&g_limiters_mu);
  Limiters().push_back(this);
}

ConnectionLimiter::~ConnectionLimiter() {
  {
    MutexLock lock(&g_limiters_mu);
    auto& v = Limiters();
    v.erase(std::remove(v.begin(), v.end(), this), v.end());
  }
  delete metrics_;
}

ConnectionLimiter::Slot::~Slot() {
  MutexLock l(&owner_->mu_);
  Unlist();
  --owner_->open_;
  if (!address_.empty()) {
    auto it = owner_->per_address_.find(address_);
    if (it != owner_->per_address_.end() && --it->second <= 0) owner_->per_address_.erase(it);
  }
  owner_->metrics_->open.Add(-1);
}

void ConnectionLimiter::Slot::Unlist() {
  if (state_ == State::kIdle) {
    parked_.splice(parked_.end(), served_ ? owner_->idle_ : owner_->silent_, pos_);
  }
  if (state_ == State::kReceiving) parked_.splice(parked_.end(), owner_->receiving_, pos_);
  state_ = State::kBusy;
}

void ConnectionLimiter::Slot::SetCloser(std::function<void()> close) {
  MutexLock l(&owner_->mu_);
  close_ = std::move(close);
}

void ConnectionLimiter::Slot::Idle(std::function<void()> close) {
  SetCloser(std::move(close));
  Idle();
}

void ConnectionLimiter::Slot::Idle() {
  MutexLock l(&owner_->mu_);
  // Without a closer (SetCloser not called: a bug of the caller) it cannot be closed for room:
  // it stays out of the lists rather than be taken with nothing to call.
  if (state_ == State::kIdle || evicted_ || !close_) return;
  Unlist();
  state_ = State::kIdle;
  std::list<Slot*>& list = served_ ? owner_->idle_ : owner_->silent_;
  list.splice(list.end(), parked_, pos_);
}

void ConnectionLimiter::Slot::Receiving(std::function<void()> close) {
  SetCloser(std::move(close));
  Receiving();
}

void ConnectionLimiter::Slot::Receiving() {
  MutexLock l(&owner_->mu_);
  if (evicted_) return;  // closing already
  Unlist();
  served_ = true;
  if (!close_) return;  // as in Idle
  state_ = State::kReceiving;
  receiving_since_ = std::chrono::steady_clock::now();
  received_.store(0, std::memory_order_relaxed);
  owner_->receiving_.splice(owner_->receiving_.end(), parked_, pos_);
}

bool ConnectionLimiter::Slot::served() const {
  MutexLock l(&owner_->mu_);
  return served_;
}

void ConnectionLimiter::Slot::Busy() {
  MutexLock l(&owner_->mu_);
  Unlist();
  served_ = true;
}

void ConnectionLimiter::Slot::CountSlow() { owner_->metrics_->slow.Increment(); }

void ConnectionLimiter::set_max_per_address(int64_t max) {
  MutexLock l(&mu_);
  max_per_address_ = max;
}

std::function<void()> ConnectionLimiter::TakeEvictable() {
  Slot* victim = nullptr;
  if (!silent_.empty()) {
    victim = silent_.front();
  } else if (!idle_.empty()) {
    victim = idle_.front();
  } else if (!receiving_.empty()) {
    // The lowest byte rate among those receiving for a second or more (a request that has just
    // begun has had no time to send anything); else the one receiving the longest.
    const auto now = std::chrono::steady_clock::now();
    double lowest = 0;
    for (Slot* s : receiving_) {
      const double secs = std::chrono::duration<double>(now - s->receiving_since_).count();
      if (secs < 1) break;  // the list is in order of Receiving: the rest are younger
      const double rate = static_cast<double>(s->received_.load(std::memory_order_relaxed)) / secs;
      if (victim == nullptr || rate < lowest) victim = s, lowest = rate;
    }
    if (victim == nullptr) victim = receiving_.front();
  }
  if (victim == nullptr) return nullptr;
  std::function<void()> close = victim->close_;  // evicted_: never taken again
  victim->Unlist();
  victim->evicted_ = true;
  return close;
}

std::unique_ptr<ConnectionLimiter::Slot> ConnectionLimiter::Admit(const std::string& address) {
  std::function<void()> close;
  std::string key;
  {
    MutexLock l(&mu_);
    if (max_per_address_ > 0 && !address.empty()) {
      int64_t& n = per_address_[address];
      if (n >= max_per_address_) {
        metrics_->refused_per_address.Increment();
        return nullptr;
      }
      key = address;
    }
    if (open_ >= max_) {
      close = TakeEvictable();
      if (!close) {
        metrics_->refused.Increment();
        if (!key.empty() && per_address_[key] == 0) per_address_.erase(key);
        return nullptr;
      }
    }
    ++open_;  // the evicted connection releases its place when it has closed
    if (!key.empty()) ++per_address_[key];
  }
  metrics_->open.Add(1);
  if (close) {
    metrics_->evicted.Increment();
    close();
  }
  return std::unique_ptr<Slot>(new Slot(this, std::move(key)));
}

bool ConnectionLimiter::EvictOneHere() {
  std::function<void()> close;
  {
    MutexLock l(&mu_);
    close = TakeEvictable();
  }
  if (!close) return false;
  metrics_->evicted.Increment();
  close();
  return true;
}

bool ConnectionLimiter::EvictOne() {
  if (EvictOneHere()) return true;
  MutexLock lock(&g_limiters_mu);
  for (ConnectionLimiter* other : Limiters()) {
    if (other != this && other->EvictOneHere()) return true;
  }
  return false;
}

void ConnectionLimiter::CountAcceptError(const std::string& error) {
  metrics_->accept_errors.Get({metrics_->listener, error}).Increment();
}

int64_t ConnectionLimiter::open() const {
  MutexLock l(&mu_);
  return open_;
}

bool ConnectionLimiter::UnderPressure() const {
  MutexLock l(&mu_);
  return open_ * 4 >= max_ * 3;
}

DefaultConnectionLimits ConnectionLimitsFromRlimit() {
  DefaultConnectionLimits d;
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rlimit raised = rl;
    raised.rlim_cur =
        rl.rlim_max == RLIM_INFINITY ? std::max<rlim_t>(rl.rlim_cur, 1 << 20) : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
  }
  d.open_files = rl.rlim_cur == RLIM_INFINITY ? (1 << 20) : static_cast<int64_t>(rl.rlim_cur);
  const int64_t reserve = std::max<int64_t>(256, d.open_files / 8);
  d.metrics = 64;
  const int64_t left = d.open_files - reserve - d.metrics;
  d.http = d.grpc = std::max<int64_t>(16, left / 2);
  return d;
}

AcceptLoop::AcceptLoop(std::vector<net::io_context*> iocs, tcp::acceptor& acceptor,
                       ConnectionLimiter& limiter, bool strand, OnConnection on_connection)
    : iocs_(std::move(iocs)),
      acceptor_(acceptor),
      limiter_(limiter),
      strand_(strand),
      on_connection_(std::move(on_connection)),
      backoff_timer_(*iocs_.front()) {}

void AcceptLoop::Start() {
  auto handler = [this](const boost::system::error_code& ec, tcp::socket s) {
    OnAccept(ec, std::move(s));
  };
  net::io_context& ioc = *iocs_[next_++ % iocs_.size()];
  if (strand_) {
    acceptor_.async_accept(net::make_strand(ioc), std::move(handler));
  } else {
    acceptor_.async_accept(ioc, std::move(handler));
  }
}

namespace {

// Errors that say the process or the system is out of something: retrying at once would spin.
const char* ResourceError(const boost::system::error_code& ec) {
  if (ec.category() != boost::system::system_category()) return nullptr;
  switch (ec.value()) {
    case EMFILE:
      return "emfile";
    case ENFILE:
      return "enfile";
    case ENOBUFS:
      return "enobufs";
    case ENOMEM:
      return "enomem";
    default:
      return nullptr;
  }
}

}  // namespace

void AcceptLoop::OnAccept(const boost::system::error_code& ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
  if (ec) {
    const char* resource = ResourceError(ec);
    limiter_.CountAcceptError(resource ? resource : "other");
    if (resource == nullptr) return Start();  // e.g. ECONNABORTED: the next one is fine
    // Out of descriptors: free one if an idle connection can go, and wait before trying again.
    limiter_.EvictOne();
    backoff_ms_ = std::clamp(backoff_ms_ * 2, 10, 1000);
    LOG_WARNING("accept: {} ({} connections open); retrying in {} ms", ec.message(),
                limiter_.open(), backoff_ms_);
    backoff_timer_.expires_after(std::chrono::milliseconds(backoff_ms_));
    backoff_timer_.async_wait([this](const boost::system::error_code& wait_ec) {
      if (!wait_ec) Start();
    });
    return;
  }
  backoff_ms_ = 0;
  boost::system::error_code peer_ec;
  const auto peer = socket.remote_endpoint(peer_ec);
  if (auto slot = limiter_.Admit(peer_ec ? std::string() : peer.address().to_string())) {
    boost::system::error_code opt_ec;
    socket.set_option(tcp::no_delay(true), opt_ec);
    on_connection_(std::move(socket), std::move(slot));
  } else {
    boost::system::error_code close_ec;
    socket.close(close_ec);  // refused: at the limit with nothing idle
  }
  Start();
}

}  // namespace dais::frontends
