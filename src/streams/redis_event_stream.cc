#include <chrono>
#include <future>
#include <memory>

#include "redis/client.h"
#include "streams/event_stream.h"

namespace dais::streams {

std::string Entry::Field(const std::string& name) const {
  for (const auto& [k, v] : fields) {
    if (k == name) return v;
  }
  return {};
}

namespace {

constexpr std::chrono::milliseconds kTimeout{5000};

Status ReplyStatus(const StatusOr<redis::Reply>& r, const std::string& what) {
  if (!r.ok()) return Unavailable(what + ": " + r.status().message());
  if (r->is_error()) return Unavailable(what + ": " + r->str);
  return OkStatus();
}

// [[id, [k, v, ...]], ...] -> entries (entries deleted meanwhile come as [id, nil]: skipped).
std::vector<Entry> Entries(const redis::Reply& list) {
  std::vector<Entry> out;
  for (const redis::Reply& e : list.elements) {
    if (e.elements.size() < 2 || e.elements[1].is_nil()) continue;
    Entry entry{e.elements[0].str, {}};
    const auto& kv = e.elements[1].elements;
    for (size_t i = 0; i + 1 < kv.size(); i += 2)
      entry.fields.emplace_back(kv[i].str, kv[i + 1].str);
    out.push_back(std::move(entry));
  }
  return out;
}

class RedisEventStream : public EventStream {
 public:
  RedisEventStream(redis::Client* client, int64_t max_len) : client_(client), max_len_(max_len) {}

  Status Publish(const std::vector<Event>& events) override {
    if (events.empty()) return OkStatus();
    std::vector<redis::KeyedCommand> cmds;
    cmds.reserve(events.size());
    for (const Event& e : events) {
      redis::Command c{"XADD", e.stream};
      if (max_len_ > 0) {
        c.insert(c.end(), {"MAXLEN", "~", std::to_string(max_len_)});
      }
      c.insert(c.end(), {"*", "event_id", e.id});
      for (const auto& [k, v] : e.fields) c.insert(c.end(), {k, v});
      cmds.push_back({e.stream, std::move(c)});
    }
    for (const auto& r : client_->RunBatch(std::move(cmds), kTimeout)) {
      RETURN_IF_ERROR(ReplyStatus(r, "XADD"));
    }
    return OkStatus();
  }

  Status EnsureGroup(const std::string& stream, const std::string& group) override {
    auto r = client_->Run({stream, {"XGROUP", "CREATE", stream, group, "0", "MKSTREAM"}}, kTimeout);
    if (r.ok() && r->is_error() && r->str.rfind("BUSYGROUP", 0) == 0) return OkStatus();
    return ReplyStatus(r, "XGROUP CREATE " + stream + " " + group);
  }

  StatusOr<std::vector<Entry>> Read(const std::string& stream, const std::string& group,
                                    const std::string& consumer, int count, int block_ms,
                                    bool pending) override {
    redis::Command c{"XREADGROUP", "GROUP", group, consumer, "COUNT", std::to_string(count)};
    if (!pending) c.insert(c.end(), {"BLOCK", std::to_string(block_ms)});
    c.insert(c.end(), {"STREAMS", stream, pending ? "0" : ">"});
    auto r = client_->Run({stream, std::move(c)}, kTimeout + std::chrono::milliseconds(block_ms));
    RETURN_IF_ERROR(ReplyStatus(r, "XREADGROUP " + stream));
    if (r->is_nil() || r->elements.empty()) return std::vector<Entry>{};
    return Entries(r->elements[0].elements[1]);
  }

  std::future<StatusOr<std::vector<Entry>>> ReadAsync(const std::string& stream,
                                                      const std::string& group,
                                                      const std::string& consumer, int count,
                                                      int block_ms) override {
    auto done = std::make_shared<std::promise<StatusOr<std::vector<Entry>>>>();
    auto answer = done->get_future();
    redis::Command c{"XREADGROUP", "GROUP",
                     group,        consumer,
                     "COUNT",      std::to_string(count),
                     "BLOCK",      std::to_string(block_ms),
                     "STREAMS",    stream,
                     ">"};
    const std::string what = "XREADGROUP " + stream;
    // The entries are made on the client's I/O thread, meanwhile the caller works.
    client_->Execute(
        {stream, std::move(c)},
        std::chrono::steady_clock::now() + kTimeout + std::chrono::milliseconds(block_ms),
        [done, what](StatusOr<redis::Reply> r) {
          if (Status s = ReplyStatus(r, what); !s.ok()) {
            done->set_value(s);
          } else if (r->is_nil() || r->elements.empty()) {
            done->set_value(std::vector<Entry>{});
          } else {
            done->set_value(Entries(r->elements[0].elements[1]));
          }
        });
    return answer;
  }

  StatusOr<std::vector<Entry>> Claim(const std::string& stream, const std::string& group,
                                     const std::string& consumer, int min_idle_ms,
                                     int count) override {
    auto r = client_->Run({stream,
                           {"XAUTOCLAIM", stream, group, consumer, std::to_string(min_idle_ms),
                            "0-0", "COUNT", std::to_string(count)}},
                          kTimeout);
    RETURN_IF_ERROR(ReplyStatus(r, "XAUTOCLAIM " + stream));
    if (r->elements.size() < 2) return std::vector<Entry>{};
    return Entries(r->elements[1]);
  }

  Status Ack(const std::string& stream, const std::string& group,
             const std::vector<std::string>& ids) override {
    if (ids.empty()) return OkStatus();
    redis::Command c{"XACK", stream, group};
    c.insert(c.end(), ids.begin(), ids.end());
    return ReplyStatus(client_->Run({stream, std::move(c)}, kTimeout), "XACK " + stream);
  }

 private:
  redis::Client* client_;
  int64_t max_len_;
};

}  // namespace

std::unique_ptr<EventStream> MakeRedisEventStream(redis::Client* client, int64_t max_len) {
  return std::make_unique<RedisEventStream>(client, max_len);
}

}  // namespace dais::streams
