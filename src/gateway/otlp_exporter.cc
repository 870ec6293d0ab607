#include "gateway/otlp_exporter.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <chrono>
#include <future>

#include "common/logging.h"
#include "gateway/upstream.h"
#include "metrics/registry.h"

namespace dais::gateway {
namespace {

constexpr size_t kMaxQueued = 4096;
constexpr size_t kBatch = 256;

metrics::Counter& SpanCounter(const char* outcome) {
  static auto& family = metrics::Registry::Global().AddCounter(
      "dais_trace_spans_total",
      "Spans of sampled requests by outcome: exported (the collector took them), failed (it "
      "did not answer 2xx), dropped (the queue was full)",
      {"outcome"});
  return family.Get({outcome});
}

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void StringAttribute(Writer& w, const std::string& key, const std::string& value) {
  w.StartObject();
  w.Key("key");
  w.String(key.c_str());
  w.Key("value");
  w.StartObject();
  w.Key("stringValue");
  w.String(value.data(), static_cast<rapidjson::SizeType>(value.size()));
  w.EndObject();
  w.EndObject();
}

}  // namespace

StatusOr<std::pair<std::string, std::string>> ParseOtlpEndpoint(const std::string& endpoint) {
  std::string rest = endpoint;
  if (rest.rfind("https://", 0) == 0) {
    return InvalidArgument("--otlp-endpoint " + endpoint + ": https is not supported yet (http)");
  }
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  const size_t slash = rest.find('/');
  std::string address = rest.substr(0, slash);
  std::string path = slash == std::string::npos ? "/v1/traces" : rest.substr(slash);
  if (path == "/") path = "/v1/traces";
  const size_t colon = address.rfind(':');
  if (address.empty() || colon == std::string::npos || colon + 1 == address.size()) {
    return InvalidArgument("--otlp-endpoint " + endpoint +
                           ": expected http://HOST:PORT[/PATH] (e.g. http://127.0.0.1:4318)");
  }
  return std::make_pair(address, path);
}

std::string OtlpTracesJson(const std::string& service, const std::vector<Span>& spans) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("resourceSpans");
  w.StartArray();
  w.StartObject();
  w.Key("resource");
  w.StartObject();
  w.Key("attributes");
  w.StartArray();
  StringAttribute(w, "service.name", service);
  w.EndArray();
  w.EndObject();
  w.Key("scopeSpans");
  w.StartArray();
  w.StartObject();
  w.Key("scope");
  w.StartObject();
  w.Key("name");
  w.String("dais");
  w.EndObject();
  w.Key("spans");
  w.StartArray();
  for (const Span& s : spans) {
    w.StartObject();
    w.Key("traceId");
    w.String(s.trace_id.c_str());
    w.Key("spanId");
    w.String(s.span_id.c_str());
    if (!s.parent_id.empty()) {
      w.Key("parentSpanId");
      w.String(s.parent_id.c_str());
    }
    w.Key("name");
    w.String(s.name.c_str());
    w.Key("kind");
    w.Int(2);  // SPAN_KIND_SERVER
    // 64-bit integers are strings in OTLP's JSON mapping.
    w.Key("startTimeUnixNano");
    w.String(std::to_string(s.start_unix_ns).c_str());
    w.Key("endTimeUnixNano");
    w.String(std::to_string(s.end_unix_ns).c_str());
    w.Key("attributes");
    w.StartArray();
    for (const auto& [k, v] : s.string_attributes) StringAttribute(w, k, v);
    for (const auto& [k, v] : s.int_attributes) {
      w.StartObject();
      w.Key("key");
      w.String(k.c_str());
      w.Key("value");
      w.StartObject();
      w.Key("intValue");
      w.String(std::to_string(v).c_str());
      w.EndObject();
      w.EndObject();
    }
    w.EndArray();
    w.Key("status");
    w.StartObject();
    w.Key("code");
    w.Int(s.error ? 2 : 1);  // STATUS_CODE_ERROR : STATUS_CODE_OK
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  w.EndArray();
  w.EndObject();
  w.EndArray();
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

StatusOr<std::unique_ptr<OtlpExporter>> NewOtlpExporter(const std::string& endpoint,
                                                        std::string service) {
  ASSIGN_OR_RETURN(auto parsed, ParseOtlpEndpoint(endpoint));
  return std::make_unique<OtlpExporter>(parsed.first, parsed.second, std::move(service));
}

OtlpExporter::OtlpExporter(std::string address, std::string path, std::string service)
    : address_(std::move(address)),
      path_(std::move(path)),
      service_(std::move(service)),
      pool_(std::make_unique<UpstreamPool>()) {
  thread_ = std::thread([this] { Loop(); });
}

OtlpExporter::~OtlpExporter() {
  {
    MutexLock l(&mu_);
    stop_ = true;
    wake_.SignalAll();
  }
  thread_.join();
}

void OtlpExporter::Add(Span span) {
  MutexLock l(&mu_);
  if (queue_.size() >= kMaxQueued) {
    SpanCounter("dropped").Increment();
    return;
  }
  queue_.push_back(std::move(span));
  if (queue_.size() >= kBatch) wake_.SignalAll();
}

void OtlpExporter::Loop() {
  for (;;) {
    std::vector<Span> batch;
    bool stopping = false;
    {
      MutexLock l(&mu_);
      if (!stop_ && queue_.size() < kBatch) {
        wake_.WaitUntil(std::chrono::steady_clock::now() + std::chrono::milliseconds(500));
      }
      batch.swap(queue_);
      stopping = stop_;
    }
    if (!batch.empty()) Send(std::move(batch));
    if (stopping) return;
  }
}

void OtlpExporter::Send(std::vector<Span> batch) {
  UpstreamRequest r;
  r.method = "POST";
  r.target = path_;
  r.headers = {{"content-type", "application/json"}};
  r.body = OtlpTracesJson(service_, batch);
  r.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  std::promise<UpstreamResult> answered;
  auto done = answered.get_future();
  pool_->Send(address_, std::move(r),
              [&answered](UpstreamResult result) { answered.set_value(std::move(result)); });
  UpstreamResult result = done.get();
  const bool ok = result.status.ok() && result.response.status / 100 == 2;
  SpanCounter(ok ? "exported" : "failed").Increment(static_cast<double>(batch.size()));
  if (ok && failing_) LOG_INFO("tracing: the collector at {}{} takes spans again", address_, path_);
  if (!ok && !failing_) {
    LOG_WARNING("tracing: the collector at {}{} did not take {} span(s): {}", address_, path_,
                batch.size(),
                result.status.ok() ? "HTTP " + std::to_string(result.response.status)
                                   : result.status.message());
  }
  failing_ = !ok;
}

}  // namespace dais::gateway
