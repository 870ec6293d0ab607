#include "gateway/rollout.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "common/json.h"
#include "fmt/format.h"
#include "metrics/registry.h"

namespace dais::gateway {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void Str(Writer& w, const char* key, const std::string& v) {
  w.Key(key);
  w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
}

// label="value" pairs of a sample line's {...}; false when malformed.
bool Labels(std::string_view s, std::map<std::string, std::string>* out) {
  size_t i = 0;
  while (i < s.size()) {
    const size_t eq = s.find('=', i);
    if (eq == std::string_view::npos || eq + 1 >= s.size() || s[eq + 1] != '"') return false;
    std::string name(s.substr(i, eq - i));
    std::string value;
    size_t j = eq + 2;
    for (; j < s.size() && s[j] != '"'; ++j) {
      if (s[j] == '\\' && j + 1 < s.size()) ++j;
      value += s[j];
    }
    if (j >= s.size()) return false;
    (*out)[std::move(name)] = std::move(value);
    i = j + 1;
    if (i < s.size() && s[i] == ',') ++i;
  }
  return true;
}

}  // namespace

std::string Rollout::ToJson() const {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  Str(w, "route", route);
  w.Key("from");
  w.Int64(from);
  w.Key("to");
  w.Int64(to);
  w.Key("steps");
  w.StartArray();
  for (int s : steps) w.Int(s);
  w.EndArray();
  w.Key("interval_ms");
  w.Int64(interval_ms);
  w.Key("max_error_rate");
  w.Double(max_error_rate);
  w.Key("max_p99_ms");
  w.Double(max_p99_ms);
  w.Key("min_requests");
  w.Int64(min_requests);
  w.Key("max_psi");
  w.Double(max_psi);
  Str(w, "accuracy_label", accuracy_label);
  w.Key("min_accuracy_delta");
  w.Double(min_accuracy_delta);
  Str(w, "state", state);
  w.Key("step");
  w.Int(step);
  w.Key("step_started_ms");
  w.Int64(step_started_ms);
  Str(w, "reason", reason);
  w.Key("history");
  w.StartArray();
  for (const Record& h : history) {
    w.StartObject();
    w.Key("step");
    w.Int(h.step);
    w.Key("weight");
    w.Int(h.weight);
    w.Key("requests");
    w.Int64(h.requests);
    w.Key("error_rate");
    w.Double(h.error_rate);
    w.Key("p99_ms");
    w.Double(h.p99_ms);
    w.Key("psi");
    w.Double(h.psi);
    w.Key("accuracy_delta");
    w.Double(h.accuracy_delta);
    Str(w, "decision", h.decision);
    w.Key("time_ms");
    w.Int64(h.time_ms);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return sb.GetString();
}

Status ValidateRollout(const Rollout& r) {
  if (r.route.empty()) return InvalidArgument("route: required");
  if (r.to < 1) return InvalidArgument("to: a version number");
  if (r.from == r.to)
    return InvalidArgument("to: version " + std::to_string(r.to) + " is already the stable one");
  if (r.steps.empty() || r.steps.back() != 100) {
    return InvalidArgument("steps: must end at 100 (the canary's weight in %, increasing)");
  }
  for (size_t i = 0; i < r.steps.size(); ++i) {
    if (r.steps[i] < 1 || r.steps[i] > 100 || (i > 0 && r.steps[i] <= r.steps[i - 1])) {
      return InvalidArgument("steps: " + std::to_string(r.steps[i]) +
                             " must be increasing, each 1 to 100");
    }
  }
  if (r.interval_ms < 100 || r.interval_ms > 86400000) {
    return InvalidArgument("interval: 100 ms to 24 h");
  }
  if (!(r.max_error_rate >= 0 && r.max_error_rate <= 1)) {
    return InvalidArgument("max-error-rate: 0 to 100 %");
  }
  if (!(r.max_p99_ms >= 0 && r.max_p99_ms <= 3.6e6))
    return InvalidArgument("max-p99-ms: 0 to 3600000");
  if (r.min_requests < 1) return InvalidArgument("min-requests: at least 1");
  if (!(r.max_psi >= 0 && r.max_psi <= 10)) return InvalidArgument("max-psi: 0 to 10");
  if (!(r.min_accuracy_delta >= -1 && r.min_accuracy_delta <= 1)) {
    return InvalidArgument("min-accuracy-delta: -1 to 1 (the canary's accuracy minus stable's)");
  }
  return OkStatus();
}

StatusOr<Rollout> RolloutFromJson(const std::string& json) {
  rapidjson::Document d;
  RETURN_IF_ERROR(json::ParseJson(json, &d));
  if (!d.IsObject()) return InvalidArgument("rollout: not a JSON object");
  Rollout r;
  auto i64 = [&d](const char* k, int64_t* out) {
    if (d.HasMember(k) && d[k].IsInt64()) *out = d[k].GetInt64();
  };
  auto dbl = [&d](const char* k, double* out) {
    if (d.HasMember(k) && d[k].IsNumber()) *out = d[k].GetDouble();
  };
  auto str = [&d](const char* k, std::string* out) {
    if (d.HasMember(k) && d[k].IsString()) *out = d[k].GetString();
  };
  str("route", &r.route);
  i64("from", &r.from);
  i64("to", &r.to);
  i64("interval_ms", &r.interval_ms);
  dbl("max_error_rate", &r.max_error_rate);
  dbl("max_p99_ms", &r.max_p99_ms);
  i64("min_requests", &r.min_requests);
  dbl("max_psi", &r.max_psi);
  str("accuracy_label", &r.accuracy_label);
  dbl("min_accuracy_delta", &r.min_accuracy_delta);
  str("state", &r.state);
  int64_t step = 0;
  i64("step", &step);
  r.step = static_cast<int>(step);
  i64("step_started_ms", &r.step_started_ms);
  str("reason", &r.reason);
  if (d.HasMember("steps") && d["steps"].IsArray()) {
    r.steps.clear();
    for (const auto& s : d["steps"].GetArray()) {
      if (s.IsInt()) r.steps.push_back(s.GetInt());
    }
  }
  if (d.HasMember("history") && d["history"].IsArray()) {
    for (const auto& h : d["history"].GetArray()) {
      if (!h.IsObject()) continue;
      Rollout::Record rec;
      if (h.HasMember("step") && h["step"].IsInt()) rec.step = h["step"].GetInt();
      if (h.HasMember("weight") && h["weight"].IsInt()) rec.weight = h["weight"].GetInt();
      if (h.HasMember("requests") && h["requests"].IsInt64())
        rec.requests = h["requests"].GetInt64();
      if (h.HasMember("error_rate") && h["error_rate"].IsNumber()) {
        rec.error_rate = h["error_rate"].GetDouble();
      }
      if (h.HasMember("p99_ms") && h["p99_ms"].IsNumber()) rec.p99_ms = h["p99_ms"].GetDouble();
      if (h.HasMember("psi") && h["psi"].IsNumber()) rec.psi = h["psi"].GetDouble();
      if (h.HasMember("accuracy_delta") && h["accuracy_delta"].IsNumber()) {
        rec.accuracy_delta = h["accuracy_delta"].GetDouble();
      }
      if (h.HasMember("decision") && h["decision"].IsString())
        rec.decision = h["decision"].GetString();
      if (h.HasMember("time_ms") && h["time_ms"].IsInt64()) rec.time_ms = h["time_ms"].GetInt64();
      r.history.push_back(std::move(rec));
    }
  }
  RETURN_IF_ERROR(ValidateRollout(r));
  if (r.step < 0 || r.step >= static_cast<int>(r.steps.size())) {
    return InvalidArgument("step: " + std::to_string(r.step) + " out of range");
  }
  return r;
}

RouteSpec RouteAtWeight(const RouteSpec& route, int64_t stable, int64_t canary, int canary_weight) {
  RouteSpec r = route;
  r.versions.clear();
  if (canary_weight < 100) r.versions.push_back({stable, 100 - canary_weight});
  if (canary_weight > 0) r.versions.push_back({canary, canary_weight});
  r.stable = canary_weight >= 100 ? canary : stable;
  for (auto it = r.match.begin(); it != r.match.end();) {  // rules naming a version now gone
    bool listed = false;
    for (const auto& v : r.versions) listed = listed || v.version == it->version;
    it = listed ? it + 1 : r.match.erase(it);
  }
  return r;
}

Scrape ParseGatewayMetrics(const std::string& text) {
  static const std::string kRequests = "dais_gateway_requests_total{";
  static const std::string kBuckets = "dais_gateway_request_duration_seconds_bucket{";
  static const std::string kScores = "dais_inference_score_bucket{";
  Scrape s;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const bool requests = line.rfind(kRequests, 0) == 0;
    const bool buckets = !requests && line.rfind(kBuckets, 0) == 0;
    const bool scores = !requests && !buckets && line.rfind(kScores, 0) == 0;
    if (!requests && !buckets && !scores) continue;
    const size_t open = line.find('{');
    const size_t close = line.rfind('}');
    if (close == std::string::npos || close < open) continue;
    std::map<std::string, std::string> labels;
    if (!Labels(std::string_view(line).substr(open + 1, close - open - 1), &labels)) continue;
    double value = 0;
    try {
      value = std::stod(line.substr(close + 1));
    } catch (...) {
      continue;
    }
    auto bound_of = [](const std::string& le) {
      return le == "+Inf" ? std::numeric_limits<double>::infinity()
                          : std::strtod(le.c_str(), nullptr);
    };
    if (scores) {
      s.scores[{labels["model"], labels["version"]}][bound_of(labels["le"])] += value;
      continue;
    }
    Scrape::Series& series = s.series[{labels["route"], labels["version"]}];
    if (requests) {
      series.by_code[labels["code"]] += value;
    } else {
      series.buckets[bound_of(labels["le"])] += value;
    }
  }
  return s;
}

