#include "cmd/console_state.h"

#include <fmt/format.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cmath>
#include <future>
#include <set>

#include "cluster/keys.h"
#include "cmd/ctl_get.h"
#include "common/json.h"
#include "common/logging.h"
#include "etcd/watch.h"
#include "gateway/upstream.h"

namespace dais::cmd {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The value of a sample line "name{labels} value [timestamp]"; NaN when malformed.
double SampleValue(std::string_view line) {
  const size_t close = line.rfind('}');
  size_t at = line.find(' ', close == std::string_view::npos ? 0 : close);
  if (at == std::string_view::npos) return NAN;
  std::string v(line.substr(at + 1));
  if (const size_t sp = v.find(' '); sp != std::string::npos) v.resize(sp);
  try {
    return std::stod(v);
  } catch (...) {
    return NAN;
  }
}

bool IsSample(std::string_view line, std::string_view name) {
  return line.size() > name.size() && line.substr(0, name.size()) == name &&
         (line[name.size()] == '{' || line[name.size()] == ' ');
}

void JsonArrayOf(std::string* out, const char* key, const StatusOr<std::string>& items) {
  *out += fmt::format(",\"{}\":{}", key, items.ok() ? *items : "[]");
}

// The values stored under `prefix`, as a JSON array (each a JSON object) of at most `keep`,
// the last ones in key order.
std::string ValuesArray(etcd::Client& c, const std::string& prefix, size_t keep = SIZE_MAX) {
  auto r = c.Get(prefix, /*prefix=*/true);
  if (!r.ok()) return "[]";
  std::string out = "[";
  const size_t skip = r->kvs.size() > keep ? r->kvs.size() - keep : 0;
  for (size_t i = skip; i < r->kvs.size(); ++i) {
    rapidjson::Document d;
    if (!json::ParseJson(r->kvs[i].value, &d).ok() || !d.IsObject()) continue;
    if (out.size() > 1) out += ',';
    out += r->kvs[i].value;
  }
  return out + "]";
}

// JSON has no NaN: absent figures are null.
std::string Num(double v) { return std::isfinite(v) ? fmt::format("{:.6g}", v) : "null"; }

}  // namespace

std::string JsonQuoted(const std::string& s) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.String(s.c_str(), static_cast<rapidjson::SizeType>(s.size()));
  return sb.GetString();
}

void AddTargetFigures(const std::string& text, TargetFigures* f) {
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + at, end - at);
    at = end + 1;
    if (line.empty() || line[0] == '#') continue;
    const double v = SampleValue(line);
    if (!std::isfinite(v)) continue;
    if (IsSample(line, "dais_feature_values_total")) {
      f->feature_values += v;
      if (line.find("status=\"present\"") != std::string_view::npos) f->feature_present += v;
    } else if (IsSample(line, "dais_redis_reachable")) {
      f->redis_reachable_min = f->redis_reachable_min < 0 ? v : std::min(f->redis_reachable_min, v);
    } else if (IsSample(line, "dais_txn_in_doubt_transactions")) {
      f->txn_in_doubt += v;
    } else if (IsSample(line, "dais_txn_in_doubt_oldest_age_seconds")) {
      f->txn_oldest_s = std::max(f->txn_oldest_s, v);
    }
  }
}

double BucketQuantileMs(const std::map<double, double>& buckets, double q) {
  if (buckets.empty()) return -1;
  const double total = buckets.rbegin()->second;  // +Inf holds every request
  if (total <= 0) return -1;
  const double rank = q * total;
  double lower = 0, below = 0;
  for (const auto& [le, count] : buckets) {
    if (count >= rank) {
      if (std::isinf(le)) return lower * 1000;  // above the last bound: its bound, as Prometheus
      const double inside = count - below;
      const double share = inside > 0 ? (rank - below) / inside : 0;
      return (lower + (le - lower) * share) * 1000;
    }
    lower = le;
    below = count;
  }
  return lower * 1000;
}

ConsoleState::ConsoleState(etcd::Client* etcd, Options options, Publish publish)
    : etcd_(etcd),
      options_(std::move(options)),
      publish_(std::move(publish)),
      pool_(std::make_unique<gateway::UpstreamPool>(gateway::UpstreamOptions{1, 4, 64ull << 20})) {
  etcd::Watcher::Callbacks cb;
  auto dirty = [this] {
    MutexLock l(&mu_);
    dirty_ = true;
    changed_.SignalAll();
  };
  cb.on_snapshot = [dirty](const etcd::RangeResult&) { dirty(); };
  cb.on_events = [dirty](const std::vector<etcd::Event>&) { dirty(); };
  watch_ = std::make_unique<etcd::Watcher>(etcd_, "/dais/", std::move(cb));
  state_thread_ = std::thread([this] { StateLoop(); });
  scrape_thread_ = std::thread([this] { ScrapeLoop(); });
}

