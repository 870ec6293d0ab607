// Connection admission for one listener (HTTP, gRPC, metrics), and the accept loop that applies
// it. Issue 11: with ~20,500 idle TCP connections the process reached its open-file limit, the I/O
// threads spun on accept (EMFILE) and /v2/health/live timed out for everyone.
//
// Policy (nginx's, ngx_drain_connections): at most `max` connections are open. At the limit a new
// connection makes room by closing an idle one: first a silent connection (one that has not yet
// completed a request head), the one accepted longest ago; only when none is silent, the
// connection that has been waiting for its next request the longest. When none is idle the new
// one is refused: closed at once. Issue 32: when none is idle, a connection still receiving a
// request (head read, body or gRPC message arriving) is closed for the newcomer, the one with the
// lowest byte rate first; a request that averages under the listener's minimum rate after a
// grace period is closed by its server anyway (EndpointOptions::min_request_bytes_per_sec). Issue
// 31: with plain least-recently-idle order, a flood of 600 connections that never sent a byte
// closed a client sending a request every 100 ms on one keep-alive connection (each newcomer was
// younger than the client's last answer); a connection that has served requests now outlives any
// number of silent ones. Under pressure (UnderPressure: three quarters of the limit open) a silent
// connection also gets a short header timeout from its server (http_server.h:
// header_timeout_under_pressure_secs). Idle connections are cheap to close (no request is lost,
// clients reconnect), so clients that hold connections without using them cannot starve the ones
// that send requests. An accept that fails for lack of descriptors or memory closes one idle
// connection and retries after a backoff (10 ms doubling to 1 s) instead of spinning on a listening
// socket that stays readable.
//
// Threads: everything is thread-safe; Slot methods are called by the connection that owns it.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"

namespace dais::frontends {

class ConnectionLimiter {
 public:
  // `listener` labels the metrics: dais_listener_connections{listener}, ..._max,
  // ..._refused_total, ..._evicted_total and dais_listener_accept_errors_total.
  ConnectionLimiter(std::string listener, int64_t max_connections);
  ~ConnectionLimiter();
  ConnectionLimiter(const ConnectionLimiter&) = delete;
  ConnectionLimiter& operator=(const ConnectionLimiter&) = delete;

  // One admitted connection; destroying it releases the place.
  class Slot {
   public:
    ~Slot();
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    // How the connection is closed to make room for a new one (callable from any thread; called
    // at most once), kept for the connection's life: set it once, then Idle() and Receiving()
    // cost no allocation per request.
    void SetCloser(std::function<void()> close);
    // The connection waits for a request: its closer may be called to make room for a new
    // connection. With `close`: SetCloser(close) first.
    void Idle();
    void Idle(std::function<void()> close);
    // The connection is receiving a request (an HTTP body after its head; gRPC calls whose
    // messages are still arriving and none being served): `close` may be called to make room
    // when no connection is idle, the slowest receiver first (Progress's bytes over the time
    // since this call). Issue 32: 1,030 connections that sent a head and nothing more locked
    // every new client out.
    void Receiving();
    void Receiving(std::function<void()> close);
    // Bytes of the request received since Receiving (any thread).
    void Progress(uint64_t bytes) { received_.fetch_add(bytes, std::memory_order_relaxed); }
    // The connection is serving a request (its head is complete): it will not be closed to make
    // room, and from now on it is no longer silent.
    void Busy();
    // A request was closed for arriving slower than the minimum rate (counted).
    void CountSlow();
    // It has completed at least one request head.
    bool served() const;
    bool UnderPressure() const { return owner_->UnderPressure(); }

