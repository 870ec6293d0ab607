#include "common/zlib_codec.h"

#include <zlib.h>

#include <algorithm>
#include <limits>

namespace dais {
namespace {

// windowBits: 15 (32 KiB window); +16 gzip wrapper; negative: raw deflate.
constexpr int kWindowBits = 15;
constexpr size_t kOutStep = 64 * 1024;

int WindowBitsFor(ZlibFormat format, bool raw) {
  if (raw) return -kWindowBits;
  return format == ZlibFormat::kGzip ? kWindowBits + 16 : kWindowBits;
}

std::string_view Name(ZlibFormat format) {
  return format == ZlibFormat::kGzip ? "gzip" : "deflate";
}

}  // namespace

struct Inflater::State {
  z_stream z{};
  bool initialized = false;
  ~State() {
    if (initialized) inflateEnd(&z);
  }
};

Inflater::Inflater(ZlibFormat format, uint64_t max_output_bytes)
    : state_(std::make_unique<State>()), format_(format), max_output_bytes_(max_output_bytes) {
  if (format == ZlibFormat::kGzip) Init(/*raw=*/false);
}

Inflater::~Inflater() = default;

void Inflater::Init(bool raw) {
  state_->initialized = inflateInit2(&state_->z, WindowBitsFor(format_, raw)) == Z_OK;
}

Status Inflater::Feed(std::string_view input, std::string* out) {
  fed_ = fed_ || !input.empty();
  if (format_ == ZlibFormat::kZlib && !state_->initialized) {
    // HTTP "deflate" is a zlib stream (RFC 1950), but some clients send a raw deflate stream
    // (RFC 1951): the first two bytes tell (a zlib header names method 8 and is a multiple of
    // 31).
    const size_t take = std::min(input.size(), 2 - head_.size());
    head_.append(input.substr(0, take));
    input.remove_prefix(take);
    if (head_.size() < 2) return OkStatus();
    const auto b0 = static_cast<unsigned char>(head_[0]);
    const auto b1 = static_cast<unsigned char>(head_[1]);
    Init(/*raw=*/(b0 & 0x0f) != 8 || (b0 * 256 + b1) % 31 != 0);
    if (!state_->initialized) return Internal("zlib could not be initialised");
    std::string head = std::move(head_);
    RETURN_IF_ERROR(Inflate(head, out));
  }
  if (!state_->initialized) return Internal("zlib could not be initialised");
  return Inflate(input, out);
}

Status Inflater::Inflate(std::string_view input, std::string* out) {
  z_stream& z = state_->z;
  while (!input.empty()) {
    if (ended_) {
      return InvalidArgument(std::string(Name(format_)) + " body: " + std::to_string(input.size()) +
                             " bytes after the end of the stream");
    }
    const uInt in_now = static_cast<uInt>(std::min<size_t>(input.size(), 1u << 30));
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
    z.avail_in = in_now;
    int rc = Z_OK;
    do {
      const size_t before = out->size();
      out->resize(before + kOutStep);
      z.next_out = reinterpret_cast<Bytef*>(out->data() + before);
      z.avail_out = kOutStep;
      rc = inflate(&z, Z_NO_FLUSH);
      const size_t produced = kOutStep - z.avail_out;
      out->resize(before + produced);
      total_out_ += produced;
      if (total_out_ > max_output_bytes_) {
        return ResourceExhausted(std::string(Name(format_)) +
                                 " body decompresses to more than the limit of " +
                                 std::to_string(max_output_bytes_) + " bytes");
      }
      if (rc == Z_STREAM_END) {
        ended_ = true;
        break;
      }
      if (rc != Z_OK && rc != Z_BUF_ERROR) {
        return InvalidArgument("malformed " + std::string(Name(format_)) + " body: " +
                               (z.msg != nullptr ? z.msg : "zlib error " + std::to_string(rc)));
      }
      if (rc == Z_BUF_ERROR && z.avail_in == 0) break;  // needs more input
    } while (z.avail_in > 0 || z.avail_out == 0);
    input.remove_prefix(in_now - z.avail_in);
  }
  return OkStatus();
}

Status Inflater::Finish() const {
  if (ended_ || !fed_) return OkStatus();
  return InvalidArgument(std::string(Name(format_)) + " body is truncated (the compressed stream " +
                         "does not end)");
}

struct Deflater::State {
  z_stream z{};
  bool initialized = false;
  ~State() {
    if (initialized) deflateEnd(&z);
  }
};

Deflater::Deflater(ZlibFormat format, int level) : state_(std::make_unique<State>()) {
  state_->initialized = deflateInit2(&state_->z, level, Z_DEFLATED, WindowBitsFor(format, false), 8,
                                     Z_DEFAULT_STRATEGY) == Z_OK;
}

Deflater::~Deflater() = default;

Status Deflater::Run(std::string_view input, int flush) {
  if (!state_->initialized) return Internal("zlib could not be initialised");
  z_stream& z = state_->z;
  while (!input.empty() || flush == Z_FINISH) {
    const auto in_now =
        static_cast<uInt>(std::min<size_t>(input.size(), std::numeric_limits<uInt>::max()));
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
    z.avail_in = in_now;
    int rc = Z_OK;
    // Into a buffer on the stack, appended: most small inputs produce no output yet, and
    // growing the string by a step each time would zero the step each time.
    unsigned char buf[16 * 1024];
    do {
      z.next_out = buf;
      z.avail_out = sizeof(buf);
      rc = deflate(&z, input.size() > in_now ? Z_NO_FLUSH : flush);
      if (rc == Z_STREAM_ERROR) return Internal("zlib refused the input");
      out_.append(reinterpret_cast<const char*>(buf), sizeof(buf) - z.avail_out);
    } while (z.avail_out == 0);
    input.remove_prefix(in_now);
    total_in_ += in_now;
    if (flush == Z_FINISH && rc == Z_STREAM_END) break;
  }
  return OkStatus();
}

Status Deflater::Feed(std::string_view input) { return Run(input, Z_NO_FLUSH); }

Status Deflater::Finish() { return Run({}, Z_FINISH); }

std::string Deflate(std::string_view input, ZlibFormat format, int level) {
  if (input.size() > std::numeric_limits<uInt>::max() / 2) return {};
  z_stream z{};
  if (deflateInit2(&z, level, Z_DEFLATED, WindowBitsFor(format, false), 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    return {};
  }
  std::string out;
  out.resize(deflateBound(&z, static_cast<uLong>(input.size())));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
  z.avail_in = static_cast<uInt>(input.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(rc == Z_STREAM_END ? z.total_out : 0);
  deflateEnd(&z);
  return out;
}

std::string_view ContentEncodingName(ZlibFormat format) { return Name(format); }

}  // namespace dais
