#include "backends/host/host_stream.h"

#include "backends/wait/doorbell.h"

#include <atomic>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <vector>

namespace hyper_parallel::shmem::host {
namespace {

std::atomic<std::uint64_t> g_next_stream_id{1};
thread_local HostStream* t_current_stream = nullptr;

// Every live stream, so that Quiesce can drain them all. Held only to add, remove or list
// streams: never while one drains.
struct StreamRegistry {
  Mutex mutex;
  std::map<HostStream*, std::weak_ptr<HostStream>> streams GUARDED_BY(mutex);
};

StreamRegistry& Registry() {
  static StreamRegistry* registry = new StreamRegistry();  // outlives static destructors
  return *registry;
}

Status StreamTimeout(std::string_view fact, std::uint64_t stream_id,
                     std::chrono::milliseconds timeout) {
  return Status::Assertion(ErrorCode::kTimeout, fact,
                           {{"stream_id", std::to_string(stream_id)},
                            {"timeout_ms", std::to_string(timeout.count())}});
}

}  // namespace

HostStream::HostStream() : id_(g_next_stream_id.fetch_add(1)) {
  thread_ = std::thread([this] { Run(); });
}

void HostStream::Register(const std::shared_ptr<HostStream>& stream) {
  MutexLock lock(&Registry().mutex);
  Registry().streams[stream.get()] = stream;
}

HostStream::~HostStream() {
  {
    MutexLock lock(&Registry().mutex);
    Registry().streams.erase(this);
  }
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
  }
  work_ready_.SignalAll();
  if (OnExecutor()) {
    // Queued work held the last reference: joining would wait for itself. Never done by this
    // library; a caller doing it has a bug we cannot recover from.
    std::fputs("[HYPER_PARALLEL_SHMEM] a host stream was destroyed on its own executor\n", stderr);
    std::terminate();
  }
  thread_.join();
}

void HostStream::Enqueue(StreamWork work) {
  {
    MutexLock lock(&mutex_);
    queue_.push_back(Item{std::move(work), nullptr});
  }
  work_ready_.Signal();
}

void HostStream::EnqueueMarker(StreamMarker marker) {
  {
    MutexLock lock(&mutex_);
    queue_.push_back(Item{nullptr, std::move(marker)});
  }
  work_ready_.Signal();
}

void HostStream::Run() {
  MutexLock lock(&mutex_);
  for (;;) {
    while (!stopping_ && queue_.empty()) work_ready_.Wait(&mutex_);
    if (queue_.empty()) return;  // stopping, and everything queued has run
    Item item = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    const Status pending = failure_;
    lock.Unlock();
    Status outcome;
    {
      struct Running {  // counted while the item runs, however it ends
        Running() { RunningExecutors().fetch_add(1, std::memory_order_relaxed); }
        ~Running() { RunningExecutors().fetch_sub(1, std::memory_order_relaxed); }
      } running;
      if (item.marker) {
        item.marker(pending);
      } else if (pending.ok()) {
        outcome = item.work();
      }
    }
    item = Item{};  // release what the work kept alive before reporting idle
    lock.Lock();
    if (!outcome.ok() && failure_.ok()) failure_ = outcome;
    busy_ = false;
    if (queue_.empty()) idle_.SignalAll();
  }
}

Status HostStream::WaitIdle(std::chrono::milliseconds timeout, bool report_failure) {
  if (OnExecutor()) {
    return Status::Assertion(ErrorCode::kInvalidState,
                             "a stream cannot wait for itself on its own executor",
                             {{"stream_id", std::to_string(id_)}});
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(&mutex_);
  while (!queue_.empty() || busy_) {
    if (!idle_.WaitUntil(&mutex_, deadline) && (!queue_.empty() || busy_)) {
      return StreamTimeout("host stream did not drain in time", id_, timeout);
    }
  }
  if (!report_failure) return Status::Ok();
  Status failure = failure_;
  failure_ = Status::Ok();
  return failure;
}

bool HostStream::Query() const {
  MutexLock lock(&mutex_);
  return queue_.empty() && !busy_;
}

HostEvent::HostEvent() : state_(std::make_shared<State>()) {}

void HostEvent::RecordImpl(HostStream* stream) {
  std::uint64_t generation = 0;
  {
    MutexLock lock(&state_->mutex);
    generation = ++state_->recorded;
    if (stream == nullptr) {
      // The default stream is the caller: everything before this point has already run.
      state_->reached = generation;
      state_->failure = Status::Ok();
    }
  }
  if (stream == nullptr) {
    state_->completed.SignalAll();
    return;
  }
  stream->EnqueueMarker([state = state_, generation](const Status& pending_failure) {
    {
      MutexLock lock(&state->mutex);
      if (generation > state->reached) {
        state->reached = generation;
        state->failure = pending_failure;
      }
    }
    state->completed.SignalAll();
  });
}

Status HostEvent::AwaitGeneration(State& state, std::uint64_t generation,
                                  std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(&state.mutex);
  while (state.reached < generation) {
    if (!state.completed.WaitUntil(&state.mutex, deadline) && state.reached < generation) {
      return Status::Assertion(ErrorCode::kTimeout, "host event did not complete in time",
                               {{"generation", std::to_string(generation)},
                                {"timeout_ms", std::to_string(timeout.count())}});
    }
  }
  return state.failure;
}

Status HostEvent::Wait(HostStream* stream, std::chrono::milliseconds timeout) {
  std::uint64_t generation = 0;
  {
    MutexLock lock(&state_->mutex);
    generation = state_->recorded;
  }
  if (generation == 0) return Status::Ok();  // never recorded: nothing to wait for
  if (stream == nullptr) return AwaitGeneration(*state_, generation, timeout);
  stream->Enqueue([state = state_, generation, timeout] {
    return AwaitGeneration(*state, generation, timeout);
  });
  return Status::Ok();
}

Status HostEvent::SynchronizeImpl(std::chrono::milliseconds timeout) {
  std::uint64_t generation = 0;
  {
    MutexLock lock(&state_->mutex);
    generation = state_->recorded;
  }
  if (generation == 0) return Status::Ok();
  return AwaitGeneration(*state_, generation, timeout);
}

bool HostEvent::Query() const {
  MutexLock lock(&state_->mutex);
  return state_->reached >= state_->recorded;
}

HostStream* CurrentStream() { return t_current_stream; }

HostStream* SetCurrentStream(HostStream* stream) {
  HostStream* previous = t_current_stream;
  t_current_stream = stream;
  return previous;
}

Status DrainAllStreams(std::chrono::milliseconds timeout) {
  std::vector<std::shared_ptr<HostStream>> streams;
  {
    MutexLock lock(&Registry().mutex);
    for (const auto& [address, stream] : Registry().streams) {
      if (std::shared_ptr<HostStream> live = stream.lock()) streams.push_back(std::move(live));
    }
  }
  // Without the list's lock: a stream made or destroyed meanwhile (by queued work, say) does
  // not wait for the drain.
  for (const std::shared_ptr<HostStream>& stream : streams) {
    if (stream->OnExecutor()) continue;  // work queued on a stream cannot drain that stream
    HPS_RETURN_IF_ERROR(stream->Drain(timeout));
  }
  return Status::Ok();
}

}  // namespace hyper_parallel::shmem::host
