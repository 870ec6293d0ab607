// A tiny lock holder process for locks_lock_test's multi-process tests.
//
//   locks_lock_helper counter SEEDS MODEL ITERATIONS LEASE_MS NODE_ID
//     ITERATIONS times: acquire the MODEL lock, check that nobody else is inside (a Redis INCR
//     that must return 1) and that the token is above the last one any holder recorded, do a
//     non-atomic read-modify-write of a Redis counter, release. Exit 0, or 1 with a message.
//   locks_lock_helper hold SEEDS MODEL LEASE_MS NODE_ID
//     Acquire the MODEL lock, print "token N", then answer stdin lines: "check" -> "lost 0|1",
//     "release" -> "released OK|<status>". Exits at EOF.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include "locks/lock_service.h"

using namespace dais;  // NOLINT: a test tool
using std::chrono::milliseconds;

namespace {

int Fail(const std::string& message) {
  std::cerr << "lock_helper[" << ::getpid() << "]: " << message << std::endl;
  return 1;
}

int64_t IntOf(const StatusOr<redis::Reply>& r) {
  if (!r.ok()) return -1;
  if (r->type == redis::Reply::Type::kInteger) return r->integer;
  if (r->type == redis::Reply::Type::kBulk) return std::stoll(r->str);
  return 0;  // nil
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Fail("usage: see the file comment");
  const std::string mode = argv[1];
  if ((mode == "counter" && argc != 7) || (mode == "hold" && argc != 6)) return Fail("bad args");
  auto options = redis::ParseSeeds(argv[2]);
  if (!options.ok()) return Fail(options.status().ToString());
  options->command_timeout = milliseconds(1000);
  options->health_check_interval = milliseconds(100);
  auto client = redis::Client::Create(*options);
  if (!client.ok()) return Fail(client.status().ToString());
  if (!(*client)->WaitUntilReachable(milliseconds(5000))) return Fail("redis not reachable");
  const std::string model = argv[3];
  locks::LockServiceOptions lo;
  lo.node_id = argv[argc - 1];
  lo.lease = milliseconds(std::stoi(argv[argc - 2]));
  auto service = locks::LockService::Create(client->get(), lo);
  if (!service.ok()) return Fail(service.status().ToString());
  redis::Client& c = **client;

  if (mode == "counter") {
    const int iterations = std::stoi(argv[4]);
    const std::string inside = "test:{" + model + "}:inside";
    const std::string counter = "test:{" + model + "}:counter";
    const std::string last = "test:{" + model + "}:last_token";
    for (int i = 0; i < iterations; ++i) {
      auto lease = (*service)->Acquire(locks::LockResource::Model(model), milliseconds(30000));
      if (!lease.ok()) return Fail(lease.status().ToString());
      const int64_t token = (*lease)->token();
      if (IntOf(c.Run({inside, {"INCR", inside}})) != 1) return Fail("two holders inside");
      const int64_t previous = IntOf(c.Run({last, {"GET", last}}));
      if (previous >= token) {
        return Fail("token " + std::to_string(token) + " not above " + std::to_string(previous));
      }
      if (IntOf(c.Run({last, {"SET", last, std::to_string(token)}})) < 0) return Fail("SET");
      const int64_t value = IntOf(c.Run({counter, {"GET", counter}}));
      if (value < 0) return Fail("GET counter");
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      if (IntOf(c.Run({counter, {"SET", counter, std::to_string(value + 1)}})) < 0) {
        return Fail("SET counter");
      }
      if (IntOf(c.Run({inside, {"DECR", inside}})) != 0) return Fail("inside flag broken");
      if ((*lease)->Lost()) return Fail("lease lost while counting");
      Status released = (*lease)->Release();
      if (!released.ok()) return Fail(released.ToString());
    }
    return 0;
  }

  if (mode == "hold") {
    auto lease = (*service)->Acquire(locks::LockResource::Model(model), milliseconds(10000));
    if (!lease.ok()) return Fail(lease.status().ToString());
    std::cout << "token " << (*lease)->token() << std::endl;
    std::string line;
    while (std::getline(std::cin, line)) {
      if (line == "check") {
        std::cout << "lost " << ((*lease)->Lost() ? 1 : 0) << std::endl;
      } else if (line == "release") {
        std::cout << "released " << (*lease)->Release().ToString() << std::endl;
      }
    }
    return 0;
  }
  return Fail("unknown mode " + mode);
}
