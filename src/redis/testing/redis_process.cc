#include "redis/testing/redis_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "common/logging.h"
#include "redis/options.h"
#include "redis/slot.h"

namespace dais::redis::testing {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// Closes the fd when it goes out of scope.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

StatusOr<std::string> FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return NotFound(name + " not found on PATH");
}

// fork + exec with stdout/stderr to `log`, every other fd closed, and SIGKILL when the parent
// thread dies. Only async-signal-safe calls run in the child.
StatusOr<pid_t> SpawnProcess(const std::vector<std::string>& args, const std::string& log) {
  ASSIGN_OR_RETURN(std::string binary, FindOnPath(args[0]));
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return Internal(Errno(("open " + log).c_str()));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    return Internal(Errno("fork"));
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
      for (int fd = 3; fd < 65536; ++fd) ::close(fd);
    }
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(log_fd);
  return pid;
}

Status WaitExit(pid_t pid, milliseconds timeout, int* exit_status) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const pid_t r = ::waitpid(pid, exit_status, WNOHANG);
    if (r == pid) return OkStatus();
    if (r < 0) return Internal(Errno("waitpid"));
    if (Clock::now() > deadline) return DeadlineExceeded("process did not exit");
    std::this_thread::sleep_for(milliseconds(10));
  }
}

std::string ReadTail(const std::string& path, size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return all.size() > bytes ? all.substr(all.size() - bytes) : all;
}

// Non-blocking connect bounded by the deadline, then blocking I/O with SO_RCVTIMEO/SO_SNDTIMEO.
StatusOr<int> ConnectTcp(const std::string& host, uint16_t port, milliseconds timeout) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return InvalidArgument("BlockingCall needs an IPv4 address, got " + host);
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Internal(Errno("socket"));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno != EINPROGRESS) {
      Status s = Unavailable(Errno("connect"));
      ::close(fd);
      return s;
    }
    pollfd p{fd, POLLOUT, 0};
    const int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (n != 1 || err != 0) {
      ::close(fd);
      return Unavailable(n != 1 ? "connect timed out" : std::string("connect: ") + strerror(err));
    }
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  timeval tv{static_cast<time_t>(timeout.count() / 1000),
             static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  return fd;
}

}  // namespace

StatusOr<int> PickFreePort() {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.fd < 0) return Internal(Errno("socket"));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(fd.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Internal(Errno("bind"));
  }
  socklen_t len = sizeof(addr);
  if (::getsockname(fd.fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Internal(Errno("getsockname"));
  }
  return static_cast<int>(ntohs(addr.sin_port));
}

ClientOptions FastClientOptions(const std::string& seeds) {
  StatusOr<ClientOptions> parsed = ParseSeeds(seeds);
  if (!parsed.ok()) DAIS_BUG("FastClientOptions: {}", parsed.status().message());
  ClientOptions o = parsed.ok() ? *parsed : ClientOptions{};
  o.connect_timeout = std::chrono::milliseconds(300);
  o.command_timeout = std::chrono::milliseconds(1000);
  o.health_check_interval = std::chrono::milliseconds(100);
  o.reconnect_backoff_min = std::chrono::milliseconds(20);
  o.reconnect_backoff_max = std::chrono::milliseconds(200);
  o.stuck_connection_timeout = std::chrono::milliseconds(500);
  return o;
}

StatusOr<Reply> BlockingCall(const std::string& address, const Command& command,
                             milliseconds timeout, const std::string& password) {
  std::string host;
  uint16_t port;
  RETURN_IF_ERROR(SplitHostPort(address, &host, &port));
  ASSIGN_OR_RETURN(int raw, ConnectTcp(host, port, timeout));
  Fd fd(raw);
  std::string out;
  size_t expected = 1;
  if (!password.empty()) {
    AppendCommand({"AUTH", password}, &out);
    expected = 2;
  }
  AppendCommand(command, &out);
  for (size_t sent = 0; sent < out.size();) {
    const ssize_t n = ::send(fd.fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return Unavailable(Errno(("send to " + address).c_str()));
    sent += static_cast<size_t>(n);
  }
  RespParser parser;
  std::vector<Reply> replies;
  char buf[16384];
  while (replies.size() < expected) {
    const ssize_t n = ::recv(fd.fd, buf, sizeof(buf), 0);
    if (n == 0) return Unavailable("connection closed by " + address);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        return DeadlineExceeded("no reply from " + address);
      return Unavailable(Errno(("recv from " + address).c_str()));
    }
    RETURN_IF_ERROR(parser.Feed(std::string_view(buf, static_cast<size_t>(n)), &replies));
  }
  if (expected == 2 && replies[0].is_error()) return replies[0];
  return replies.back();
}

