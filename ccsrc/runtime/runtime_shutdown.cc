// Runtime: shutdown (runtime.h; docs/architecture.md, "Lifecycle"). Shutdown is collective and
// all-or-nothing: every PE drains, agrees on what it still holds, and only then releases the
// heap; a Failed Runtime's shutdown only releases this process's resources.
#include <memory>
#include <thread>

#include "base/log.h"
#include "runtime/runtime.h"
#include "runtime/runtime_internal.h"

namespace hyper_parallel::shmem {
namespace {

// FNV-1a over (offset, bytes) of the leaked allocations: equal on PEs that leaked alike.
std::uint64_t LeakDigest(const std::vector<AllocationRecord>& leaks) {
  std::uint64_t digest = 1469598103934665603ull;
  for (const AllocationRecord& record : leaks) {
    for (std::uint64_t word : {record.offset, record.bytes}) {
      for (int byte = 0; byte < 8; ++byte) {
        digest = (digest ^ ((word >> (8 * byte)) & 0xff)) * 1099511628211ull;
      }
    }
  }
  return digest;
}

// The shutdown facts a close descriptor carries in its extra words.
enum CloseFact : int { kLiveCount = 0, kLeakedCount = 1, kLeakDigest = 2 };

}  // namespace

bool Runtime::WaitForCallsToEnd() {
  const auto deadline = std::chrono::steady_clock::now() + config_.timeout();
  // Inline collectives are counted as collectives in flight, not as calls.
  while (calls_in_flight_.load(std::memory_order_acquire) > 0 ||
         collectives_in_flight_.load() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    mutex_.Unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    mutex_.Lock();
  }
  return true;
}

Status Runtime::TerminalShutdown() {
  constexpr std::string_view kOp = "shutdown";
  if (backend_) {
    // Calls in flight give up at once (the backend's failure latch aborts every wait); queued
    // work fails without running. Only then may the heap go.
    const bool ended = WaitForCallsToEnd();
    Backend* backend = backend_.get();
    mutex_.Unlock();
    const Status drained = backend->Quiesce();
    mutex_.Lock();
    if (ended && drained.ok() && backend_) {
      backend_->DestroyHeap();
      backend_.reset();
      bootstrap_.reset();
      heap_base_ = nullptr;
      heap_lifecycle_.store(0, std::memory_order_release);
      registry_.EndLifecycle();
      allocator_.Reset(0);
      HPS_LOG_INFO("terminal runtime released this process's resources");
    }
  }
  return RejectLocked(terminal_.Retagged(kOp, "state"), kOp, "state");
}

Status Runtime::Shutdown() {
  constexpr std::string_view kOp = "shutdown";
  MutexLock lock(&mutex_);
  if (Status ready = CheckReady(kOp); !ready.ok()) {
    if (state_ == RuntimeState::kFailed) return TerminalShutdown();
    return RejectLocked(std::move(ready), kOp, "state");
  }
  std::uint64_t sequence = 0;
  HPS_REJECT_IF_ERROR(WaitForOtherCollectives(World(), kOp), kOp, "state");
  HPS_REJECT_IF_ERROR(ClaimCollective(World(), OwnerOf({}, true), kOp, &sequence), kOp, "state");
  // Close the gate: from here on every other entry is refused, so nothing new is queued while
  // the streams drain. Calls still executing on other threads make this PE refuse.
  state_ = RuntimeState::kClosing;
  int other_calls = calls_in_flight_.load(std::memory_order_acquire);
  Backend* backend = backend_.get();
  const data_plane::CollectiveGroup world_group = World().group;
  auto call = std::make_unique<CallScope>(this);  // a terminal shutdown elsewhere waits for it
  lock.Unlock();
  const Status drained = backend->Quiesce();
  lock.Lock();
  // A team collective another thread runs on its default stream right now is a call in flight
  // too (queued ones drained above).
  for (std::size_t slot = 1; slot < teams_.size(); ++slot) {
    const TeamState* team = teams_[slot].get();
    if (team != nullptr && team->in_flight.load() > 0 && team->owner.stream == nullptr) {
      ++other_calls;
    }
  }

  AdoptOrphans();  // work that just drained may have dropped the last reference to a leak
  const std::vector<AllocationRecord> leaks = registry_.Leaked();
  // Close compares kind and number only: its facts are what every PE reads below.
  CollectiveDescriptor mine = CollectiveDescriptor::Of("close", 0);
  mine.sequence = sequence;
  mine.local = other_calls > 0 ? ErrorCode::kInvalidState
                               : drained.ok() ? ErrorCode::kOk : drained.code();
  mine.extra[kLiveCount] = registry_.live_count();
  mine.extra[kLeakedCount] = leaks.size();
  mine.extra[kLeakDigest] = LeakDigest(leaks);
  lock.Unlock();
  Agreement agreement;
  Status agreed = backend->Agree(world_group, mine, kOp, &agreement);
  if (agreed.ok()) agreed = agreement.verdict;
  lock.Lock();
  ReleaseCollectiveLocked(World());
  call.reset();

  auto refuse = [&](Status reason, std::string_view phase) {
    mutex_.AssertHeld();  // called below, where `lock` holds it
    // Every PE refuses alike: nothing changed anywhere.
    if (state_ == RuntimeState::kClosing) state_ = RuntimeState::kReady;
    return RejectLocked(std::move(reason), kOp, phase);
  };
  if (!agreed.ok()) {
    if (Status health = backend_->Health(); !health.ok()) EnterTerminal(health);
  }
  if (state_ == RuntimeState::kFailed) {
    if (!agreed.ok()) RejectLocked(agreed, kOp, "agree");
    return TerminalShutdown();
  }
  if (!agreed.ok()) return refuse(std::move(agreed), "agree");
  // What every PE said, reduced (backends/collective_descriptor.h, DescriptorFacts): the PEs that were
  // busy or hold allocations (the first few), and whether every PE leaked the same ones (each
  // PE's live count equals its leaked count, and both and the digest are the same everywhere).
  const DescriptorFacts& facts = agreement.facts;
  const bool same_leaks =
      facts.Uniform(kLiveCount) && facts.Uniform(kLeakedCount) && facts.Uniform(kLeakDigest) &&
      facts.extra_low[kLiveCount] == facts.extra_low[kLeakedCount] &&
      facts.extra_low[kLeakedCount] == mine.extra[kLeakedCount] &&
      facts.extra_low[kLeakDigest] == mine.extra[kLeakDigest];
  const auto listed = [](const std::vector<int>& pes, bool more) {
    std::string text = JoinInts(pes);
    if (more) text.insert(text.size() - 1, ",...");
    return text;
  };
  if (!facts.not_ok.empty()) {
    return refuse(Status::Assertion(ErrorCode::kInvalidState,
                                    "shutdown refused: PEs still had calls in flight on other "
                                    "threads, or queued work that did not drain",
                                    {{"pes", listed(facts.not_ok, facts.not_ok_more)},
                                     {"calls_in_flight_here", std::to_string(other_calls)},
                                     {"drain", drained.ok() ? "ok" : drained.message()}}),
                  "validate");
  }
  if (!facts.holding.empty() && !same_leaks) {
    std::string ids;
    for (const AllocationRecord& record : registry_.Live()) {
      ids += (ids.empty() ? "" : ",") + std::to_string(record.id);
    }
    return refuse(Status::Assertion(ErrorCode::kInvalidState,
                                    "shutdown refused: live allocations remain",
                                    {{"pes_with_live_allocations", listed(facts.holding, facts.holding_more)},
                                     {"live_count", std::to_string(mine.extra[kLiveCount])},
                                     {"leaked_count", std::to_string(leaks.size())},
                                     {"live_ids", "[" + ids + "]"}}),
                  "validate");
  }
  // Every PE is quiescent, past the barrier, and agreed: only now is anything reclaimed.
  if (!leaks.empty()) {
    // Released ones (torch's symm_mem tensors that died) are no error; lost ones are.
    std::string ids;
    std::size_t lost = 0;
    for (const AllocationRecord& record : leaks) {
      if (!record.released) {
        ids += (ids.empty() ? "" : ",") + std::to_string(record.id);
        ++lost;
      }
      allocator_.Release(record.offset);
      registry_.Release(record.id);
    }
    if (lost > 0) {
      HPS_LOG_ERROR("reclaimed leaked allocations collectively at shutdown (every PE leaked the "
                    "same ones): count=" + std::to_string(lost) + ", ids=[" + ids + "]");
    }
  }
  backend_->Departing();
  // Where peers map this PE's heap, it may be freed only once every PE has closed its mappings
  // of the others': each closes, all meet at a barrier, then each frees its own
  // (backends/backend.h, PeersMapTheHeap). The gate is closed: the waits run without the mutex.
  Status unmapped;
  if (backend_->PeersMapTheHeap()) {
    Bootstrap* bootstrap = bootstrap_.get();
    const auto timeout = config_.timeout();
    lock.Unlock();
    unmapped = backend->ClosePeers();
    if (unmapped.ok()) unmapped = bootstrap->Barrier(timeout);
    lock.Lock();
    if (unmapped.ok()) backend_->PeersClosed();
  }
  Status destroyed = backend_->DestroyHeap();
  if (destroyed.ok() && !unmapped.ok()) destroyed = std::move(unmapped);
  if (!destroyed.ok()) {
    backend_.reset();
    EnterTerminal(destroyed);
    HPS_LOG_ERROR("native shutdown failed; the runtime is terminal: " + destroyed.message());
    return RejectLocked(destroyed, kOp, "native_shutdown");
  }
  heap_lifecycle_.store(0, std::memory_order_release);
  registry_.EndLifecycle();
  allocator_.Reset(0);
  const std::uint64_t lifecycle = registry_.lifecycle();
  RollBackInit();
  HPS_LOG_INFO("runtime shut down: lifecycle=" + std::to_string(lifecycle));
  return Status::Ok();
}

}  // namespace hyper_parallel::shmem
