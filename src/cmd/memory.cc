#include "cmd/memory.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cmd/http_json_client.h"
#include "cmd/serve_memory.h"
#include "common/json.h"
#include "dais/status.h"

namespace dais::cmd {
namespace {

const std::string kBase = "/v2/memory/collections";

// Prints the server's error and returns 1, or 0 for a 2xx answer.
int Check(const StatusOr<HttpAnswer>& a, const std::string& what) {
  if (!a.ok()) {
    std::fprintf(stderr, "dais memory %s: %s\n", what.c_str(), a.status().message().c_str());
    return 1;
  }
  if (a->status / 100 != 2) {
    std::fprintf(stderr, "dais memory %s: HTTP %d %s\n", what.c_str(), a->status, a->body.c_str());
    return 1;
  }
  return 0;
}

int Create(const MemoryCliOptions& o) {
  auto spec = LoadCollectionSpecFile(o.spec_file);
  if (!spec.ok()) {
    std::fprintf(stderr, "dais memory create: %s\n", spec.status().message().c_str());
    return 1;
  }
  HttpJsonClient http(o.url, o.token);
  auto a = http.Call("POST", kBase, memory::CollectionSpecJson(**spec));
  if (int rc = Check(a, "create")) return rc;
  std::printf("collection %s: dimension %d, %s, %d shard(s) x %d replica(s)\n",
              (*spec)->name.c_str(), (*spec)->dimension, memory::MetricName((*spec)->metric),
              (*spec)->shards, (*spec)->replicas);
  return 0;
}

// Each line of the file is a point {"id", "vector", "payload"}; sent in batches of --batch.
int Load(const MemoryCliOptions& o) {
  std::ifstream in(o.points_file);
  if (!in) {
    std::fprintf(stderr, "dais memory load: cannot read %s\n", o.points_file.c_str());
    return 1;
  }
  HttpJsonClient http(o.url, o.token);
  const auto start = std::chrono::steady_clock::now();
  std::string line, batch;
  size_t in_batch = 0, sent = 0, line_no = 0;
  auto flush = [&]() -> int {
    if (in_batch == 0) return 0;
    auto a =
        http.Call("POST", kBase + "/" + o.collection + "/upsert", "{\"points\":[" + batch + "]}");
    if (int rc = Check(a, "load (lines " + std::to_string(line_no - in_batch + 1) + "-" +
                              std::to_string(line_no) + ")")) {
      return rc;
    }
    sent += in_batch;
    batch.clear();
    in_batch = 0;
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "\rloaded %zu points (%.0f/s)", sent, sent / std::max(secs, 1e-9));
    return 0;
  };
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (in_batch) batch += ',';
    batch += line;
    if (++in_batch == static_cast<size_t>(o.batch)) {
      if (int rc = flush()) return rc;
    }
  }
  if (int rc = flush()) return rc;
  std::fprintf(stderr, "\n");
  std::printf("%zu points loaded into %s\n", sent, o.collection.c_str());
  return 0;
}

int Search(const MemoryCliOptions& o) {
  std::string body = "{\"vector\":[" + o.vector + "],\"k\":" + std::to_string(o.k);
  if (!o.filter.empty()) body += ",\"filter\":" + o.filter;
  if (o.has_min_score) body += ",\"min_score\":" + std::to_string(o.min_score);
  HttpJsonClient http(o.url, o.token);
  auto a = http.Call("POST", kBase + "/" + o.collection + "/search", body + "}");
  if (int rc = Check(a, "search")) return rc;
  if (o.json) {
    std::printf("%s\n", a->body.c_str());
    return 0;
  }
  rapidjson::Document doc;
  if (!json::ParseJson(a->body, &doc).ok() || !doc.HasMember("results")) {
    std::fprintf(stderr, "dais memory search: unexpected answer %s\n", a->body.c_str());
    return 1;
  }
  std::printf("%-4s %-24s %-10s %s\n", "RANK", "ID", "SCORE", "PAYLOAD");
  int rank = 0;
  for (const auto& hit : doc["results"].GetArray()) {
    std::string payload = "{}";
    if (hit.HasMember("payload")) {
      rapidjson::StringBuffer sb;
      rapidjson::Writer<rapidjson::StringBuffer> w(sb);
      hit["payload"].Accept(w);
      payload = sb.GetString();
    }
    std::printf("%-4d %-24s %-10.4f %s\n", ++rank, hit["id"].GetString(), hit["score"].GetDouble(),
                payload.c_str());
  }
  return 0;
}

