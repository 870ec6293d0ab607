#include "perf/runner.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "dais/tensor.h"
#include "perf/client.h"
#include "perf/input_data.h"
#include "perf/load.h"
#include "perf/report.h"

namespace dais::perf {
namespace {

void Error(const std::string& message) { fmt::print(stderr, "dais perf: {}\n", message); }

Status WriteFile(const std::string& path, const std::string& content) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << content;
  f.close();
  if (!f) return Internal(fmt::format("cannot write '{}'", path));
  return OkStatus();
}

std::string ModelLabel(const PerfOptions& o) {
  return o.model_version.empty() ? fmt::format("'{}'", o.model_name)
                                 : fmt::format("'{}' version {}", o.model_name, o.model_version);
}

// What went wrong when asking for the model, said for a person.
std::string DescribeModelError(const PerfOptions& o, const std::string& address, const Status& s) {
  if (s.code() == StatusCode::kNotFound) {
    return fmt::format("model {} not found on {}: {}", ModelLabel(o), address, s.message());
  }
  if (s.code() == StatusCode::kUnavailable) {
    return fmt::format("cannot reach the server at {}: {}", address, s.message());
  }
  return fmt::format("cannot get the metadata of model {} from {}: {}", ModelLabel(o), address,
                     s.message());
}

void WriteOutputs(const PerfOptions& o, const std::vector<LevelResult>& rows, int* exit_code) {
  if (!o.csv_file.empty()) {
    if (Status s = WriteFile(o.csv_file, ToCsv(rows)); !s.ok()) {
      Error(s.message());
      if (*exit_code == kExitOk) *exit_code = kExitSetup;
    }
  }
  if (!o.json_file.empty()) {
    if (Status s = WriteFile(o.json_file, ToJson(rows)); !s.ok()) {
      Error(s.message());
      if (*exit_code == kExitOk) *exit_code = kExitSetup;
    }
  }
}

std::vector<Level> Levels(const PerfOptions& o) {
  std::vector<Level> levels;
  if (!o.request_rate_range.empty()) {
    auto rates = ParseRateRange("--request-rate-range", o.request_rate_range);
    for (double r : *rates) levels.push_back(Level{0, r});
  } else {
    auto cs = ParseConcurrencyRange("--concurrency-range",
                                    o.concurrency_range.empty() ? "1:1" : o.concurrency_range);
    for (int64_t c : *cs) levels.push_back(Level{c, 0});
  }
  return levels;
}

// The TLS of the connection to measure, from perf_analyzer's --ssl-* flags and the URL scheme.
tls::ClientConfig TlsOf(const PerfOptions& o, const HostPort& hp) {
  tls::ClientConfig c;
  if (o.protocol == "grpc") {
    c.enabled = o.ssl_grpc_use_ssl || hp.tls;
    c.ca_file = o.ssl_grpc_root_certifications_file;
    c.cert_file = o.ssl_grpc_certificate_chain_file;
    c.key_file = o.ssl_grpc_private_key_file;
  } else {
    c.enabled = hp.tls;
    c.ca_file = o.ssl_https_ca_certificates_file;
    c.cert_file = o.ssl_https_client_certificate_file;
    c.key_file = o.ssl_https_private_key_file;
    // dais checks the name whenever it checks the chain: either flag at 0 turns both off.
    c.verify = o.ssl_https_verify_peer != 0 && o.ssl_https_verify_host != 0;
  }
  return c;
}

StatusOr<std::unique_ptr<Client>> Connect(const PerfOptions& o, std::string* address) {
  ASSIGN_OR_RETURN(
      auto hp, ParseUrl(o.url.empty() ? "localhost" : o.url, o.protocol == "grpc" ? 8001 : 8000));
  ClientOptions co;
  co.protocol = o.protocol;
  co.host = hp.host;
  co.port = hp.port;
  co.model_name = o.model_name;
  co.model_version = o.model_version;
  co.http_binary = o.http_binary;
  co.grpc_stub = o.grpc_stub;
  co.tls = TlsOf(o, hp);
  *address = hp.host + ":" + hp.port;
  return MakeClient(co);
}

// Requests: from the file (shared by every session, each starting at its own entry), or
// generated per session from the seed and the session's index.
StatusOr<SessionFactory> Sessions(const PerfOptions& o, const std::vector<ResolvedInput>& inputs,
                                  Client* c) {
  std::vector<RequestInputs> file_requests;
  DataMode mode = DataMode::kRandom;
  if (o.input_data == "zero") {
    mode = DataMode::kZero;
  } else if (o.input_data != "random") {
    ASSIGN_OR_RETURN(file_requests, LoadInputDataFile(o.input_data, inputs));
  }
  return SessionFactory([&o, inputs, c, mode, file_requests](int index) {
    std::vector<RequestInputs> requests;
    if (!file_requests.empty()) {
      for (size_t i = 0; i < file_requests.size(); ++i) {
        requests.push_back(file_requests[(static_cast<size_t>(index) + i) % file_requests.size()]);
      }
    } else {
      const uint64_t seed = o.seed * 1000003u + static_cast<uint64_t>(index);
      requests.push_back(GenerateInputs(inputs, mode, seed, o.string_length));
    }
    return c->NewSession(requests);
  });
}

void PrintHeader(const PerfOptions& o, const std::vector<ResolvedInput>& inputs,
                 const Client& client, bool have_stats) {
  std::string shapes;
  for (const ResolvedInput& in : inputs) {
    shapes += fmt::format("{}{} {} {}", shapes.empty() ? "" : ", ", in.spec.name, in.spec.datatype,
                          ShapeToString(in.shape));
  }
  fmt::print("dais perf: model {} on {}, batch size {}, inputs: {}\n", ModelLabel(o),
             client.Describe(), o.batch_size, shapes);
  fmt::print(
      "measurement: {} ms windows until 3 agree within {:g}% (at most {}), warm-up {:g} s\n\n",
      o.measurement_interval_ms, o.stability_percentage, o.max_trials, o.warmup_secs);
  fmt::print("{}", TableHeader(!o.request_rate_range.empty(), have_stats));
  std::fflush(stdout);
}

LoadOptions LoadOptionsFrom(const PerfOptions& o) {
  LoadOptions lo;
  lo.batch_size = o.batch_size;
  lo.warmup_secs = o.warmup_secs;
  lo.measurement_interval_ms = o.measurement_interval_ms;
  lo.stability_percentage = o.stability_percentage;
  lo.max_trials = o.max_trials;
  lo.progress = !o.no_progress && isatty(STDERR_FILENO);
  lo.poisson = o.request_distribution == "poisson";
  lo.seed = o.seed;
  lo.max_threads = o.max_threads;
  lo.connections = o.grpc_connections;
  return lo;
}

// Measures every level, printing a row each; the exit code.
int MeasureLevels(const PerfOptions& o, LoadRunner& runner, bool have_stats,
                  std::vector<LevelResult>* rows) {
  const bool rate_mode = !o.request_rate_range.empty();
  for (const Level& level : Levels(o)) {
    auto m = runner.Run(level);
    if (!m.ok()) {
      Error(m.status().message());
      return kExitSetup;
    }
    LevelResult r = MakeResult(&*m, o.batch_size);
    rows->push_back(r);
    fmt::print("{}", TableRow(r, rate_mode, have_stats));
    std::fflush(stdout);
    if (rate_mode && r.delayed * 10 > r.requests + r.errors) {
      fmt::print(stderr,
                 "warning: {}: {} of {} requests were sent over 1 ms late: the server or the "
                 "client cannot keep up (try --max-threads above {})\n",
                 LevelLabel(level), r.delayed, r.requests + r.errors, o.max_threads);
    }
    if (r.requests == 0 && r.errors > 0) {
      Status e = runner.first_error();
      Error(fmt::format("every request failed at {} ({} errors){}", LevelLabel(level), r.errors,
                        e.ok() ? "" : ": " + e.message()));
      return kExitAllFailed;
    }
    if (r.requests == 0) {
      Error(
          fmt::format("no request completed at {} within the measurement windows; raise "
                      "--measurement-interval-ms",
                      LevelLabel(level)));
    }
  }
  return kExitOk;
}

}  // namespace