void Merge(Scrape* a, const Scrape& b) {
  for (const auto& [key, series] : b.series) {
    Scrape::Series& into = a->series[key];
    for (const auto& [code, n] : series.by_code) into.by_code[code] += n;
    for (const auto& [le, n] : series.buckets) into.buckets[le] += n;
  }
  for (const auto& [key, buckets] : b.scores) {
    auto& into = a->scores[key];
    for (const auto& [le, n] : buckets) into[le] += n;
  }
}

Figures Delta(const Scrape& before, const Scrape& after, const std::string& route,
              int64_t version) {
  Figures f;
  const auto key = std::make_pair(route, std::to_string(version));
  auto a = after.series.find(key);
  if (a == after.series.end()) return f;
  auto b = before.series.find(key);
  const Scrape::Series empty;
  const Scrape::Series& old = b == before.series.end() ? empty : b->second;
  for (const auto& [code, n] : a->second.by_code) {
    auto o = old.by_code.find(code);
    const double d = n - (o == old.by_code.end() ? 0 : o->second);
    f.requests += static_cast<int64_t>(d);
    if (!code.empty() && code[0] == '5') f.errors += static_cast<int64_t>(d);
  }
  // p99: the first bucket whose count reaches 99 % of the step's observations.
  std::vector<std::pair<double, double>> counts;
  for (const auto& [le, n] : a->second.buckets) {
    auto o = old.buckets.find(le);
    counts.emplace_back(le, n - (o == old.buckets.end() ? 0 : o->second));
  }
  if (!counts.empty() && counts.back().second > 0) {
    const double target = 0.99 * counts.back().second;
    for (const auto& [le, n] : counts) {
      if (n >= target) {
        f.p99_ms = std::isinf(le) ? std::numeric_limits<double>::infinity() : le * 1000.0;
        break;
      }
    }
  }
  return f;
}

