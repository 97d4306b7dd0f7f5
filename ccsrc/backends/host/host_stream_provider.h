// HostStreamProvider: the host backend's user streams and events (stream.h) over HostStream
// and HostEvent. Streams and events it hands out are only ever given back to it, so a Stream*
// it receives is one of its own.
//
// Thread-safety: as StreamProvider; the calling thread's current stream is thread-local.
#pragma once

#include "backends/stream.h"

namespace hyper_parallel::shmem::host {

/// The process's provider (it holds no state of its own).
StreamProvider& HostStreams();

}  // namespace hyper_parallel::shmem::host
