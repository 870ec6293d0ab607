// gzip and zlib ("deflate" in HTTP's Content-Encoding, RFC 9110 §8.4.1.2) on zlib: a streaming
// Inflater for request bodies that arrive in pieces, with a bound on what they expand to (a 64 KiB
// body must not become 64 GiB), a one-shot Deflate for answers and a streaming Deflater for
// files written as their lines come (the archive's parts).
//
// Not thread-safe: one Inflater per body, one Deflater per stream.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "dais/status.h"

namespace dais {

enum class ZlibFormat {
  kGzip,  // RFC 1952: "gzip" / "x-gzip"
  kZlib,  // RFC 1950: HTTP's "deflate" (a raw RFC 1951 stream is accepted too when inflating)
};

// Decompresses a stream fed in pieces.
class Inflater {
 public:
  // Output beyond `max_output_bytes` in total is refused (ResourceExhausted).
  Inflater(ZlibFormat format, uint64_t max_output_bytes);
  ~Inflater();
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  // Appends what `input` decompresses to onto `out`. InvalidArgument for corrupt data or bytes
  // after the end of the stream; ResourceExhausted past the output limit.
  Status Feed(std::string_view input, std::string* out);
  // OK once the whole compressed stream (its trailer included) was fed, or when nothing was fed
  // at all (an empty body); InvalidArgument if it was cut short.
  Status Finish() const;
  uint64_t total_out() const { return total_out_; }

 private:
  struct State;
  std::unique_ptr<State> state_;
  const ZlibFormat format_;
  const uint64_t max_output_bytes_;
  void Init(bool raw);
  Status Inflate(std::string_view input, std::string* out);

  uint64_t total_out_ = 0;
  bool fed_ = false;  // some input arrived
  bool ended_ = false;
  std::string head_;  // kZlib: the first bytes, until they tell a zlib from a raw stream
};

// Compresses a stream given in pieces: what it compresses to so far accumulates in output().
class Deflater {
 public:
  Deflater(ZlibFormat format, int level = 1);
  ~Deflater();
  Deflater(const Deflater&) = delete;
  Deflater& operator=(const Deflater&) = delete;

  // Internal if zlib could not be initialised or refused the input.
  Status Feed(std::string_view input);
  // Ends the stream (its trailer); nothing may be fed after.
  Status Finish();
  const std::string& output() const { return out_; }
  uint64_t total_in() const { return total_in_; }

 private:
  struct State;
  std::unique_ptr<State> state_;
  std::string out_;
  uint64_t total_in_ = 0;
  Status Run(std::string_view input, int flush);
};

// Compresses `input` whole at `level` (1: fastest … 9: smallest). Empty when it cannot (an
// input of 2 GiB or more): send it uncompressed then.
std::string Deflate(std::string_view input, ZlibFormat format, int level = 1);

// The name of the format in Content-Encoding: "gzip" or "deflate".
std::string_view ContentEncodingName(ZlibFormat format);

}  // namespace dais