ConsoleState::~ConsoleState() {
  {
    MutexLock l(&mu_);
    stop_ = true;
    changed_.SignalAll();
  }
  watch_.reset();
  state_thread_.join();
  scrape_thread_.join();
}

std::string ConsoleState::State() const {
  MutexLock l(&mu_);
  return state_;
}

std::string ConsoleState::Metrics() const {
  MutexLock l(&mu_);
  return metrics_;
}

std::string ConsoleState::BuildState() {
  std::string out = fmt::format("{{\"time_ms\":{}", NowMs());
  for (const char* kind : {"nodes", "deployments", "instances", "assignments", "routes"}) {
    JsonArrayOf(&out, kind, KindJson(*etcd_, kind));
  }
  JsonArrayOf(&out, "collections", KindJson(*etcd_, "collections"));
  out += ",\"rollouts\":" + ValuesArray(*etcd_, gateway::kRolloutsPrefix);
  out += ",\"gateways\":" + ValuesArray(*etcd_, gateway::kGatewaysPrefix);
  out += ",\"events\":" + ValuesArray(*etcd_, "/dais/events/", 500);
  return out + "}";
}

void ConsoleState::StateLoop() {
  for (;;) {
    {
      MutexLock l(&mu_);
      while (!dirty_ && !stop_) changed_.Wait();
      if (stop_) return;
      dirty_ = false;
    }
    std::string state = BuildState();
    bool same;
    {
      MutexLock l(&mu_);
      same =
          state.substr(state.find(',')) == state_.substr(std::min(state_.find(','), state_.size()));
      state_ = state;
    }
    if (!same) publish_("state", state);
    // Settle: changes come in bursts (a placement writes several keys); one rebuild per burst.
    MutexLock l(&mu_);
    changed_.WaitUntil(std::chrono::steady_clock::now() + options_.settle);
    if (stop_) return;
  }
}

std::map<std::string, std::string> ConsoleState::Targets(bool gateways) const {
  std::map<std::string, std::string> out;  // address -> name
  auto r = etcd_->Get(gateways ? gateway::kGatewaysPrefix : cluster::kNodesPrefix, true);
  if (!r.ok()) return out;
  const size_t strip =
      std::string(gateways ? gateway::kGatewaysPrefix : cluster::kNodesPrefix).size();
  for (const auto& kv : r->kvs) {
    rapidjson::Document d;
    if (!json::ParseJson(kv.value, &d).ok() || !d.IsObject()) continue;
    for (const char* field : {"metrics", "http"}) {
      if (gateways && std::string(field) == "metrics") continue;
      if (d.HasMember(field) && d[field].IsString() && d[field].GetStringLength() > 0) {
        out[d[field].GetString()] = kv.key.substr(strip);
        break;
      }
    }
  }
  return out;
}

std::map<std::string, std::string> ConsoleState::Fetch(
    const std::map<std::string, std::string>& targets, std::vector<std::string>* down) {
  std::vector<std::pair<std::string, std::future<gateway::UpstreamResult>>> answers;
  for (const auto& [address, name] : targets) {
    auto p = std::make_shared<std::promise<gateway::UpstreamResult>>();
    answers.emplace_back(address, p->get_future());
    gateway::UpstreamRequest r;
    r.method = "GET";
    r.target = "/metrics";
    r.deadline = std::chrono::steady_clock::now() + options_.scrape_every;
    pool_->Send(address, std::move(r),
                [p](gateway::UpstreamResult res) { p->set_value(std::move(res)); });
  }
  std::map<std::string, std::string> out;
  for (auto& [address, answer] : answers) {
    gateway::UpstreamResult r = answer.get();
    if (r.status.ok() && r.response.status == 200) {
      out[address] = std::move(r.response.body);
    } else {
      down->push_back(targets.at(address) + " (" + address + ")");
    }
  }
  return out;
}

ConsoleSample ConsoleState::ScrapeTargets(double seconds) {
  ConsoleSample sample;
  const auto gateways = Targets(true);
  std::map<std::string, std::string> others = Targets(false);
  for (const std::string& t : options_.extra_targets) others[t] = t;
  const auto gateway_texts = Fetch(gateways, &sample.down);
  const auto other_texts = Fetch(others, &sample.down);
  gateway::Scrape delta;
  for (const auto& [address, text] : gateway_texts) {
    gateway::Scrape now = gateway::ParseGatewayMetrics(text);
    auto before = last_.find(address);
    if (before != last_.end() && !gateway::WentDown(before->second, now)) {
      gateway::Merge(&delta, gateway::DeltaScrape(before->second, now));
    }
    last_[address] = std::move(now);
  }
  for (const auto& [address, text] : other_texts) AddTargetFigures(text, &sample.figures);
  sample.targets_up = static_cast<int>(gateway_texts.size() + other_texts.size());
  for (const auto& [key, s] : delta.series) {
    double requests = 0, errors = 0;
    for (const auto& [code, n] : s.by_code) {
      requests += n;
      if (!code.empty() && code[0] == '5') errors += n;
    }
    sample.series[key] = {requests / seconds, requests > 0 ? errors / requests : 0,
                          BucketQuantileMs(s.buckets, 0.5), BucketQuantileMs(s.buckets, 0.99)};
  }
  return sample;
}

