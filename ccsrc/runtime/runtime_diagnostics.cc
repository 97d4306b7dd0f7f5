// Runtime: the questions asked of it (runtime.h; docs/architecture.md): the current stream,
// where the heap lives, the backend's description, and Snapshot(), which debug_state() reads.
#include "runtime/runtime.h"

namespace hyper_parallel::shmem {

Status Runtime::CurrentStream(StreamRef* out, std::string_view operation) {
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(operation), operation, "state");
  *out = backend_->CurrentStream();
  return Status::Ok();
}

Status Runtime::RequireHostAddressableHeap(std::string_view operation) {
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(operation), operation, "state");
  if (backend_->HostAddressableHeap()) return Status::Ok();
  return RejectLocked(
      Status::Assertion(ErrorCode::kUnsupportedCapability,
                        "the heap is device memory this process cannot address, and tensors "
                        "over this device's memory are not supported by this binding yet",
                        {{"backend", backend_name_}, {"device", device_.ToString()}}),
      operation, "validate");
}

Status Runtime::HeapPlacement(std::string_view operation, DeviceId* device,
                              bool* host_addressable) {
  MutexLock lock(&mutex_);
  HPS_RETURN_IF_ERROR(CheckReady(operation));  // a question, not a failed call: not recorded
  *device = device_;
  *host_addressable = backend_->HostAddressableHeap();
  return Status::Ok();
}

Status Runtime::DescribeBackend(std::string_view operation, BackendDescription* out) {
  MutexLock lock(&mutex_);
  HPS_RETURN_IF_ERROR(CheckReady(operation));
  BackendDescription description;
  description.name = backend_name_;
  description.own_core = backend_->Wait().pinned;
  description.host_addressable_heap = backend_->HostAddressableHeap();
  description.granule_bytes = HeapAllocator::kGranule;
  description.timeout = config_.timeout();
  *out = std::move(description);
  return Status::Ok();
}

Status Runtime::PeerHeapAddresses(std::string_view operation, std::vector<std::byte*>* out) {
  MutexLock lock(&mutex_);
  HPS_RETURN_IF_ERROR(CheckReady(operation));
  std::vector<std::byte*> bases(static_cast<std::size_t>(size_), nullptr);
  if (backend_->HostAddressableHeap()) {
    for (int pe = 0; pe < size_; ++pe) bases[static_cast<std::size_t>(pe)] = backend_->PeerHeapAddress(pe);
  }
  *out = std::move(bases);
  return Status::Ok();
}

void Runtime::NoteFailure(const Status& status) {
  if (status.ok()) return;
  MutexLock lock(&mutex_);
  latest_failure_ = status;
}

Diagnostics Runtime::Snapshot() {
  Diagnostics d;
  {
    MutexLock lock(&mutex_);
    AdoptOrphans();
    if (state_ == RuntimeState::kReady && backend_) {
      if (Status health = backend_->Health(); !health.ok()) EnterTerminal(health);
    }
    d.state = state_;
    d.lifecycle = registry_.lifecycle();
    d.rank = rank_;
    d.size = size_;
    d.global_ranks = global_ranks_;
    d.device = state_ == RuntimeState::kUninitialized || state_ == RuntimeState::kInitializing
                   ? ""
                   : device_.ToString();
    d.backend = backend_name_;
    d.config = config_;
    d.heap_base = heap_base_;
    d.heap = allocator_.Usage();
    d.peaks = registry_.peaks();
    d.live = registry_.Live();
    d.leaks = registry_.Leaked();
    d.latest_failure = latest_failure_;
    d.terminal_failure = terminal_;
    if (!teams_.empty()) {
      TeamState& world = World();
      d.collective_sequence = world.sequence;
      d.collectives_in_flight = world.in_flight.load();
      d.collective_stream =
          d.collectives_in_flight > 0 ? OwnerLabel(world.owner) : std::string();
    }
    for (const std::shared_ptr<TeamState>& team : teams_) {
      if (team == nullptr) continue;
      Diagnostics::TeamRow row;
      DescribeTeamLocked(*team, &row.info);
      row.in_flight = team->in_flight.load();
      row.stream = row.in_flight > 0 ? OwnerLabel(team->owner) : std::string();
      d.teams.push_back(std::move(row));
    }
    d.calls_in_flight = calls_in_flight_.load(std::memory_order_acquire);
    if (backend_) {
      d.wait = backend_->Wait();
      d.peers = backend_->Placement();
      d.network = backend_->Network();
      d.host_synchronizations = backend_->HostSynchronizations();
    }
    d.wait.mode = config_.wait;
  }
  d.blocking = blocking_ops_.Snapshot();
  return d;
}

}  // namespace hyper_parallel::shmem