Scrape DeltaScrape(const Scrape& before, const Scrape& after) {
  auto delta = [](double now, double then) { return now >= then ? now - then : now; };
  Scrape out;
  for (const auto& [key, series] : after.series) {
    auto b = before.series.find(key);
    Scrape::Series& d = out.series[key];
    for (const auto& [code, n] : series.by_code) {
      double then = 0;
      if (b != before.series.end()) {
        auto it = b->second.by_code.find(code);
        if (it != b->second.by_code.end()) then = it->second;
      }
      d.by_code[code] = delta(n, then);
    }
    for (const auto& [le, n] : series.buckets) {
      double then = 0;
      if (b != before.series.end()) {
        auto it = b->second.buckets.find(le);
        if (it != b->second.buckets.end()) then = it->second;
      }
      d.buckets[le] = delta(n, then);
    }
  }
  for (const auto& [key, buckets] : after.scores) {
    auto b = before.scores.find(key);
    auto& d = out.scores[key];
    for (const auto& [le, n] : buckets) {
      double then = 0;
      if (b != before.scores.end()) {
        auto it = b->second.find(le);
        if (it != b->second.end()) then = it->second;
      }
      d[le] = delta(n, then);
    }
  }
  return out;
}

bool WentDown(const Scrape& before, const Scrape& after) {
  auto below = [](const auto& then, const auto& now) {
    for (const auto& [k, v] : now) {
      auto it = then.find(k);
      if (it != then.end() && v < it->second) return true;
    }
    return false;
  };
  for (const auto& [key, series] : after.series) {
    auto b = before.series.find(key);
    if (b != before.series.end() &&
        (below(b->second.by_code, series.by_code) || below(b->second.buckets, series.buckets))) {
      return true;
    }
  }
  for (const auto& [key, buckets] : after.scores) {
    auto b = before.scores.find(key);
    if (b != before.scores.end() && below(b->second, buckets)) return true;
  }
  return false;
}

