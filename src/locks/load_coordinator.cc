#include "locks/load_coordinator.h"

#include "common/logging.h"
#include "dais/clock.h"
#include "fmt/format.h"

namespace dais::locks {
namespace {

class LeasePermit : public runtime::LoadPermit {
 public:
  explicit LeasePermit(std::unique_ptr<locks::Lease> lease) : lease_(std::move(lease)) {}
  int64_t token() const override { return lease_->token(); }
  Status Check() const override { return lease_->Check(); }

 private:
  std::unique_ptr<locks::Lease> lease_;  // released on destruction
};

}  // namespace

StatusOr<std::unique_ptr<runtime::LoadPermit>> LockLoadCoordinator::BeginLoad(
    const std::string& model, int64_t version) {
  locks::LockResource resource = policy_ == CoordinationPolicy::kGlobal
                                     ? locks::LockResource::Model("__global__")
                                     : locks::LockResource::Node(model, node_);
  locks::AcquireOptions ao;
  ao.on_lost = [model, version](const Status& s) {
    LOG_WARNING("load lock for model '{}' version {} lost: {}", model, version, s.message());
  };
  uint64_t start = NowNs();
  auto deadline = std::chrono::steady_clock::now() + wait_;
  StatusOr<std::unique_ptr<locks::Lease>> lease = DeadlineExceeded("not tried");
  while (true) {
    if (cancelled_) return Unavailable("server is shutting down");
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return DeadlineExceeded(fmt::format("{} still held by another holder after {} ms",
                                          resource.ToString(), wait_.count()));
    }
    lease = locks_->Acquire(resource, std::min(left, std::chrono::milliseconds(1000)), ao);
    if (lease.ok() || lease.status().code() != StatusCode::kDeadlineExceeded) break;
  }
  if (!lease.ok()) return lease.status();
  LOG_INFO("model '{}' version {}: {} granted after {:.3f}s (fencing token {})", model, version,
           resource.ToString(), static_cast<double>(NowNs() - start) / 1e9, (*lease)->token());
  return std::unique_ptr<runtime::LoadPermit>(new LeasePermit(std::move(lease).value()));
}

}  // namespace dais::locks
