// Runtime: the one path every collective runs through (runtime.h; docs/architecture.md, "Every
// collective is checked before data moves" and "Collectives as units"): the claim on a team's
// collective sequence and its release, the descriptor exchange of the host collectives
// (Agree), RunCollective, and Launch of a consumer kernel over symmetric operands.
#include <algorithm>

#include "data_plane/team_kernel_api.h"
#include "runtime/runtime.h"
#include "runtime/runtime_internal.h"

namespace hyper_parallel::shmem {

Runtime::CollectiveOwner Runtime::OwnerOf(StreamRef stream, bool runs_inline) const {
  return runs_inline ? CollectiveOwner{nullptr, CurrentThreadId()}
                     : CollectiveOwner{stream.native, 0};
}

std::string Runtime::OwnerLabel(const CollectiveOwner& owner) const {
  if (owner.stream == nullptr) return DefaultStreamLabel(owner.thread);
  return backend_ ? backend_->StreamLabel(StreamRef{owner.stream}) : "a stream";
}

Status Runtime::ClaimCollective(TeamState& team, const CollectiveOwner& owner,
                                std::string_view operation, std::uint64_t* sequence) {
  const int in_flight = team.in_flight.load();
  if (in_flight > 0 && !(team.owner == owner)) {
    std::vector<Field> fields{{"operation", std::string(operation)}};
    if (team.group.sync_slot != 0) fields.push_back({"team", GroupLabel(team.group)});
    fields.push_back({"this_stream", OwnerLabel(owner)});
    fields.push_back({"in_flight_on", OwnerLabel(team.owner)});
    fields.push_back({"in_flight", std::to_string(in_flight)});
    fields.push_back({"latest_sequence", std::to_string(team.sequence)});
    return Status::Assertion(
        ErrorCode::kInvalidState,
        "a collective of this PE is already in flight on another stream; keep a PE's "
        "collectives of one team on one stream at a time (synchronize that stream first)",
        fields);
  }
  team.owner = owner;
  team.in_flight.fetch_add(1);
  collectives_in_flight_.fetch_add(1);
  *sequence = ++team.sequence;
  std::uint64_t& high = slot_high_[static_cast<std::size_t>(team.group.sync_slot)];
  high = std::max(high, team.sequence);
  return Status::Ok();
}

Status Runtime::WaitForOtherCollectives(TeamState& team, std::string_view operation) {
  const CollectiveOwner mine{nullptr, CurrentThreadId()};
  // Collectives queued on asynchronous streams finish by themselves: wait for them. One
  // running on another thread's default stream is a race between threads: the claim refuses.
  if (team.in_flight.load() > 0 && !(team.owner == mine) && team.owner.stream != nullptr) {
    BlockingOpTable::Scope scope = blocking_ops_.Enter(
        operation, DefaultStreamLabel(),
        [label = OwnerLabel(team.owner)] {
          return "collectives queued on " + label + " to finish";
        });
    collective_waiters_.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + config_.timeout();
    bool done = true;
    while (team.in_flight.load() != 0 && state_ == RuntimeState::kReady) {
      if (!collectives_done_.WaitUntil(&mutex_, deadline) && team.in_flight.load() != 0 &&
          state_ == RuntimeState::kReady) {
        done = false;
        break;
      }
    }
    collective_waiters_.fetch_sub(1);
    HPS_RETURN_IF_ERROR(CheckReady(operation));
    if (!done) {
      return Status::Assertion(ErrorCode::kTimeout,
                               "collectives queued on another stream did not finish in time",
                               {{"operation", std::string(operation)},
                                {"in_flight_on", OwnerLabel(team.owner)},
                                {"timeout_ms", std::to_string(config_.timeout().count())}});
    }
  }
  return Status::Ok();
}

void Runtime::ReleaseCollective(TeamState& team) {
  collectives_in_flight_.fetch_sub(1);
  if (team.in_flight.fetch_sub(1) != 1 || collective_waiters_.load() == 0) return;
  // Taking the mutex orders this wake after the waiter's predicate check (it holds the mutex
  // from the check until it sleeps), so the wake is never lost.
  MutexLock lock(&mutex_);
  collectives_done_.SignalAll();
}

void Runtime::ReleaseCollectiveLocked(TeamState& team) {
  collectives_in_flight_.fetch_sub(1);
  if (team.in_flight.fetch_sub(1) != 1 || collective_waiters_.load() == 0) return;
  collectives_done_.SignalAll();
}

KeepAlive Runtime::CollectiveTicket(KeepAlive inner, std::shared_ptr<TeamState> team) {
  struct Ticket {
    Runtime* runtime;
    std::shared_ptr<TeamState> team;
    KeepAlive inner;
    ~Ticket() { runtime->ReleaseCollective(*team); }
  };
  // Built in place: a moved-from temporary would release the claim early.
  return std::shared_ptr<const Ticket>(new Ticket{this, std::move(team), std::move(inner)});
}

Status Runtime::Agree(TeamState& team, std::string_view operation,
                      const CollectiveDescriptor& mine) {
  Backend& backend = *backend_;
  // Kept alive while the mutex is released (another thread may end the team meanwhile).
  const std::shared_ptr<TeamState> hold = teams_[static_cast<std::size_t>(team.group.sync_slot)];
  const data_plane::CollectiveGroup group = team.group;
  Agreement agreement;
  Status agreed;
  {
    CallScope call(this);
    mutex_.Unlock();
    agreed = backend.Agree(group, mine, operation, &agreement);
    if (agreed.ok()) agreed = std::move(agreement.verdict);
    mutex_.Lock();
  }
  ReleaseCollectiveLocked(team);
  if (!agreed.ok()) {
    if (Status health = backend_->Health(); !health.ok()) EnterTerminal(health);
  }
  return agreed;
}

Status Runtime::RunCollective(const data_plane::Collective& collective,
                              const CollectiveOperands& operands, StreamRef stream,
                              KeepAlive keep_alive) {
  return RunCollective(kWorldTeam, collective, operands, stream, std::move(keep_alive));
}

Status Runtime::RunCollective(const TeamHandle& team_handle,
                              const data_plane::Collective& collective,
                              const CollectiveOperands& operands, StreamRef stream,
                              KeepAlive keep_alive) {
  return RunOrRefuse(team_handle, &collective, collective.name(), &operands, Status::Ok(), stream,
                     std::move(keep_alive));
}

Status Runtime::RefuseCollective(std::string_view kind, Status why, StreamRef stream) {
  return RefuseCollective(kWorldTeam, kind, std::move(why), stream);
}

Status Runtime::RefuseCollective(const TeamHandle& team_handle, std::string_view kind, Status why,
                                 StreamRef stream) {
  if (why.ok()) {
    why = Status::Assertion(ErrorCode::kInvalidArgument, "refused without a reason",
                            {{"operation", std::string(kind)}});
  }
  return RunOrRefuse(team_handle, nullptr, kind, nullptr, std::move(why), stream, nullptr);
}

Status Runtime::RunOrRefuse(const TeamHandle& team_handle,
                            const data_plane::Collective* collective, std::string_view op,
                            const CollectiveOperands* operands, Status refused, StreamRef stream,
                            KeepAlive keep_alive) {
  MutexLock lock(&mutex_);
  // Not ready, or no team to take a place in: refused here only (there is no sequence).
  if (Status ready = CheckReady(op); !ready.ok()) {
    return RejectLocked(refused.ok() ? std::move(ready) : std::move(refused), op,
                        refused.ok() ? "state" : "validate");
  }
  std::shared_ptr<TeamState> team;
  if (Status resolved = ResolveTeam(team_handle, &team); !resolved.ok()) {
    return RejectLocked(refused.ok() ? std::move(resolved) : std::move(refused), op, "validate");
  }
  CollectiveDescriptor mine;
  data_plane::CollectivePlan plan;
  bool moves_nothing = false;
  if (refused.ok()) {
    plan.group = team->group;
    plan.algorithm = config_.AlgorithmOf(op);
    plan.arguments = operands->arguments;
    plan.sizes = operands->sizes;
    plan.results = operands->results;
    plan.element_bytes = operands->element_bytes;
    plan.workspace_bytes = config_.reduce_workspace;
    plan.workspace_offset = config_.heap_bytes + static_cast<std::uint64_t>(team->group.sync_slot) *
                                                     plan.workspace_bytes;
    mine = CollectiveDescriptor::Of(op, collective->AgreedFields());
    if ((collective->AgreedFields() & data_plane::kAgreeArguments) != 0) {
      for (std::size_t i = 0; i < mine.extra.size(); ++i) {
        mine.extra[i] = static_cast<std::uint64_t>(operands->arguments[i]);
      }
    }
    if (collective->TakesOperands()) {
      AllocationRecord record;
      refused = ResolveOperand(operands->output, &plan.output_offset, &record);
      data_plane::CollectiveCall call;
      call.group = team->group;
      call.output = operands->output.data;
      call.output_bytes = operands->output.bytes;
      call.input = operands->input;
      call.input_bytes = operands->input_bytes;
      call.element_bytes = operands->element_bytes;
      call.dtype = operands->dtype;
      call.arguments = operands->arguments;
      call.sizes = operands->sizes;
      call.workspace_bytes = plan.workspace_bytes;
      if (refused.ok()) refused = collective->Check(call);
      if (refused.ok()) {
        // A call that moves nothing (zero bytes) runs no kernel, but still takes its number:
        // a PE whose call moves nothing keeps its place among the others' calls.
        moves_nothing = collective->MovesNothing(call);
        plan.input = operands->input;
        plan.input_bytes = operands->input_bytes;
        plan.output_bytes = operands->output.bytes;
        mine.bytes = operands->input_bytes;
        mine.offset = plan.output_offset;
        mine.SetDtype(operands->dtype);
        plan.dtype = std::string(operands->dtype);
      }
    }
  }
  if (!refused.ok()) {
    // Refused here: the call still takes its number, and publishes the refusal in its place, so
    // every other PE's call of that number fails too and the next calls pair (docs/architecture.md,
    // "A refused call keeps its place"). This PE reports its own reason whatever the peers did.
    refused = RejectLocked(std::move(refused), op, "validate");
    mine = CollectiveDescriptor::Refusal(op, refused);
  }
  const bool runs_inline = backend_->CollectiveRunsInline(stream);
  if (Status claimed = ClaimCollective(*team, OwnerOf(stream, runs_inline), op, &mine.sequence);
      !claimed.ok()) {
    return refused.ok() ? RejectLocked(std::move(claimed), op, "state") : refused;
  }
  plan.sequence = mine.sequence;
  Kernel kernel;
  if (refused.ok() && collective->HasKernel() && !moves_nothing) {
    kernel = [collective, plan](data_plane::KernelApi& api) { return collective->Run(api, plan); };
  }
  if (!runs_inline) {  // only enqueued: cannot wait
    Status launched = backend_->LaunchCollective(stream, team->group, mine, op, std::move(kernel),
                                                 CollectiveTicket(std::move(keep_alive), team));
    if (refused.ok()) return ConcludeLocked(std::move(launched), op, "execute");
    // The peers' verdict is theirs to report; a lost peer or a timeout still makes this
    // Runtime Failed where it must.
    if (launched.code() != ErrorCode::kCollectiveMismatch) {
      (void)ConcludeLocked(std::move(launched), op, "execute");
    }
    return refused;
  }
  // The claim keeps the heap mapped meanwhile (a shutdown waits for collectives in flight).
  Backend* backend = backend_.get();
  lock.Unlock();
  Status done = backend->LaunchCollective(stream, team->group, mine, op, std::move(kernel),
                                          std::move(keep_alive));
  ReleaseCollective(*team);
  if (refused.ok()) return ConcludeOutside(std::move(done), op, "execute");
  if (done.code() != ErrorCode::kCollectiveMismatch) {  // as above
    (void)ConcludeOutside(std::move(done), op, "execute");
  }
  return refused;
}

Status Runtime::Launch(std::string_view name, const std::vector<SymmetricView>& operands,
                       StreamRef stream, LaunchKernel kernel, KeepAlive keep_alive) {
  return Launch(kWorldTeam, name, operands, stream, std::move(kernel), std::move(keep_alive));
}

Status Runtime::Launch(const TeamHandle& team_handle, std::string_view name,
                       const std::vector<SymmetricView>& operands, StreamRef stream,
                       LaunchKernel kernel, KeepAlive keep_alive) {
  constexpr std::string_view kOp = "launch";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  std::shared_ptr<TeamState> team;
  HPS_REJECT_IF_ERROR(ResolveTeam(team_handle, &team), kOp, "validate");
  std::vector<std::uint64_t> offsets(operands.size());
  for (std::size_t i = 0; i < operands.size(); ++i) {
    AllocationRecord record;
    HPS_REJECT_IF_ERROR(ResolveOperand(operands[i], &offsets[i], &record), kOp, "validate");
  }
  Kernel run;
  if (team->group.sync_slot == 0) {
    run = [kernel = std::move(kernel), offsets = std::move(offsets)](data_plane::KernelApi& api) {
      return kernel(api, offsets);
    };
  } else {  // the kernel sees team PEs (data_plane/team_kernel_api.h)
    run = [kernel = std::move(kernel), offsets = std::move(offsets),
           group = team->group](data_plane::KernelApi& api) {
      data_plane::TeamKernelApi team_api(api, group);
      return kernel(team_api, offsets);
    };
  }
  // A kernel may wait: outside the mutex unless it is only enqueued.
  return Execute(kOp, /*small=*/false, stream, [&](Backend& backend) {
    return backend.Launch(stream, name, std::move(run), std::move(keep_alive));
  });
}

}  // namespace hyper_parallel::shmem