double Psi(const std::map<double, double>& a, const std::map<double, double>& b, int64_t* na,
           int64_t* nb) {
  // Cumulative counts -> per-bin counts over the union of the bounds.
  std::map<double, std::pair<double, double>> cum;
  for (const auto& [le, n] : a) cum[le].first = n;
  for (const auto& [le, n] : b) cum[le].second = n;
  const double ta = a.empty() ? 0 : a.rbegin()->second;
  const double tb = b.empty() ? 0 : b.rbegin()->second;
  *na = static_cast<int64_t>(ta);
  *nb = static_cast<int64_t>(tb);
  if (ta <= 0 || tb <= 0) return -1;
  double psi = 0, prev_a = 0, prev_b = 0;
  for (const auto& [le, n] : cum) {
    const double pa = std::max(n.first - prev_a, 0.0) / ta;
    const double pb = std::max(n.second - prev_b, 0.0) / tb;
    prev_a = std::max(prev_a, n.first);
    prev_b = std::max(prev_b, n.second);
    const double qa = std::max(pa, 1e-4), qb = std::max(pb, 1e-4);
    psi += (qa - qb) * std::log(qa / qb);
  }
  return psi;
}

void AddScores(const Scrape& since, const std::string& model, int64_t canary, int64_t stable,
               int64_t min_requests, Figures* f) {
  static const std::map<double, double> kNone;
  auto find = [&](int64_t v) -> const std::map<double, double>& {
    auto it = since.scores.find({model, std::to_string(v)});
    return it == since.scores.end() ? kNone : it->second;
  };
  const double psi = Psi(find(canary), find(stable), &f->canary_scores, &f->stable_scores);
  f->psi = f->canary_scores >= min_requests && f->stable_scores >= min_requests ? psi : -1;
}

LimitResolution ResolveP99Limit(double limit_ms) {
  static const std::vector<double> kBounds = metrics::FineLatencyBuckets();
  return ResolveP99Limit(limit_ms, kBounds);
}

LimitResolution ResolveP99Limit(double limit_ms, const std::vector<double>& bounds_seconds) {
  LimitResolution r;
  constexpr double kRelativeEpsilon = 1e-9;  // 25 ms is the bound 0.025 s
  double lower = 0;
  for (double b : bounds_seconds) {
    const double ms = b * 1000.0;
    if (std::abs(ms - limit_ms) <= kRelativeEpsilon * ms) {
      r.lower_ms = lower;
      r.upper_ms = ms;
      r.exact = r.resolved = true;
      return r;
    }
    if (ms > limit_ms) {
      r.lower_ms = lower;
      r.upper_ms = ms;
      r.resolved = lower > 0 && ms <= 1.25 * lower * (1 + kRelativeEpsilon);
      return r;
    }
    lower = ms;
  }
  r.lower_ms = lower;
  r.upper_ms = std::numeric_limits<double>::infinity();
  return r;
}

std::string LimitResolution::Describe() const {
  if (exact) return "a bucket bound";
  if (std::isinf(upper_ms)) return fmt::format("above the last bucket bound ({:g} ms)", lower_ms);
  if (lower_ms <= 0) return fmt::format("below the first bucket bound ({:g} ms)", upper_ms);
  return fmt::format("between the bucket bounds {:g} and {:g} ms", lower_ms, upper_ms);
}

