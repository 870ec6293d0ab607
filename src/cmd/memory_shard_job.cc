#include "cmd/memory_shard_job.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "cluster/collection_placement.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "memory/collection_spec.h"

namespace dais::cmd {
namespace {

class MemoryShardJob : public cluster::AssignedJob {
 public:
  MemoryShardJob(memory::MemoryService* memory, memory::CollectionSpecPtr spec, int shard,
                 std::function<void()> changed)
      : memory_(memory), spec_(std::move(spec)), shard_(shard), changed_(std::move(changed)) {
    loader_ = std::thread([this] { Load(); });
  }
  ~MemoryShardJob() override {
    loader_.join();  // a load is not interrupted: the shard is then let go
    memory_->Unhost(spec_->name, shard_);
    LOG_INFO("vector memory: {} shard {} let go", spec_->name, shard_);
  }

  State Current() const override {
    MutexLock l(&mu_);
    return state_;
  }

 private:
  void Set(State s) {
    {
      MutexLock l(&mu_);
      state_ = std::move(s);
    }
    changed_();
  }

  void Load() {
    const auto start = std::chrono::steady_clock::now();
    Status s = memory_->Host(spec_, shard_, [this](const std::string& c, int shard, size_t n) {
      LOG_INFO("vector memory: loading {} shard {}: {} points", c, shard, n);
      Set({"LOADING", std::to_string(n) + " points loaded"});
    });
    if (!s.ok()) {
      LOG_WARNING("vector memory: {} shard {} cannot be held: {}", spec_->name, shard_,
                  s.message());
      return Set({"FAILED", s.message()});
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    size_t points = 0;
    for (const auto& c : memory_->Stats()) {
      if (c.spec->name == spec_->name) points = c.points;
    }
    LOG_INFO("vector memory: {} shard {} held ({} points on this node, loaded in {:.2f} s)",
             spec_->name, shard_, points, secs);
    Set({"READY",
         "shard " + std::to_string(shard_) + " loaded in " + fmt::format("{:.2f}", secs) + " s"});
  }

  memory::MemoryService* memory_;
  const memory::CollectionSpecPtr spec_;
  const int shard_;
  std::function<void()> changed_;
  mutable Mutex mu_;
  State state_ DAIS_GUARDED_BY(mu_){"LOADING", "starting"};
  std::thread loader_;
};

}  // namespace

StatusOr<std::unique_ptr<cluster::AssignedJob>> StartMemoryShard(
    memory::MemoryService* memory, const cluster::Assignment& assignment,
    std::function<void()> changed) {
  if (memory == nullptr) {
    return FailedPrecondition(
        "this node has no vector memory: start dais node with --memory and --redis to hold "
        "collection shards");
  }
  ASSIGN_OR_RETURN(cluster::ShardJobSpec job, cluster::ParseShardJob(assignment.memory));
  ASSIGN_OR_RETURN(memory::CollectionSpecPtr spec, memory::ParseCollectionSpec(job.spec_json));
  if (job.shard < 0 || job.shard >= spec->shards) {
    return InvalidArgument("shard " + std::to_string(job.shard) + " of " + spec->name +
                           ", which has " + std::to_string(spec->shards));
  }
  return std::unique_ptr<cluster::AssignedJob>(
      new MemoryShardJob(memory, std::move(spec), job.shard, std::move(changed)));
}

}  // namespace dais::cmd