void ConsoleState::ScrapeOnce(int64_t now_ms, double seconds) {
  ConsoleSample sample;
  if (options_.prometheus.empty()) {
    sample = ScrapeTargets(seconds);
  } else if (auto s = QueryPrometheus(*pool_, options_.prometheus, options_.scrape_every); s.ok()) {
    sample = std::move(*s);
  } else {
    sample.source = "prometheus";
    sample.down.push_back(std::string(s.status().message()));
  }
  MutexLock l(&mu_);
  for (const auto& [key, f] : sample.series) {
    auto& points = series_[key];
    points.push_back({now_ms, f.rps, f.error_rate, f.p50_ms, f.p99_ms});
    while (points.size() > options_.points) points.pop_front();
  }
  metrics_ = MetricsJson(now_ms, sample);
}

std::string ConsoleState::MetricsJson(int64_t now_ms, const ConsoleSample& sample) const {
  const TargetFigures& f = sample.figures;
  const std::vector<std::string>& down = sample.down;
  std::string out =
      fmt::format("{{\"time_ms\":{},\"source\":\"{}\",\"targets_up\":{},\"targets_down\":[", now_ms,
                  sample.source, sample.targets_up);
  for (size_t i = 0; i < down.size(); ++i) out += (i ? "," : "") + JsonQuoted(down[i]);
  const double miss = f.feature_values > 0 ? 1 - f.feature_present / f.feature_values : -1;
  out += fmt::format(
      "],\"features\":{{\"values\":{},\"miss_ratio\":{}}},\"redis_reachable\":{},"
      "\"txn\":{{\"in_doubt\":{},\"oldest_age_s\":{}}},\"series\":[",
      Num(f.feature_values), miss < 0 ? "null" : Num(miss),
      f.redis_reachable_min < 0 ? "null" : Num(f.redis_reachable_min), Num(f.txn_in_doubt),
      Num(f.txn_oldest_s));
  std::vector<std::string> alerts = sample.alerts;
  bool first = true;
  for (const auto& [key, points] : series_) {
    out += fmt::format("{}{{\"route\":{},\"version\":{},\"points\":[", first ? "" : ",",
                       JsonQuoted(key.first), JsonQuoted(key.second));
    first = false;
    for (size_t i = 0; i < points.size(); ++i) {
      const Point& p = points[i];
      out +=
          fmt::format("{}[{},{},{},{},{}]", i ? "," : "", p.time_ms, Num(p.rps), Num(p.error_rate),
                      p.p50_ms < 0 ? "null" : Num(p.p50_ms), p.p99_ms < 0 ? "null" : Num(p.p99_ms));
    }
    out += "]}";
    if (!points.empty() && points.back().p99_ms > options_.p1_p99_ms) {
      alerts.push_back(fmt::format(
          "{{\"severity\":\"P1\",\"name\":\"p99 latency\",\"text\":{}}}",
          JsonQuoted(fmt::format("route {} v{}: p99 {:.0f} ms > {:g} ms", key.first, key.second,
                                 points.back().p99_ms, options_.p1_p99_ms))));
    }
  }
  out += "],\"alerts\":[";
  if (miss > options_.p2_miss_ratio) {
    alerts.push_back(
        fmt::format("{{\"severity\":\"P2\",\"name\":\"feature misses\",\"text\":{}}}",
                    JsonQuoted(fmt::format("feature miss ratio {:.1f} % > {:g} %", miss * 100,
                                           options_.p2_miss_ratio * 100))));
  }
  if (f.txn_oldest_s > 60) {
    alerts.push_back(
        fmt::format("{{\"severity\":\"P1\",\"name\":\"transaction in doubt\",\"text\":{}}}",
                    JsonQuoted(fmt::format("{:g} transactions in doubt, the oldest for {:.0f} s",
                                           f.txn_in_doubt, f.txn_oldest_s))));
  }
  for (const std::string& d : down) {
    alerts.push_back(fmt::format("{{\"severity\":\"P1\",\"name\":\"target down\",\"text\":{}}}",
                                 JsonQuoted(d + " does not answer /metrics")));
  }
  for (size_t i = 0; i < alerts.size(); ++i) out += (i ? "," : "") + alerts[i];
  return out + "]}";
}

void ConsoleState::ScrapeLoop() {
  auto last = std::chrono::steady_clock::now();
  for (;;) {
    {
      MutexLock l(&mu_);
      const auto next = last + options_.scrape_every;
      while (!stop_ && std::chrono::steady_clock::now() < next) changed_.WaitUntil(next);
      if (stop_) return;
    }
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - last).count();
    last = now;
    ScrapeOnce(NowMs(), seconds);
    publish_("metrics", Metrics());
  }
}

}  // namespace dais::cmd
