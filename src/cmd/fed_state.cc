#include "cmd/fed_state.h"

#include <fmt/format.h>
#include <openssl/rand.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "cmd/publish_version.h"
#include "common/json.h"
#include "learn/torch_fed.h"

namespace dais::cmd {
namespace {

namespace fs = std::filesystem;

Status WriteAtomically(const fs::path& path, const std::string& bytes) {
  const fs::path tmp = path.string() + ".tmp";
  if (!WriteSynced(tmp, bytes)) return Internal("cannot write " + tmp.string());
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Internal("cannot rename " + tmp.string() + ": " + ec.message());
  FsyncPath(path.parent_path());
  return OkStatus();
}

std::string GlobalFile(int64_t round) { return fmt::format("global-{}.f32", round); }

}  // namespace

StatusOr<std::string> ReadWholeFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return NotFound("cannot read " + p.string());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Status SaveFedState(const fs::path& dir, const fed::FederationSpec& spec, const FedState& s,
                    const std::vector<float>& global) {
  const std::string file = GlobalFile(s.completed_round);
  RETURN_IF_ERROR(WriteAtomically(
      dir / file,
      std::string(reinterpret_cast<const char*>(global.data()), global.size() * sizeof(float))));
  RETURN_IF_ERROR(WriteAtomically(
      dir / "state.json",
      fmt::format("{{\"federation\": \"{}\", \"run\": \"{}\", \"start_version\": {}, "
                  "\"model_sha256\": \"{}\", "
                  "\"parameters\": {}, \"global\": \"{}\", \"completed_round\": {}, "
                  "\"noised_rounds\": {}, \"published_version\": {}, \"published_round\": {}, "
                  "\"released_version\": {},\n \"history\": [{}]}}\n",
                  spec.name, s.run, s.start_version, s.model_sha256, global.size(), file,
                  s.completed_round, s.noised_rounds, s.published_version, s.published_round,
                  s.released_version, s.history)));
  std::error_code ec;  // the files of earlier rounds are no longer named by the state
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("global-", 0) == 0 && name != file) fs::remove(e.path(), ec);
  }
  return OkStatus();
}

StatusOr<bool> LoadFedState(const fs::path& dir, const fed::FederationSpec& spec, FedState* s,
                            std::vector<float>* global) {
  if (!fs::exists(dir / "state.json")) return false;
  ASSIGN_OR_RETURN(std::string text, ReadWholeFile(dir / "state.json"));
  rapidjson::Document d;
  RETURN_IF_ERROR(json::ParseJson(text, &d));
  auto str = [&d](const char* k) {
    return d.IsObject() && d.HasMember(k) && d[k].IsString() ? std::string(d[k].GetString()) : "";
  };
  auto num = [&d](const char* k) {
    return d.IsObject() && d.HasMember(k) && d[k].IsInt64() ? d[k].GetInt64() : int64_t{0};
  };
  if (str("federation") != spec.name) {
    return FailedPrecondition((dir / "state.json").string() + " belongs to federation '" +
                              str("federation") + "': use another --state-dir");
  }
  const std::string file = str("global");
  ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(dir / file));
  if (file.empty() || bytes.size() != static_cast<size_t>(num("parameters")) * sizeof(float)) {
    return FailedPrecondition((dir / file).string() + " is not the saved parameters");
  }
  global->resize(bytes.size() / sizeof(float));
  std::memcpy(global->data(), bytes.data(), bytes.size());
  s->run = str("run");
  s->start_version = num("start_version");
  s->model_sha256 = str("model_sha256");
  s->completed_round = num("completed_round");
  s->noised_rounds = static_cast<int>(num("noised_rounds"));
  s->published_version = num("published_version");
  s->published_round = num("published_round");
  s->released_version = num("released_version");
  if (d.HasMember("history") && d["history"].IsArray()) {
    for (const auto& h : d["history"].GetArray()) {
      if (!s->history.empty()) s->history += ",\n  ";
      rapidjson::StringBuffer buf;
      rapidjson::Writer<rapidjson::StringBuffer> w(buf);
      h.Accept(w);
      s->history += buf.GetString();
      s->last_round = buf.GetString();
    }
  }
  return true;
}

std::string NewFedRunId() {
  unsigned char b[8];
  RAND_bytes(b, sizeof(b));
  std::string out;
  for (unsigned char c : b) out += fmt::format("{:02x}", c);
  return out;
}

StatusOr<int64_t> PublishFedRound(const fed::FederationSpec& spec, const FedState& state,
                                  const std::string& model, const std::vector<float>& global,
                                  int64_t round) {
  std::string file;
  const int64_t newest = NewestVersion(spec.ModelDir(), &file);
  if (newest > 0) {
    auto text = ReadWholeFile(fs::path(spec.ModelDir()) / std::to_string(newest) / "metrics.json");
    rapidjson::Document d;
    if (text.ok() && json::ParseJson(*text, &d).ok() && d.IsObject() && d.HasMember("run") &&
        d["run"].IsString() && d["run"].GetString() == state.run && d.HasMember("round") &&
        d["round"].IsInt64() && d["round"].GetInt64() == round) {
      return newest;  // published before a crash
    }
  }
  const int64_t v = newest + 1;
  const fs::path tmp = fs::path(spec.ModelDir()) / fmt::format(".fed-{}", ::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  Status s = learn::SaveWithParameters(model, global, (tmp / "model.pt").string());
  if (s.ok() &&
      !WriteSynced(tmp / "metrics.json",
                   fmt::format("{{\"federation\": \"{}\", \"run\": \"{}\", \"round\": {}, "
                               "\"last\": {}}}\n",
                               spec.name, state.run, round,
                               state.last_round.empty() ? "{}" : state.last_round))) {
    s = Internal("cannot write " + (tmp / "metrics.json").string());
  }
  if (s.ok()) s = PublishFolder(tmp, "model.pt", fs::path(spec.ModelDir()) / std::to_string(v));
  fs::remove_all(tmp, ec);
  RETURN_IF_ERROR(s);
  return v;
}

}  // namespace dais::cmd
