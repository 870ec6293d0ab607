#include "streams/redis_feedback.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <charconv>
#include <cmath>
#include <cstring>

#include "common/base64.h"
#include "common/logging.h"
#include "metrics/registry.h"
#include "redis/resp.h"

namespace dais::streams {
namespace {

struct Metrics {
  metrics::Family<metrics::Counter>& records;
  metrics::Gauge& buffered;
  static Metrics& Get() {
    static Metrics* m = [] {
      metrics::Registry& r = metrics::Registry::Global();
      return new Metrics{
          r.AddCounter("dais_feedback_records_total",
                       "Feedback records by outcome: sent (XADD answered), dropped (the buffer was "
                       "full), failed (Redis refused or did not answer the write).",
                       {"outcome"}),
          r.AddGauge("dais_feedback_buffered_records",
                     "Feedback records waiting to be written to the stream.", {})
              .Get({}),
      };
    }();
    return *m;
  }
};

template <typename T, typename W>
void Numbers(W& w, std::string_view bytes) {
  w.StartArray();
  for (size_t i = 0; i + sizeof(T) <= bytes.size(); i += sizeof(T)) {
    T v;
    std::memcpy(&v, bytes.data() + i, sizeof(T));
    if constexpr (std::is_floating_point_v<T>) {
      // The shortest text that reads back as the same float (0.1f is "0.1", not
      // "0.10000000149011612"): shorter entries, and faster than formatting it as a double.
      char buf[32];
      const auto end = std::to_chars(buf, buf + sizeof(buf), v).ptr;
      if (std::isfinite(v)) {
        w.RawValue(buf, static_cast<size_t>(end - buf), rapidjson::kNumberType);
      } else {
        w.Null();  // JSON has no NaN or infinity
      }
    } else if constexpr (std::is_same_v<T, bool>) {
      w.Bool(v);
    } else if constexpr (std::is_signed_v<T>) {
      w.Int64(static_cast<int64_t>(v));
    } else {
      w.Uint64(static_cast<uint64_t>(v));
    }
  }
  w.EndArray();
}

template <typename W>
void Tensors(W& w, const char* key, const std::vector<server::FeedbackTensor>& tensors) {
  w.Key(key);
  w.StartArray();
  for (const auto& t : tensors) {
    w.StartObject();
    w.Key("name");
    w.String(t.name.data(), static_cast<rapidjson::SizeType>(t.name.size()));
    const std::string_view dt = DataTypeName(t.dtype);
    w.Key("datatype");
    w.String(dt.data(), static_cast<rapidjson::SizeType>(dt.size()));
    w.Key("shape");
    w.StartArray();
    for (int64_t d : t.shape) w.Int64(d);
    w.EndArray();
    if (t.truncated) {
      w.Key("truncated");
      w.Bool(true);
    } else {
      w.Key("data");
      switch (t.dtype) {
        case DataType::kBool:
          Numbers<bool>(w, t.bytes);
          break;
        case DataType::kUint8:
          Numbers<uint8_t>(w, t.bytes);
          break;
        case DataType::kUint16:
          Numbers<uint16_t>(w, t.bytes);
          break;
        case DataType::kUint32:
          Numbers<uint32_t>(w, t.bytes);
          break;
        case DataType::kUint64:
          Numbers<uint64_t>(w, t.bytes);
          break;
        case DataType::kInt8:
          Numbers<int8_t>(w, t.bytes);
          break;
        case DataType::kInt16:
          Numbers<int16_t>(w, t.bytes);
          break;
        case DataType::kInt32:
          Numbers<int32_t>(w, t.bytes);
          break;
        case DataType::kInt64:
          Numbers<int64_t>(w, t.bytes);
          break;
        case DataType::kFp32:
          Numbers<float>(w, t.bytes);
          break;
        case DataType::kFp64:
          Numbers<double>(w, t.bytes);
          break;
        default: {  // BYTES (length-prefixed), FP16, BF16: the raw bytes
          const std::string b64 = Base64(t.bytes);
          w.String(b64.data(), static_cast<rapidjson::SizeType>(b64.size()));
        }
      }
    }
    w.EndObject();
  }
  w.EndArray();
}

}  // namespace

StatusOr<StreamAddress> ParseStreamUrl(const std::string& url) {
  const bool tls = url.rfind("rediss://", 0) == 0;
  if (url.rfind("redis://", 0) != 0 && !tls) {
    return InvalidArgument("feedback stream '" + url +
                           "': expected redis://HOST:PORT/STREAM (or rediss:// for TLS)");
  }
  const std::string rest = url.substr(tls ? 9 : 8);
  const size_t slash = rest.find('/');
  if (slash == std::string::npos || slash + 1 >= rest.size()) {
    return InvalidArgument("feedback stream '" + url + "': no stream name after HOST:PORT/");
  }
  StreamAddress a{(tls ? "rediss://" : "") + rest.substr(0, slash), rest.substr(slash + 1)};
  RETURN_IF_ERROR(redis::ParseSeeds(a.redis).status());
  return a;
}

std::string FeedbackRecordJson(const server::FeedbackRecord& r) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  auto str = [&w](const char* k, const std::string& v) {
    w.Key(k);
    w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
  };
  w.StartObject();
  str("id", r.id);
  if (!r.trace_id.empty()) str("trace_id", r.trace_id);
  str("model", r.model);
  str("version", r.version);
  w.Key("time_ms");
  w.Int64(r.time_ms);
  w.Key("latency_us");
  w.Uint64(r.latency_us);
  w.Key("entity_ids");
  w.StartArray();
  for (const auto& e : r.entity_ids) w.String(e.data(), static_cast<rapidjson::SizeType>(e.size()));
  w.EndArray();
  Tensors(w, "inputs", r.inputs);
  Tensors(w, "outputs", r.outputs);
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

StatusOr<std::unique_ptr<redis::Client>> ConnectStreamClient(const StreamAddress& address,
                                                             const tls::ClientConfig& tls,
                                                             std::chrono::milliseconds timeout) {
  ASSIGN_OR_RETURN(redis::ClientOptions co, redis::ParseSeeds(address.redis));
  const bool rediss = co.tls.enabled;
  co.tls = tls;
  co.tls.enabled = co.tls.enabled || rediss;
  co.connections_per_node = 1;
  co.command_timeout = timeout;
  return redis::Client::Create(co);
}

StatusOr<std::unique_ptr<RedisFeedbackStream>> RedisFeedbackStream::Create(
    FeedbackStreamOptions options) {
  ASSIGN_OR_RETURN(StreamAddress address, ParseStreamUrl(options.url));
  ASSIGN_OR_RETURN(std::unique_ptr<redis::Client> client,
                   ConnectStreamClient(address, options.tls, std::chrono::milliseconds(1000)));
  Metrics::Get();  // the metrics exist from the start
  if (!client->WaitUntilReachable(std::chrono::seconds(2))) {
    LOG_WARNING(
        "feedback stream {}: Redis not reachable yet; records are dropped (counted) "
        "until it is",
        options.url);
  }
  return std::unique_ptr<RedisFeedbackStream>(
      new RedisFeedbackStream(std::move(options), std::move(address), std::move(client)));
}

RedisFeedbackStream::RedisFeedbackStream(FeedbackStreamOptions options, StreamAddress address,
                                         std::unique_ptr<redis::Client> client)
    : options_(std::move(options)), address_(std::move(address)), client_(std::move(client)) {
  writer_ = std::thread([this] { Run(); });
}

RedisFeedbackStream::~RedisFeedbackStream() {
  {
    MutexLock l(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  writer_.join();
}

bool RedisFeedbackStream::Offer(server::FeedbackRecord record) {
  {
    MutexLock l(&mu_);
    if (queue_.size() < options_.buffer && !stop_) {
      queue_.push_back(std::move(record));
      Metrics::Get().buffered.Set(static_cast<double>(queue_.size()));
      if (queue_.size() == 1) cv_.Signal();  // the writer sleeps only on an empty queue
      return true;
    }
  }
  Metrics::Get().records.Get({"dropped"}).Increment();
  return false;
}

void RedisFeedbackStream::Run() {
  Metrics& m = Metrics::Get();
  const std::string max_len = std::to_string(options_.max_len);
  auto stop_at = std::chrono::steady_clock::time_point::max();
  auto last_warning = std::chrono::steady_clock::time_point{};
  for (;;) {
    std::vector<server::FeedbackRecord> batch;
    {
      MutexLock l(&mu_);
      while (queue_.empty() && !stop_) cv_.Wait();
      if (queue_.empty()) return;
      if (stop_ && stop_at == std::chrono::steady_clock::time_point::max()) {
        stop_at = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      }
      if (std::chrono::steady_clock::now() > stop_at) {
        m.records.Get({"dropped"}).Increment(static_cast<double>(queue_.size()));
        return;
      }
      while (!queue_.empty() && batch.size() < options_.batch) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      m.buffered.Set(static_cast<double>(queue_.size()));
    }
    std::vector<redis::KeyedCommand> cmds;
    cmds.reserve(batch.size());
    for (const auto& r : batch) {
      // Encoded straight into RESP: no vector of argument strings per record.
      redis::KeyedCommand cmd{address_.stream, {}};
      std::string& out = cmd.encoded;
      redis::AppendArrayHeader(16, &out);
      for (std::string_view arg :
           {std::string_view("XADD"), std::string_view(address_.stream), std::string_view("MAXLEN"),
            std::string_view("~"), std::string_view(max_len), std::string_view("*"),
            std::string_view("id"), std::string_view(r.id), std::string_view("model"),
            std::string_view(r.model), std::string_view("version"), std::string_view(r.version),
            std::string_view("latency_us")}) {
        redis::AppendBulk(arg, &out);
      }
      redis::AppendBulk(std::to_string(r.latency_us), &out);
      redis::AppendBulk("record", &out);
      redis::AppendBulk(FeedbackRecordJson(r), &out);
      cmds.push_back(std::move(cmd));
    }
    const auto results = client_->RunBatch(std::move(cmds), std::chrono::milliseconds(1000));
    int sent = 0, failed = 0;
    for (const auto& res : results) {
      (res.ok() && !res->is_error()) ? ++sent : ++failed;
    }
    m.records.Get({"sent"}).Increment(sent);
    if (failed > 0) {
      m.records.Get({"failed"}).Increment(failed);
      const auto now = std::chrono::steady_clock::now();
      if (now - last_warning >= std::chrono::seconds(10)) {  // one line per 10 s at most
        last_warning = now;
        LOG_WARNING(
            "feedback stream {}: {} of {} records not written ({})", options_.url, failed,
            results.size(),
            results.front().ok() ? results.front()->str : results.front().status().message());
      }
    }
  }
}

}  // namespace dais::streams
