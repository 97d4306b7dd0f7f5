// Streams and events as a backend offers them to its users (the torch binding, the demo).
//
// Operations are enqueued on a StreamRef (backend.h). Where a backend lets users make streams
// of their own (the host backend's asynchronous host streams), it exposes them through a
// StreamProvider: make a stream or an event, set and read the calling thread's current stream.
// A backend whose streams belong to the framework (a CUDA or NPU stream of torch) has no
// provider; its users pass the framework's stream instead.
//
// Thread-safety: every member may be called from any thread, except that a stream's or an
// event's Synchronize must not be called from that stream's own executor (INVALID_STATE).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "backends/backend.h"
#include "base/status.h"

namespace hyper_parallel::shmem {

/// An asynchronous stream a user made: work enqueued on it runs in order on its executor.
class Stream {
 public:
  virtual ~Stream() = default;
  /// What operations are enqueued on.
  virtual StreamRef ref() const = 0;
  /// A number that names it in diagnostics ("stream 3").
  virtual std::uint64_t id() const = 0;
  /// Waits until everything queued so far ran; returns (and clears) the first failure.
  virtual Status Synchronize(std::chrono::milliseconds timeout) = 0;
  /// True when everything queued so far ran.
  virtual bool Query() const = 0;
};

/// A point in a stream (or in the calling thread's program order on the default stream).
class Event {
 public:
  virtual ~Event() = default;
  /// Marks the current end of `stream` (null: the default stream, complete at once).
  virtual void Record(Stream* stream) = 0;
  /// Makes `stream` (null: the calling thread) wait until the recorded point ran.
  virtual Status Wait(Stream* stream, std::chrono::milliseconds timeout) = 0;
  /// Waits on the calling thread until the recorded point ran; returns its stream's failure.
  virtual Status Synchronize(std::chrono::milliseconds timeout) = 0;
  /// True when the recorded point ran.
  virtual bool Query() const = 0;
};

class StreamProvider {
 public:
  virtual ~StreamProvider() = default;
  virtual std::shared_ptr<Stream> CreateStream() = 0;
  virtual std::unique_ptr<Event> CreateEvent() = 0;
  /// Sets the calling thread's current stream (null: the default stream).
  virtual void SetCurrentStream(Stream* stream) = 0;
  /// The stream the calling thread enqueues on now.
  virtual StreamRef CurrentStream() const = 0;
};

}  // namespace hyper_parallel::shmem
