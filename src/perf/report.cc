#include "perf/report.h"

#include <fmt/format.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace dais::perf {
namespace {

constexpr const char* kCsvHeader =
    "concurrency,rate,throughput_infer_per_sec,latency_avg_us,p50_us,p90_us,p95_us,p99_us,"
    "errors,server_queue_us,server_compute_input_us,server_compute_infer_us,"
    "server_compute_output_us,server_success_us,avg_batch,stable";

std::string Rate(double rate) { return fmt::format("{:g}", rate); }

}  // namespace

LevelResult MakeResult(LevelMeasurement* m, int64_t batch_size) {
  LevelResult r;
  r.concurrency = m->level.concurrency;
  r.rate = m->level.rate;
  r.throughput = m->seconds > 0 ? static_cast<double>(m->successes * batch_size) / m->seconds : 0;
  LatencySummary l = SummarizeLatencies(&m->latencies_ns);
  r.latency_avg_us = l.avg_us;
  r.p50_us = l.p50_us;
  r.p90_us = l.p90_us;
  r.p95_us = l.p95_us;
  r.p99_us = l.p99_us;
  r.requests = m->successes;
  r.errors = m->errors;
  r.delayed = m->delayed;
  r.windows = m->windows;
  r.stable = m->stable;
  r.server = m->server;
  return r;
}

std::string TableHeader(bool rate_mode, bool server_stats) {
  // Spans: the five latency columns and the six server columns are 48 characters wide each.
  std::string top = fmt::format("{:25}{:-^48}{:8}", "", " client latency (us) ", "");
  std::string names = fmt::format("{:>11}  {:>10}  {:>8}  {:>8}  {:>8}  {:>8}  {:>8}  {:>6}",
                                  rate_mode ? "rate/s" : "concurrency", "infer/s", "avg", "p50",
                                  "p90", "p95", "p99", "errors");
  if (server_stats) {
    top += fmt::format("  {:-^48}", " server per request (us) ");
    names += fmt::format("  {:>6}  {:>6}  {:>7}  {:>6}  {:>7}  {:>6}", "queue", "input", "infer",
                         "output", "total", "batch");
  }
  names += "  stable";
  return top + "\n" + names + "\n";
}

std::string TableRow(const LevelResult& r, bool rate_mode, bool server_stats) {
  std::string row =
      fmt::format("{:>11}  {:>10.1f}  {:>8.0f}  {:>8.0f}  {:>8.0f}  {:>8.0f}  {:>8.0f}  {:>6}",
                  rate_mode ? Rate(r.rate) : std::to_string(r.concurrency), r.throughput,
                  r.latency_avg_us, r.p50_us, r.p90_us, r.p95_us, r.p99_us, r.errors);
  if (server_stats) {
    if (r.server) {
      const ServerBreakdown& s = *r.server;
      row += fmt::format("  {:>6.0f}  {:>6.0f}  {:>7.0f}  {:>6.0f}  {:>7.0f}  {:>6.2f}", s.queue_us,
                         s.compute_input_us, s.compute_infer_us, s.compute_output_us, s.success_us,
                         s.avg_batch);
    } else {
      row +=
          fmt::format("  {:>6}  {:>6}  {:>7}  {:>6}  {:>7}  {:>6}", "-", "-", "-", "-", "-", "-");
    }
  }
  row += r.stable ? "  yes" : "  unstable";
  return row + "\n";
}

std::string ToCsv(const std::vector<LevelResult>& rows) {
  std::string out = std::string(kCsvHeader) + "\n";
  for (const LevelResult& r : rows) {
    out += fmt::format("{},{},{:.3f},{:.1f},{:.1f},{:.1f},{:.1f},{:.1f},{},", r.concurrency,
                       Rate(r.rate), r.throughput, r.latency_avg_us, r.p50_us, r.p90_us, r.p95_us,
                       r.p99_us, r.errors);
    if (r.server) {
      const ServerBreakdown& s = *r.server;
      out +=
          fmt::format("{:.1f},{:.1f},{:.1f},{:.1f},{:.1f},{:.3f},", s.queue_us, s.compute_input_us,
                      s.compute_infer_us, s.compute_output_us, s.success_us, s.avg_batch);
    } else {
      out += ",,,,,,";
    }
    out += r.stable ? "true\n" : "false\n";
  }
  return out;
}

std::string ToJson(const std::vector<LevelResult>& rows) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.SetMaxDecimalPlaces(3);
  auto number = [&w](const char* key, double v) {
    w.Key(key);
    w.Double(v);
  };
  auto server = [&w](const char* key, const std::optional<ServerBreakdown>& s,
                     double ServerBreakdown::*field) {
    w.Key(key);
    if (s) {
      w.Double((*s).*field);
    } else {
      w.Null();
    }
  };
  w.StartArray();
  for (const LevelResult& r : rows) {
    w.StartObject();
    w.Key("concurrency");
    w.Int64(r.concurrency);
    number("rate", r.rate);
    number("throughput_infer_per_sec", r.throughput);
    number("latency_avg_us", r.latency_avg_us);
    number("p50_us", r.p50_us);
    number("p90_us", r.p90_us);
    number("p95_us", r.p95_us);
    number("p99_us", r.p99_us);
    w.Key("errors");
    w.Int64(r.errors);
    server("server_queue_us", r.server, &ServerBreakdown::queue_us);
    server("server_compute_input_us", r.server, &ServerBreakdown::compute_input_us);
    server("server_compute_infer_us", r.server, &ServerBreakdown::compute_infer_us);
    server("server_compute_output_us", r.server, &ServerBreakdown::compute_output_us);
    server("server_success_us", r.server, &ServerBreakdown::success_us);
    server("avg_batch", r.server, &ServerBreakdown::avg_batch);
    w.Key("stable");
    w.Bool(r.stable);
    w.EndObject();
  }
  w.EndArray();
  return std::string(sb.GetString(), sb.GetSize()) + "\n";
}

std::string LevelLabel(const Level& level) {
  if (level.concurrency > 0) return fmt::format("concurrency {}", level.concurrency);
  return fmt::format("rate {}/s", Rate(level.rate));
}

std::string ProgressLine(const Level& level, int window, double infer_per_sec, double p99_us) {
  if (window == 0) return LevelLabel(level) + ": warming up";
  return fmt::format("{}: window {}, {:.0f} infer/s, p99 {:.0f} us", LevelLabel(level), window,
                     infer_per_sec, p99_us);
}

}  // namespace dais::perf