// ---- RedisProcess ----

RedisProcess::RedisProcess(RedisProcessOptions options, std::string dir)
    : options_(std::move(options)), dir_(std::move(dir)) {}

RedisProcess::~RedisProcess() {
  (void)Stop();
  std::error_code ignored;
  fs::remove_all(dir_, ignored);
}

StatusOr<std::unique_ptr<RedisProcess>> RedisProcess::Start(RedisProcessOptions options) {
  std::string tmpl = (fs::temp_directory_path() / "dais-redis-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) return Internal(Errno("mkdtemp"));
  std::unique_ptr<RedisProcess> p(new RedisProcess(std::move(options), tmpl));
  Status last;
  for (int attempt = 0; attempt < 5; ++attempt) {
    ASSIGN_OR_RETURN(p->port_, PickFreePort());
    if (p->options_.cluster_enabled) {
      ASSIGN_OR_RETURN(p->bus_port_, PickFreePort());
      if (p->bus_port_ == p->port_) continue;
    }
    last = p->Spawn();
    if (last.ok()) return p;
    // A port taken between PickFreePort and the server's bind: try another one.
    if (last.message().find("in use") == std::string::npos) return last;
  }
  return last;
}

Status RedisProcess::Spawn() {
  std::vector<std::string> args = {"redis-server", "--port",     std::to_string(port_),
                                   "--bind",       "127.0.0.1",  "--dir",
                                   dir_,           "--save",     "",
                                   "--appendonly", "no",         "--daemonize",
                                   "no",           "--loglevel", "notice"};
  if (!options_.password.empty()) {
    args.insert(args.end(),
                {"--requirepass", options_.password, "--masterauth", options_.password});
  }
  if (options_.cluster_enabled) {
    args.insert(args.end(),
                {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                 "--cluster-port", std::to_string(bus_port_), "--cluster-node-timeout", "5000"});
  }
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  const std::string log = dir_ + "/redis.log";
  ASSIGN_OR_RETURN(pid_, SpawnProcess(args, log));

  const auto deadline = Clock::now() + options_.start_timeout;
  for (;;) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      const std::string tail = LogTail();
      if (tail.find("Address already in use") != std::string::npos) {
        return Unavailable("redis-server port " + std::to_string(port_) + " in use");
      }
      return Internal("redis-server exited at start; log: " + tail);
    }
    StatusOr<Reply> pong = Call({"PING"}, milliseconds(500));
    if (pong.ok() && !pong->is_error()) return OkStatus();
    if (Clock::now() > deadline) {
      (void)Stop();
      return Internal("redis-server did not answer PING within " +
                      std::to_string(options_.start_timeout.count()) + " ms; log: " + LogTail());
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
}

Status RedisProcess::Stop() {
  if (pid_ <= 0) return OkStatus();
  ::kill(pid_, SIGKILL);
  int status = 0;
  Status s = WaitExit(pid_, std::chrono::seconds(10), &status);
  pid_ = -1;
  return s;
}

Status RedisProcess::Pause() {
  if (pid_ <= 0 || ::kill(pid_, SIGSTOP) != 0)
    return FailedPrecondition("redis-server not running");
  return OkStatus();
}

Status RedisProcess::Resume() {
  if (pid_ <= 0 || ::kill(pid_, SIGCONT) != 0)
    return FailedPrecondition("redis-server not running");
  return OkStatus();
}

Status RedisProcess::Restart() {
  RETURN_IF_ERROR(Stop());
  // The port may be held briefly (or taken by someone else): retry for a while.
  Status last;
  for (int attempt = 0; attempt < 20; ++attempt) {
    last = Spawn();
    if (last.ok() || last.message().find("in use") == std::string::npos) return last;
    std::this_thread::sleep_for(milliseconds(100));
  }
  return last;
}

StatusOr<Reply> RedisProcess::Call(const Command& command, milliseconds timeout) const {
  return BlockingCall(address(), command, timeout, options_.password);
}

std::string RedisProcess::LogTail(size_t bytes) const {
  return ReadTail(dir_ + "/redis.log", bytes);
}

// ---- RedisCluster ----

StatusOr<std::unique_ptr<RedisCluster>> RedisCluster::Start(int masters,
                                                            RedisProcessOptions options) {
  if (masters < 3) return InvalidArgument("redis-cli --cluster create needs 3 masters or more");
  auto cluster = std::unique_ptr<RedisCluster>(new RedisCluster());
  options.cluster_enabled = true;
  for (int i = 0; i < masters; ++i) {
    ASSIGN_OR_RETURN(auto node, RedisProcess::Start(options));
    cluster->nodes_.push_back(std::move(node));
  }
  std::vector<std::string> args = {"redis-cli", "--cluster", "create"};
  for (const std::string& a : cluster->addresses()) args.push_back(a);
  args.insert(args.end(), {"--cluster-replicas", "0", "--cluster-yes"});
  if (!options.password.empty()) args.insert(args.end(), {"-a", options.password});
  const std::string log = cluster->nodes_[0]->dir() + "/cluster-create.log";
  ASSIGN_OR_RETURN(pid_t pid, SpawnProcess(args, log));
  int status = 0;
  if (Status s = WaitExit(pid, std::chrono::seconds(30), &status); !s.ok()) {
    ::kill(pid, SIGKILL);
    (void)WaitExit(pid, std::chrono::seconds(5), &status);
    return Internal("redis-cli --cluster create timed out; log: " + ReadTail(log, 2000));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Internal("redis-cli --cluster create failed; log: " + ReadTail(log, 2000));
  }
  RETURN_IF_ERROR(cluster->WaitHealthy());
  return cluster;
}

std::vector<std::string> RedisCluster::addresses() const {
  std::vector<std::string> out;
  for (const auto& n : nodes_) out.push_back(n->address());
  return out;
}

std::string RedisCluster::seeds() const {
  std::string out;
  for (const auto& n : nodes_) out += (out.empty() ? "" : ",") + n->address();
  return out;
}

StatusOr<std::string> RedisCluster::NodeId(size_t i) const {
  ASSIGN_OR_RETURN(Reply r, nodes_.at(i)->Call({"CLUSTER", "MYID"}));
  if (r.type != Reply::Type::kBulk) return Internal("CLUSTER MYID: " + ReplyToString(r));
  return r.str;
}

StatusOr<size_t> RedisCluster::SlotOwner(uint16_t slot) const {
  ASSIGN_OR_RETURN(Reply r, nodes_[0]->Call({"CLUSTER", "SLOTS"}));
  for (const Reply& range : r.elements) {
    if (range.elements.size() < 3 || range.elements[0].integer > slot ||
        range.elements[1].integer < slot) {
      continue;
    }
    const int64_t port = range.elements[2].elements.at(1).integer;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i]->port() == port) return i;
    }
  }
  return NotFound("slot " + std::to_string(slot) + " not served");
}

Status RedisCluster::WaitHealthy(milliseconds timeout) const {
  const auto deadline = Clock::now() + timeout;
  const std::string known = "cluster_known_nodes:" + std::to_string(nodes_.size());
  for (;;) {
    bool ok = true;
    std::string last;
    for (const auto& n : nodes_) {
      StatusOr<Reply> info = n->Call({"CLUSTER", "INFO"});
      ok = ok && info.ok() && info->str.find("cluster_state:ok") != std::string::npos &&
           info->str.find(known) != std::string::npos;
      if (!ok) {
        last = info.ok() ? info->str : info.status().ToString();
        break;
      }
    }
    if (ok) return OkStatus();
    if (Clock::now() > deadline) return DeadlineExceeded("redis cluster not healthy: " + last);
    std::this_thread::sleep_for(milliseconds(20));
  }
}

}  // namespace dais::redis::testing