   private:
    friend class ConnectionLimiter;
    enum class State { kBusy, kIdle, kReceiving };
    Slot(ConnectionLimiter* owner, std::string address)
        : owner_(owner), address_(std::move(address)), pos_(parked_.insert(parked_.end(), this)) {}
    // Out of whichever list it is in. owner_->mu_ held.
    void Unlist();
    ConnectionLimiter* owner_;
    const std::string address_;   // the client's, when a per-address cap applies
    State state_ = State::kBusy;  // guarded by owner_->mu_
    bool evicted_ = false;        // guarded by owner_->mu_; its close was called: never again
    bool served_ = false;         // guarded by owner_->mu_; which idle list pos_ is in
    // Its one list node, allocated once: spliced into the owner's list of its state and back
    // into parked_ (no allocation per request).
    std::list<Slot*> parked_;
    std::list<Slot*>::iterator pos_;
    std::function<void()> close_;                            // guarded by owner_->mu_
    std::chrono::steady_clock::time_point receiving_since_;  // guarded by owner_->mu_
    std::atomic<uint64_t> received_{0};
  };

  // On accept; `address`: the client's (for the per-address cap). Null: refused (the caller
  // closes the socket; counted).
  std::unique_ptr<Slot> Admit(const std::string& address = "");
  // Closes the longest-idle connection of this listener, else of any other listener of the
  // process (descriptors are per process). True if one was closed.
  bool EvictOne();
  void CountAcceptError(const std::string& error);
  // Caps connections per client address (0: none).
  void set_max_per_address(int64_t max);

  int64_t open() const;
  // Three quarters of the limit or more are open.
  bool UnderPressure() const;

 private:
  struct Metrics;
  bool EvictOneHere();
  // Takes the connection to close for room out of its list: the oldest silent one, else the
  // longest idle, else the slowest receiving; its close function, or empty. mu_ held.
  std::function<void()> TakeEvictable() DAIS_REQUIRES(mu_);

  const int64_t max_;
  Metrics* metrics_;
  mutable Mutex mu_;
  int64_t open_ DAIS_GUARDED_BY(mu_) = 0;
  int64_t max_per_address_ DAIS_GUARDED_BY(mu_) = 0;
  std::unordered_map<std::string, int64_t> per_address_ DAIS_GUARDED_BY(mu_);
  std::list<Slot*> silent_ DAIS_GUARDED_BY(mu_);     // idle, never served: oldest accept first
  std::list<Slot*> idle_ DAIS_GUARDED_BY(mu_);       // idle after serving: longest waiting first
  std::list<Slot*> receiving_ DAIS_GUARDED_BY(mu_);  // receiving a request: oldest first
};

// Default limits from the process's open-file limit (RLIMIT_NOFILE, raised to its hard limit
// first): a reserve of max(256, limit/8) descriptors for model files, Redis and other clients,
// 64 for the metrics port, and the rest shared equally by the HTTP and gRPC listeners.
struct DefaultConnectionLimits {
  int64_t open_files = 0;
  int64_t http = 0, grpc = 0, metrics = 0;
};
DefaultConnectionLimits ConnectionLimitsFromRlimit();

// Accepts connections on `acceptor` until it is closed, admitting each through `limiter` and
// handing the admitted ones to `on_connection` (on an I/O thread). Accept errors back off as
// described above. Owned by the server's Impl; lives as long as its io_context runs.
class AcceptLoop {
 public:
  using OnConnection =
      std::function<void(boost::asio::ip::tcp::socket, std::unique_ptr<ConnectionLimiter::Slot>)>;
  // `strand`: each accepted socket gets its own strand as executor (the HTTP server serializes
  // a connection's handlers that way; the gRPC server uses a mutex instead).
  // Accepted connections go to the io_contexts `iocs` in turn (the first one also runs the
  // acceptor's back-off timer).
  AcceptLoop(std::vector<boost::asio::io_context*> iocs, boost::asio::ip::tcp::acceptor& acceptor,
             ConnectionLimiter& limiter, bool strand, OnConnection on_connection);
  void Start();

 private:
  void OnAccept(const boost::system::error_code& ec, boost::asio::ip::tcp::socket socket);

  const std::vector<boost::asio::io_context*> iocs_;
  size_t next_ = 0;  // only touched by the accept handler chain
  boost::asio::ip::tcp::acceptor& acceptor_;
  ConnectionLimiter& limiter_;
  const bool strand_;
  OnConnection on_connection_;
  boost::asio::steady_timer backoff_timer_;
  int backoff_ms_ = 0;  // only touched by the accept handler chain (one at a time)
};

}  // namespace dais::frontends