int Stats(const MemoryCliOptions& o) {
  HttpJsonClient http(o.url, o.token);
  auto a = http.Call("GET", kBase, "");
  if (int rc = Check(a, "stats")) return rc;
  rapidjson::Document doc;
  if (!json::ParseJson(a->body, &doc).ok() || !doc.HasMember("collections")) {
    std::fprintf(stderr, "dais memory stats: unexpected answer %s\n", a->body.c_str());
    return 1;
  }
  if (o.json) {
    std::printf("%s\n", a->body.c_str());
    return 0;
  }
  const auto& list = doc["collections"];
  if (!list.IsArray()) {
    std::fprintf(stderr, "dais memory stats: unexpected answer %s\n", a->body.c_str());
    return 1;
  }
  // A gateway answers each collection's spec and READY replicas per shard; a server its spec
  // and what it holds.
  const bool gateway = !list.Empty() && list[0].HasMember("collection");
  if (gateway) {
    std::printf("%-24s %-10s %-6s %-14s %-7s %s\n", "COLLECTION", "TENANT", "DIM", "METRIC",
                "SHARDS", "READY REPLICAS (shard:nodes)");
  } else {
    std::printf("%-24s %-10s %-6s %-14s %-7s %-12s %-12s %s\n", "COLLECTION", "TENANT", "DIM",
                "METRIC", "SHARDS", "POINTS", "MEMORY", "BYTES/POINT");
  }
  for (const auto& entry : list.GetArray()) {
    const rapidjson::Value& c = gateway ? entry["collection"] : entry;
    auto str = [&c](const char* k) -> std::string {
      return c.HasMember(k) && c[k].IsString() && c[k].GetStringLength() > 0 ? c[k].GetString()
                                                                             : "-";
    };
    auto num = [&c](const char* k) {
      return c.HasMember(k) && c[k].IsNumber() ? c[k].GetDouble() : 0.0;
    };
    const std::string name = str("name");
    if (!o.collection.empty() && name != o.collection) continue;
    std::printf("%-24s %-10s %-6.0f %-14s %-7.0f ", name.c_str(), str("tenant").c_str(),
                num("dimension"), str("metric").c_str(), num("shards"));
    if (gateway) {
      std::string ready;
      for (const auto& sh : entry["shards"].GetArray()) {
        ready += (ready.empty() ? "" : " ") + std::to_string(sh["shard"].GetInt()) + ":";
        std::string nodes;
        for (const auto& n : sh["ready"].GetArray())
          nodes += (nodes.empty() ? "" : ",") + std::string(n.GetString());
        ready += nodes.empty() ? "none" : nodes;
      }
      std::printf("%s\n", ready.c_str());
      continue;
    }
    const double points = num("points"), bytes = num("memory_bytes");
    std::printf("%-12.0f %-12s %.0f\n", points,
                (std::to_string(static_cast<int64_t>(bytes / (1 << 20))) + " MiB").c_str(),
                points > 0 ? bytes / points : 0.0);
  }
  return 0;
}

int Drop(const MemoryCliOptions& o) {
  HttpJsonClient http(o.url, o.token);
  auto a = http.Call("DELETE", kBase + "/" + o.collection, "");
  if (int rc = Check(a, "drop")) return rc;
  std::printf("collection %s dropped\n", o.collection.c_str());
  return 0;
}

}  // namespace

CLI::App* AddMemoryCommand(CLI::App* app, MemoryCliOptions* o) {
  CLI::App* m = app->add_subcommand(
      "memory", "Vector memory of a server or gateway: create, load, search, stats, drop");
  m->require_subcommand(1);
  auto common = [o](CLI::App* c) {
    c->add_option("--url", o->url, "The server (dais serve / node) or gateway.")
        ->capture_default_str();
    c->add_option("--token", o->token, "A bearer token (through a gateway with JWT).");
  };
  CLI::App* create = m->add_subcommand("create", "Create a collection from a spec file");
  create->add_option("-f,--file", o->spec_file, "JSON or YAML spec (docs/memory.md)")->required();
  CLI::App* load = m->add_subcommand("load", "Upsert the points of a JSON-lines file");
  load->add_option("collection", o->collection, "Collection")->required();
  load->add_option("file", o->points_file, "One point per line: {\"id\", \"vector\", \"payload\"}")
      ->required();
  load->add_option("--batch", o->batch, "Points per request")->check(CLI::Range(1, 10000));
  CLI::App* search = m->add_subcommand("search", "The nearest points to a vector");
  search->add_option("collection", o->collection, "Collection")->required();
  search->add_option("--vector", o->vector, "Comma-separated coordinates")->required();
  search->add_option("-k", o->k, "How many")->capture_default_str();
  search->add_option("--filter", o->filter,
                     "Payload filter, JSON: {\"cat\": \"a\", \"price\": "
                     "{\"lt\": 10}}");
  search->add_option("--min-score", o->min_score, "Only scores at least this (cosine, ip)")
      ->each([o](const std::string&) { o->has_min_score = true; });
  CLI::App* stats = m->add_subcommand("stats", "Collections with their points and memory");
  stats->add_option("collection", o->collection, "Only this one");
  CLI::App* drop = m->add_subcommand("drop", "Drop a collection and its points");
  drop->add_option("collection", o->collection, "Collection")->required();
  for (CLI::App* c : {create, load, search, stats, drop}) common(c);
  for (CLI::App* c : {search, stats}) c->add_flag("--json", o->json, "The server's JSON answer");
  return m;
}

int RunMemory(CLI::App* command, const MemoryCliOptions& o) {
  if (command->got_subcommand("create")) return Create(o);
  if (command->got_subcommand("load")) return Load(o);
  if (command->got_subcommand("search")) return Search(o);
  if (command->got_subcommand("stats")) return Stats(o);
  if (command->got_subcommand("drop")) return Drop(o);
  return 2;
}

}  // namespace dais::cmd
