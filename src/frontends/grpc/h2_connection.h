// gRPC over HTTP/2 on nghttp2, without sockets: one H2Connection is one client connection's
// protocol state. The socket layer (h2_server.h) feeds it received bytes and writes out what it
// produces; tests and the fuzz target drive it directly.
//
// Why our own transport instead of grpc++'s server: grpc++ 1.51's callback API moves every call
// across three or four of its own threads (poller, "nexting" callback threads, the executor that
// writes a response finished from a foreign thread); on small requests those hand-offs cost more
// than the model (docs/benchmarks.md). Here a call is read and decoded on the same Asio I/O
// threads as HTTP/1.1 and handed to the model's instance thread, which answers it itself at
// light load or hands it back to an I/O thread (h2_server.cc).
//
// The wire format follows the gRPC over HTTP/2 specification: POST, content-type
// application/grpc[+proto], messages framed as 1 byte compressed flag + 4 bytes big-endian
// length + bytes, grpc-timeout, a Trailers-Only answer for errors without messages, grpc-status
// and a percent-encoded grpc-message in the trailers.
//
// Threading: the members are called by one thread at a time (the socket layer serializes them),
// except ServerCall::Write / Finish / Reply / ReplyEncoded, which may be called from any thread
// and are carried out through `post`.
#pragma once

#include <grpcpp/support/status.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dais/status.h"

struct nghttp2_session;

namespace dais::frontends::grpc {

class H2Connection;

// One call (one HTTP/2 stream) as a method handler sees it.
class ServerCall {
 public:
  // Microseconds left, now, until the client's deadline (grpc-timeout, counted from the
  // call's headers); at least 1 once it has passed; 0: no deadline. A stream's requests each
  // get what is left of the stream's deadline.
  uint64_t timeout_us() const;
  // Set when the client cancels (RST_STREAM), the connection closes, or the call was refused
  // mid-stream. Work still queued for the call can be dropped.
  const std::shared_ptr<std::atomic<bool>>& cancelled() const { return cancelled_; }
  // Sends one serialized message. Any thread. Dropped after Finish or cancellation.
  void Write(std::string message);
  // Ends the call with `status` (trailers). Any thread; the first call wins.
  void Finish(::grpc::Status status);
  // Write(message) then Finish(OK), in one step.
  void Reply(std::string message);
  // A custom metadata entry (request header) by lower-case name; nullopt when absent. The
  // transport's own headers (content-type, te, user-agent, grpc-*) are not kept.
  std::optional<std::string_view> Metadata(std::string_view name) const;
  // Every custom metadata entry, in the order received (names lower-case).
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }
  // A metadata entry to send with the answer's headers (or a Trailers-Only answer). Any thread;
  // effective when called before the first Write / Finish.
  void AddResponseMetadata(std::string name, std::string value);
  // Reply(encode()), with `encode` run where the connection's work runs (not at all if the
  // call is gone meanwhile).
  void ReplyEncoded(std::function<std::string()> encode);
  // Runs `hook` once if the call is cancelled (the client reset it, the connection closed, or
  // it was refused mid-stream) — at once, on this thread, if that already happened. Replaces an
  // earlier hook; null clears it (clear a hook that holds what holds this call once it is no
  // longer needed). Any thread. A proxy cancels its upstream call with it.
  void OnCancelled(std::function<void()> hook);

 private:
  friend class H2Connection;
  friend struct H2Callbacks;
  void Cancel();  // sets cancelled() and runs the hook
  std::weak_ptr<H2Connection> conn_;
  int32_t stream_id_ = 0;
  uint64_t deadline_ns_ = 0;  // steady clock; 0: none
  std::vector<std::pair<std::string, std::string>> metadata_;
  std::shared_ptr<std::atomic<bool>> cancelled_ = std::make_shared<std::atomic<bool>>(false);
  std::mutex cancel_mu_;
  std::function<void()> on_cancelled_;  // guarded by cancel_mu_
};

// A client-streaming or bidirectional call's handler: messages and the client's half-close
// arrive on the connection's executor, in order.
class StreamHandler {
 public:
  virtual ~StreamHandler() = default;
  virtual void OnMessage(std::string message) = 0;
  virtual void OnHalfClose() = 0;
  // The call ended before it was answered (the client reset it, or the connection closed).
  virtual void OnCancel() {}
};

struct Method {
  // Unary (and server-streaming) calls: called once the client has sent its one message and
  // half-closed. Answer with call->Reply / Write / Finish, now or later, from any thread.
  std::function<void(std::shared_ptr<ServerCall>, std::string request)> unary;
  // Client-streaming and bidirectional calls: called when the call starts.
  std::function<std::shared_ptr<StreamHandler>(std::shared_ptr<ServerCall>)> stream;
  // Optional: called with the call's headers before anything else; a status that is not OK
  // ends the call with it at once (its messages are ignored).
  std::function<::grpc::Status(const ServerCall&)> admit;
};