int RunPerf(const PerfOptions& o) {
  signal(SIGPIPE, SIG_IGN);  // a server closing a connection must not kill us
  if (Status s = ValidateOptions(o); !s.ok()) {
    Error(s.message());
    return kExitSetup;
  }
  std::string address;
  auto client = Connect(o, &address);
  if (!client.ok()) {
    Error(client.status().message());
    return kExitSetup;
  }
  Client* c = client->get();
  auto model = c->GetModelInfo();
  if (!model.ok()) {
    Error(DescribeModelError(o, address, model.status()));
    return kExitSetup;
  }
  auto inputs = ResolveInputs(*model, o.batch_size);
  if (!inputs.ok()) {
    Error(inputs.status().message());
    return kExitSetup;
  }
  auto make_session = Sessions(o, *inputs, c);
  if (!make_session.ok()) {
    Error(make_session.status().message());
    return kExitSetup;
  }
  bool have_stats = true;
  if (auto probe = c->GetStats(); !probe.ok()) {
    have_stats = false;
    fmt::print(stderr, "server statistics unavailable ({})\n", probe.status().message());
  }
  StatsSource stats = [c, have_stats]() -> std::optional<ServerStats> {
    if (!have_stats) return std::nullopt;
    auto s = c->GetStats();
    if (!s.ok()) return std::nullopt;
    return *s;
  };
  PrintHeader(o, *inputs, *c, have_stats);
  LoadRunner runner(LoadOptionsFrom(o), *make_session, stats);
  std::vector<LevelResult> rows;
  int exit_code = MeasureLevels(o, runner, have_stats, &rows);
  WriteOutputs(o, rows, &exit_code);
  return exit_code;
}

}  // namespace dais::perf
