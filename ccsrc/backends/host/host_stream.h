// Host streams and events (docs/architecture.md, "Streams and waits").
//
// The default host stream is the calling thread itself: an operation on it runs before the
// call returns, in program order. A HostStream is an asynchronous stream: a FIFO executor
// thread that runs queued work one item at a time, so work queued from one thread runs in the
// order it was queued. HostEvent marks a point in a stream; it can be waited for by the
// caller or by another stream, and queried.
//
// Failures: the first queued item that fails puts its stream in error; later items are skipped
// and events recorded after it complete carrying that failure (so a stream waiting on them
// fails too, instead of running on wrong data). Synchronize() returns the failure and clears
// it; the stream is usable again.
//
// Thread-safety: every member may be called from any thread, except that Synchronize() and
// HostEvent::Synchronize() must not be called on the stream's own executor (it would wait for
// itself; they return INVALID_STATE there).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "backends/wait/call_sites.h"
#include "base/mutex.h"
#include "base/status.h"

namespace hyper_parallel::shmem::host {

/// One queued operation. It runs on the executor and returns its outcome.
using StreamWork = std::function<Status()>;
/// A marker's completion: receives the stream's pending failure (OK when healthy).
using StreamMarker = std::function<void(const Status& pending_failure)>;

class HostStream {
 public:
  /// Starts a stream with its executor thread.
  template <CallSite kSite>
  static std::shared_ptr<HostStream> Create() {
    RequireCallable<HostCall::kCreateStream, kSite>();
    std::shared_ptr<HostStream> stream(new HostStream());
    Register(stream);
    return stream;
  }

  /// Runs what is still queued, then stops the executor. Must not run on the executor itself.
  ~HostStream();
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;

  /// Queues `work` behind everything queued before; returns at once.
  void Enqueue(StreamWork work) EXCLUDES(mutex_);
  /// Queues a marker; it completes (is called) when the executor reaches it.
  void EnqueueMarker(StreamMarker marker) EXCLUDES(mutex_);

  /// Waits until everything queued so far has run; returns and clears the stream's failure.
  template <CallSite kSite>
  Status Synchronize(std::chrono::milliseconds timeout) {
    RequireCallable<HostCall::kSynchronizeStream, kSite>();
    return WaitIdle(timeout, /*report_failure=*/true);
  }

  /// Waits until idle like Synchronize, but leaves a failure in place for the stream's owner
  /// (for Quiesce): fails only with TIMEOUT.
  Status Drain(std::chrono::milliseconds timeout) { return WaitIdle(timeout, false); }

  /// True when nothing is queued or running.
  bool Query() const EXCLUDES(mutex_);

  /// Process-unique id, starting at 1, for logs and debug output.
  std::uint64_t id() const { return id_; }
  bool OnExecutor() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  struct Item {
    StreamWork work;      // set for ordinary items
    StreamMarker marker;  // set for markers
  };

  HostStream();
  // Adds the stream to the process's list that DrainAllStreams walks.
  static void Register(const std::shared_ptr<HostStream>& stream);
  void Run() EXCLUDES(mutex_);
  Status WaitIdle(std::chrono::milliseconds timeout, bool report_failure) EXCLUDES(mutex_);

  const std::uint64_t id_;
  mutable Mutex mutex_;
  CondVar work_ready_;
  CondVar idle_;
  std::deque<Item> queue_ GUARDED_BY(mutex_);
  bool busy_ GUARDED_BY(mutex_) = false;
  bool stopping_ GUARDED_BY(mutex_) = false;
  Status failure_ GUARDED_BY(mutex_);
  std::thread thread_;
};

class HostEvent {
 public:
  HostEvent();

  /// Marks the current end of `stream` (null: the default stream, which is the caller, so the
  /// event completes at once). Re-recording moves the mark.
  template <CallSite kSite>
  void Record(HostStream* stream) {
    RequireCallable<HostCall::kRecordEvent, kSite>();
    RecordImpl(stream);
  }

  /// Makes `stream` wait for the latest recorded mark before running anything queued later
  /// (null: blocks the caller). The wait is bounded by `timeout`.
  Status Wait(HostStream* stream, std::chrono::milliseconds timeout);

  /// Blocks the caller until the latest recorded mark completed; returns its failure, if any.
  template <CallSite kSite>
  Status Synchronize(std::chrono::milliseconds timeout) {
    RequireCallable<HostCall::kSynchronizeEvent, kSite>();
    return SynchronizeImpl(timeout);
  }

  /// True when the latest recorded mark has completed (or nothing was ever recorded).
  bool Query() const;

 private:
  struct State {
    Mutex mutex;
    CondVar completed;
    std::uint64_t recorded GUARDED_BY(mutex) = 0;  // generation of the latest Record
    std::uint64_t reached GUARDED_BY(mutex) = 0;   // highest generation completed
    Status failure GUARDED_BY(mutex);  // failure carried by the latest completed generation
  };
  static Status AwaitGeneration(State& state, std::uint64_t generation,
                                std::chrono::milliseconds timeout);
  void RecordImpl(HostStream* stream);
  Status SynchronizeImpl(std::chrono::milliseconds timeout);

  std::shared_ptr<State> state_;
};

/// The stream the calling thread enqueues on (null: the default stream).
HostStream* CurrentStream();
/// Sets the calling thread's current stream; returns the previous one.
HostStream* SetCurrentStream(HostStream* stream);

/// Drains every live HostStream of the process (device quiescent). TIMEOUT names a stream
/// that did not drain in time.
Status DrainAllStreams(std::chrono::milliseconds timeout);

}  // namespace hyper_parallel::shmem::host
