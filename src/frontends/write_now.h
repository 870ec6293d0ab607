// Writing without a round through the event loop. Asio does not call the handler of a write that
// went out on its first try: it queues it, and the I/O thread goes round its loop (an
// epoll_wait) before the handler runs. On a proxy that is a round per write, two per request.
// WriteNow sends what it can at once (a non-blocking send on the socket) and, when everything
// went, calls `done` there; the rest, if any, goes by async_write on `stream` (the socket itself,
// or a stream over it that keeps a timeout), and `done` runs when it is written.
//
// `depth` counts the calls of `done` made inline and still running: an answer written inline
// whose handler reads a pipelined request, answers it inline, and so on, would nest without
// bound; past kMaxInlineWrites the write goes the asynchronous way.
#pragma once

#include <algorithm>
#include <array>
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/write.hpp>
#include <cstddef>
#include <utility>

namespace dais::frontends {

inline constexpr int kMaxInlineWrites = 8;

struct NothingBeforeWaiting {
  void operator()(size_t /*bytes_left*/) const {}
};

// `done(error_code, bytes)` as for async_write. `socket` is the stream's lowest layer (plain TCP).
// `before_waiting(bytes_left)` runs when the rest must wait for the peer (e.g. to arm the
// stream's timeout: a peer that stops reading must not hold the write for ever).
template <class Socket, class Stream, size_t N, class Done,
          class BeforeWaiting = NothingBeforeWaiting>
void WriteNow(Socket& socket, Stream& stream, const std::array<boost::asio::const_buffer, N>& out,
              int* depth, Done&& done, BeforeWaiting before_waiting = {}) {
  namespace net = boost::asio;
  size_t sent = 0;
  boost::system::error_code ec;
  if (*depth < kMaxInlineWrites) {
    if (!socket.non_blocking()) socket.non_blocking(true, ec);
    if (!ec) sent = socket.send(out, 0, ec);
    if (ec == net::error::would_block || ec == net::error::try_again ||
        ec == net::error::interrupted) {
      ec = {};
      sent = 0;
    }
    if (ec || sent == net::buffer_size(out)) {
      struct Nested {  // counted while done runs, whatever way it leaves
        int* depth;
        explicit Nested(int* d) : depth(d) { ++*depth; }
        ~Nested() { --*depth; }
      } nested(depth);
      done(ec, ec ? size_t{0} : sent);
      return;
    }
  }
  // What is left: the buffers past the bytes sent.
  std::array<net::const_buffer, N> rest = out;
  size_t skip = sent;
  for (auto& b : rest) {
    const size_t k = std::min(skip, b.size());
    b += k;
    skip -= k;
  }
  before_waiting(net::buffer_size(out) - sent);
  net::async_write(stream, rest,
                   [sent, done = std::forward<Done>(done)](
                       boost::system::error_code e, size_t n) mutable { done(e, sent + n); });
}

}  // namespace dais::frontends