void AddAccuracy(const std::map<int64_t, LabelledAnswers>& counts, int64_t canary, int64_t stable,
                 int64_t min_requests, Figures* f) {
  auto of = [&counts](int64_t v) {
    auto it = counts.find(v);
    return it == counts.end() ? LabelledAnswers{} : it->second;
  };
  const LabelledAnswers c = of(canary), s = of(stable);
  f->canary_labeled = c.labeled;
  f->stable_labeled = s.labeled;
  if (c.labeled >= min_requests && s.labeled >= min_requests && c.labeled > 0 && s.labeled > 0) {
    f->canary_accuracy = static_cast<double>(c.correct) / static_cast<double>(c.labeled);
    f->stable_accuracy = static_cast<double>(s.correct) / static_cast<double>(s.labeled);
  }
}

Decision Decide(const Rollout& r, const Figures& f, int64_t now_ms) {
  std::string figures = fmt::format("{} requests, {:.2f} % errors, p99 {:.1f} ms", f.requests,
                                    f.error_rate() * 100, f.p99_ms);
  if (r.max_psi > 0) {
    figures += f.psi >= 0 ? fmt::format(", score PSI {:.3f} ({} canary / {} stable rows)", f.psi,
                                        f.canary_scores, f.stable_scores)
                          : fmt::format(
                                ", score PSI not measured yet ({} canary / {} stable "
                                "rows scored)",
                                f.canary_scores, f.stable_scores);
  }
  if (!r.accuracy_label.empty()) {
    figures +=
        f.accuracy_measured()
            ? fmt::format(", live accuracy {:.3f} vs {:.3f} ({} / {} labelled)", f.canary_accuracy,
                          f.stable_accuracy, f.canary_labeled, f.stable_labeled)
            : fmt::format(
                  ", live accuracy not measured yet ({} canary / {} stable "
                  "answers labelled)",
                  f.canary_labeled, f.stable_labeled);
  }
  if (f.requests >= r.min_requests) {
    if (f.error_rate() > r.max_error_rate) {
      return {Decision::kRollBack,
              fmt::format("error rate {:.2f} % over the limit {:.2f} % ({})", f.error_rate() * 100,
                          r.max_error_rate * 100, figures)};
    }
    if (r.max_p99_ms > 0 && f.p99_ms > r.max_p99_ms) {
      return {Decision::kRollBack, fmt::format("p99 {:.1f} ms over the limit {:.1f} ms ({})",
                                               f.p99_ms, r.max_p99_ms, figures)};
    }
  }
  if (r.max_psi > 0 && f.psi > r.max_psi) {
    return {Decision::kRollBack,
            fmt::format("the canary's scores shifted from the stable version's: PSI {:.3f} over "
                        "the limit {:.3f} ({})",
                        f.psi, r.max_psi, figures)};
  }
  if (!r.accuracy_label.empty() && f.accuracy_measured() &&
      f.canary_accuracy - f.stable_accuracy < r.min_accuracy_delta) {
    return {Decision::kRollBack,
            fmt::format("the canary's live accuracy is {:+.3f} from the stable version's, under "
                        "the limit {:+.3f} ({})",
                        f.canary_accuracy - f.stable_accuracy, r.min_accuracy_delta, figures)};
  }
  if (now_ms - r.step_started_ms < r.interval_ms) return {Decision::kWait, figures};
  // A quality gate that measured nothing does not let the canary through: it waits (the
  // operator sees why in the reason; `dais ctl rollback` ends it). Not on a last step of 100 %,
  // where the stable version has no traffic to compare with.
  const bool last_step = r.step + 1 >= static_cast<int>(r.steps.size());
  const bool alone = last_step && r.steps[static_cast<size_t>(r.step)] == 100;
  if (r.max_psi > 0 && f.psi < 0 && !alone) {
    return {Decision::kWait,
            "waiting for scored rows of both versions to compare (" + figures + ")"};
  }
  if (!r.accuracy_label.empty() && !f.accuracy_measured() && !alone) {
    return {Decision::kWait,
            "waiting for labelled answers of both versions to compare (" + figures + ")"};
  }
  if (f.requests < r.min_requests) {
    return {Decision::kWait,
            fmt::format("waiting for {} requests to the canary ({})", r.min_requests, figures)};
  }
  const bool last = r.step + 1 >= static_cast<int>(r.steps.size());
  return {last ? Decision::kPromote : Decision::kNext, figures};
}

}  // namespace dais::gateway
