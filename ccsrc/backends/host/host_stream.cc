#include "backends/host/host_stream.h"

#include "backends/host/doorbell.h"

#include <atomic>
#include <cstdio>
#include <exception>
#include <set>
#include <string>

namespace hyper_parallel::shmem::host {
namespace {

std::atomic<std::uint64_t> g_next_stream_id{1};
thread_local HostStream* t_current_stream = nullptr;

// Every live stream, so that Quiesce can drain them all.
struct StreamRegistry {
  std::mutex mutex;
  std::set<HostStream*> streams;
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
  std::lock_guard<std::mutex> lock(Registry().mutex);
  Registry().streams.insert(this);
}

HostStream::~HostStream() {
  {
    std::lock_guard<std::mutex> lock(Registry().mutex);
    Registry().streams.erase(this);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
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
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(Item{std::move(work), nullptr});
  }
  work_ready_.notify_one();
}

void HostStream::EnqueueMarker(StreamMarker marker) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(Item{nullptr, std::move(marker)});
  }
  work_ready_.notify_one();
}

void HostStream::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything queued has run
    Item item = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    const Status pending = failure_;
    lock.unlock();
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
    lock.lock();
    if (!outcome.ok() && failure_.ok()) failure_ = outcome;
    busy_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

Status HostStream::WaitIdle(std::chrono::milliseconds timeout, bool report_failure) {
  if (OnExecutor()) {
    return Status::Assertion(ErrorCode::kInvalidState,
                             "a stream cannot wait for itself on its own executor",
                             {{"stream_id", std::to_string(id_)}});
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (!idle_.wait_for(lock, timeout, [this] { return queue_.empty() && !busy_; })) {
    return StreamTimeout("host stream did not drain in time", id_, timeout);
  }
  if (!report_failure) return Status::Ok();
  Status failure = failure_;
  failure_ = Status::Ok();
  return failure;
}

bool HostStream::Query() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.empty() && !busy_;
}

HostEvent::HostEvent() : state_(std::make_shared<State>()) {}

void HostEvent::RecordImpl(HostStream* stream) {
  std::uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    generation = ++state_->recorded;
    if (stream == nullptr) {
      // The default stream is the caller: everything before this point has already run.
      state_->reached = generation;
      state_->failure = Status::Ok();
    }
  }
  if (stream == nullptr) {
    state_->completed.notify_all();
    return;
  }
  stream->EnqueueMarker([state = state_, generation](const Status& pending_failure) {
    {
      std::lock_guard<std::mutex> lock(state->mutex);
      if (generation > state->reached) {
        state->reached = generation;
        state->failure = pending_failure;
      }
    }
    state->completed.notify_all();
  });
}

Status HostEvent::AwaitGeneration(State& state, std::uint64_t generation,
                                  std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(state.mutex);
  if (!state.completed.wait_for(lock, timeout,
                                [&] { return state.reached >= generation; })) {
    return Status::Assertion(ErrorCode::kTimeout, "host event did not complete in time",
                             {{"generation", std::to_string(generation)},
                              {"timeout_ms", std::to_string(timeout.count())}});
  }
  return state.failure;
}

Status HostEvent::Wait(HostStream* stream, std::chrono::milliseconds timeout) {
  std::uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
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
    std::lock_guard<std::mutex> lock(state_->mutex);
    generation = state_->recorded;
  }
  if (generation == 0) return Status::Ok();
  return AwaitGeneration(*state_, generation, timeout);
}

bool HostEvent::Query() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->reached >= state_->recorded;
}

HostStream* CurrentStream() { return t_current_stream; }

HostStream* SetCurrentStream(HostStream* stream) {
  HostStream* previous = t_current_stream;
  t_current_stream = stream;
  return previous;
}

Status DrainAllStreams(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(Registry().mutex);
  for (HostStream* stream : Registry().streams) {
    if (stream->OnExecutor()) continue;  // work queued on a stream cannot drain that stream
    HPS_RETURN_IF_ERROR(stream->Drain(timeout));
  }
  return Status::Ok();
}

}  // namespace hyper_parallel::shmem::host
