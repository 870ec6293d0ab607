#include "memory/snapshot_files.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <zlib.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "common/json.h"

namespace dais::memory {
namespace {

namespace fs = std::filesystem;

std::string UtcDay(int64_t now_ms) {
  const std::time_t t = static_cast<std::time_t>(now_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

std::string ShardFile(int shard) { return "shard-" + std::to_string(shard) + ".jsonl.gz"; }

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};

Status WriteAtomically(const fs::path& path, const std::function<Status(gzFile)>& write) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return Internal("cannot create " + path.parent_path().string() + ": " + ec.message());
  const fs::path tmp = path.string() + ".tmp";
  {
    std::unique_ptr<gzFile_s, GzCloser> gz(gzopen(tmp.c_str(), "wb1"));
    if (gz == nullptr) return Internal("cannot write " + tmp.string());
    RETURN_IF_ERROR(write(gz.get()));
    if (gzclose(gz.release()) != Z_OK) return Internal("cannot finish " + tmp.string());
  }
  fs::rename(tmp, path, ec);
  if (ec) return Internal("cannot rename " + tmp.string() + ": " + ec.message());
  return OkStatus();
}

}  // namespace

std::string SnapshotLine(const StoredPoint& p) {
  rapidjson::StringBuffer out;
  rapidjson::Writer<rapidjson::StringBuffer> w(out);
  w.StartObject();
  w.Key("id");
  w.String(p.point.id.c_str(), static_cast<rapidjson::SizeType>(p.point.id.size()));
  w.Key("seq");
  w.Uint64(p.seq);
  w.Key("expires_ms");
  w.Int64(p.expires_ms);
  w.Key("vector");
  w.StartArray();
  for (float x : p.point.vector) w.Double(x);
  w.EndArray();
  w.Key("payload");
  const std::string payload = PayloadJson(p.point.payload);
  w.RawValue(payload.c_str(), payload.size(), rapidjson::kObjectType);
  w.EndObject();
  return out.GetString();
}

StatusOr<StoredPoint> ParseSnapshotLine(std::string_view line, const CollectionSpec& spec) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::ParseJson<rapidjson::kParseFullPrecisionFlag>(line, &doc));
  if (!doc.IsObject()) return InvalidArgument("a JSON object is needed");
  StoredPoint p;
  const rapidjson::Value& root = doc;  // const iterators: clang's C++20 operator== rules
  auto seq = root.FindMember("seq");
  auto expires = root.FindMember("expires_ms");
  if (seq == root.MemberEnd() || !seq->value.IsUint64()) return InvalidArgument("seq: required");
  if (expires == root.MemberEnd() || !expires->value.IsInt64()) {
    return InvalidArgument("expires_ms: required");
  }
  p.seq = seq->value.GetUint64();
  p.expires_ms = expires->value.GetInt64();
  doc.RemoveMember("seq");
  doc.RemoveMember("expires_ms");
  rapidjson::StringBuffer rest;
  rapidjson::Writer<rapidjson::StringBuffer> w(rest);
  doc.Accept(w);
  ASSIGN_OR_RETURN(auto points,
                   ParseUpsert(std::string("{\"points\":[") + rest.GetString() + "]}", spec));
  p.point = std::move(points[0]);
  return p;
}

Status WriteSnapshotSpec(const std::string& root, const CollectionSpec& spec) {
  const fs::path dir = fs::path(root) / spec.name;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Internal("cannot create " + dir.string() + ": " + ec.message());
  const fs::path tmp = dir / "spec.json.tmp";
  {
    std::ofstream out(tmp);
    out << CollectionSpecJson(spec) << "\n";
    if (!out) return Internal("cannot write " + tmp.string());
  }
  fs::rename(tmp, dir / "spec.json", ec);
  if (ec) return Internal("cannot rename " + tmp.string() + ": " + ec.message());
  return OkStatus();
}

Status WriteShardSnapshot(const std::string& root, const CollectionSpec& spec, int shard,
                          const std::vector<StoredPoint>& points, int64_t now_ms) {
  const fs::path path = fs::path(root) / spec.name / ("dt=" + UtcDay(now_ms)) / ShardFile(shard);
  return WriteAtomically(path, [&](gzFile gz) {
    std::string buf;
    for (const auto& p : points) {
      buf += SnapshotLine(p);
      buf += '\n';
      if (buf.size() > (1 << 20) || &p == &points.back()) {
        if (gzwrite(gz, buf.data(), static_cast<unsigned>(buf.size())) !=
            static_cast<int>(buf.size())) {
          return Internal("cannot write the snapshot of " + spec.name);
        }
        buf.clear();
      }
    }
    return OkStatus();
  });
}

StatusOr<std::vector<CollectionSpecPtr>> SnapshotSpecs(const std::string& root) {
  std::vector<CollectionSpecPtr> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const fs::path spec_path = entry.path() / "spec.json";
    std::ifstream in(spec_path);
    if (!in) continue;
    std::stringstream text;
    text << in.rdbuf();
    auto spec = ParseCollectionSpec(text.str());
    if (!spec.ok()) {
      return Status(StatusCode::kDataLoss, spec_path.string() + ": " + spec.status().message());
    }
    out.push_back(*spec);
  }
  if (ec) return Internal("cannot list " + root + ": " + ec.message());
  return out;
}

StatusOr<std::string> ReadShardSnapshot(const std::string& root, const CollectionSpec& spec,
                                        int shard, const std::function<void(StoredPoint)>& each) {
  const fs::path dir = fs::path(root) / spec.name;
  std::vector<std::string> days;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("dt=", 0) == 0 && fs::exists(entry.path() / ShardFile(shard))) {
      days.push_back(name.substr(3));
    }
  }
  if (days.empty())
    return NotFound("no snapshot of " + spec.name + " shard " + std::to_string(shard));
  const std::string day = *std::max_element(days.begin(), days.end());
  const fs::path path = dir / ("dt=" + day) / ShardFile(shard);
  std::unique_ptr<gzFile_s, GzCloser> gz(gzopen(path.c_str(), "rb"));
  if (gz == nullptr) return Internal("cannot read " + path.string());
  std::string line;
  std::vector<char> buf(1 << 16);
  int64_t line_no = 0;
  auto flush = [&]() -> Status {
    ++line_no;
    if (line.empty()) return OkStatus();
    auto p = ParseSnapshotLine(line, spec);
    if (!p.ok()) {
      return Status(StatusCode::kDataLoss, path.string() + " line " + std::to_string(line_no) +
                                               ": " + p.status().message());
    }
    each(std::move(*p));
    line.clear();
    return OkStatus();
  };
  int n;
  while ((n = gzread(gz.get(), buf.data(), static_cast<unsigned>(buf.size()))) > 0) {
    for (int i = 0; i < n; ++i) {
      if (buf[i] == '\n') {
        RETURN_IF_ERROR(flush());
      } else {
        line += buf[i];
      }
    }
  }
  if (n < 0) return Status(StatusCode::kDataLoss, path.string() + ": not a whole gzip file");
  RETURN_IF_ERROR(flush());
  return day;
}

}  // namespace dais::memory