// Key: the HTTP/2 :path, "/package.Service/Method".
using MethodTable = std::unordered_map<std::string, Method>;

// The gRPC status of an HTTP answer's status, for services that answer both (400
// INVALID_ARGUMENT, 401 UNAUTHENTICATED, 403 PERMISSION_DENIED, 404 NOT_FOUND, 409 ABORTED,
// 429 RESOURCE_EXHAUSTED, 502/503 UNAVAILABLE, 504 DEADLINE_EXCEEDED, else INTERNAL).
::grpc::StatusCode CodeOfHttpStatus(int http_status);

struct H2Options {
  uint32_t max_receive_message_bytes = 64u << 20;
  uint32_t max_send_message_bytes = 64u << 20;
  uint32_t max_concurrent_streams = 1024;
  // Bytes of requests received on one connection and not yet handed to a method (messages still
  // arriving, unary requests waiting for the end of their stream). A stream whose data would
  // pass it is refused (RESOURCE_EXHAUSTED): 1024 streams of 64 MiB messages cannot pile up.
  uint64_t max_buffered_bytes = 128u << 20;
  // Flow-control windows we grant the client: large enough that a big tensor is not sent in
  // 64 KiB round trips.
  int32_t stream_window_bytes = 8 << 20;
  int32_t connection_window_bytes = 64 << 20;
  // Names the listener in dais_request_buffer_refused_total (frontends/request_memory.h: every
  // buffered byte also counts against the process's budget).
  std::string listener = "grpc";
};

class H2Connection : public std::enable_shared_from_this<H2Connection> {
 public:
  // `post` runs a function with exclusive access to this connection, after the ones posted
  // before it, and then writes out what the connection produced (now on the calling thread, or
  // later on another: the socket layer decides). Never inside a call to Receive.
  using Post = std::function<void(std::function<void()>)>;
  H2Connection(const MethodTable* methods, H2Options options, Post post);
  ~H2Connection();
  H2Connection(const H2Connection&) = delete;
  H2Connection& operator=(const H2Connection&) = delete;

  // Queues the server's SETTINGS. Call once, before anything else.
  Status Start();
  // Feeds bytes from the client. An error means the connection is broken: write out what
  // TakeOutput gives (a GOAWAY) and close. not_http2() tells a client that spoke
  // something else (HTTP/1.1 on the gRPC port).
  Status Receive(const uint8_t* data, size_t size);
  // Appends the bytes to send now to *out.
  void TakeOutput(std::string* out);
  // True when neither side has anything more to say (after GOAWAY, or a protocol error).
  bool Done() const;
  // Graceful shutdown: GOAWAY, no new calls; open ones finish.
  void Shutdown();
  // The connection is gone: every open call is cancelled.
  void Abort();
  // Keepalive: sends a PING; PingAcked() tells whether the last one was answered.
  void SendPing();
  bool PingAcked() const { return ping_acked_; }
  size_t open_calls() const { return streams_.size(); }
  // Every open call is still receiving its request (none is being served) / some call is.
  bool AllArriving() const;
  bool AnyArriving() const;
  // Cancels (RESOURCE_EXHAUSTED) every call whose request, still arriving, averaged less than
  // `min_bytes_per_sec` after the first `grace_secs` (EndpointOptions::min_request_bytes_per_sec);
  // how many; -1 when a call's header block itself never completed (the connection is stuck:
  // close it).
  int EnforceMinRate(uint64_t min_bytes_per_sec, int grace_secs);
  // Whether DATA was sent since the last call of this (keepalive's "pings without data").
  bool TakeDataSent();

  bool not_http2() const { return not_http2_; }

 private:
  struct Stream;
  friend class ServerCall;
  friend struct H2Callbacks;

  Stream* Find(int32_t id);
  void OnRequestHeaders(Stream* s);
  void OnData(Stream* s, const uint8_t* data, size_t size);
  void OnEndStream(Stream* s);
  void OnStreamClose(int32_t id);
  // Finishes the stream with an error and ignores the rest of its input.
  void Refuse(Stream* s, ::grpc::Status status);
  // Takes `bytes` off the stream's and the connection's buffered count.
  void Release(Stream* s, uint64_t bytes);
  void DoWrite(int32_t id, std::string message);
  void DoFinish(int32_t id, ::grpc::Status status);
  void StartResponse(Stream* s);
  long ReadBody(Stream* s, uint8_t* buf, size_t length, uint32_t* flags);
  void RunOnExecutor(std::function<void()> fn);

  const MethodTable* methods_;
  H2Options options_;
  Post post_;
  nghttp2_session* session_ = nullptr;
  std::unordered_map<int32_t, std::unique_ptr<Stream>> streams_;
  uint64_t buffered_ = 0;  // sum of the streams' `held`
  bool ping_acked_ = true;
  bool data_sent_ = false;
  bool not_http2_ = false;
};

}  // namespace dais::frontends::grpc
