// Where each host-backend call may be made: the host backend's table in the shared call-site
// vocabulary (backends/call_sites.h).
//
// The host backend enters two sites: kHostThread (a user thread outside any stream: init,
// shutdown, allocation, and the inline default stream, which runs operations on the calling
// thread) and kStreamExecutor (the FIFO executor thread of an asynchronous host stream). It runs
// no custom op and no device code, so its table allows nothing anywhere else.
//
// Lifecycle calls are collective and may block for the whole timeout, so they belong to a host
// thread only; the exchange of collective descriptors also runs on an executor, as the first
// step of a queued collective. The data path (copies, atomic signals, bounded waits) runs on a
// host thread or a stream executor. Synchronising a stream is forbidden on an executor, where
// it could wait for itself.
//
// The table is constexpr, and every guarded primitive is a template on its call site that
// static_asserts against the table, so a call from the wrong place does not compile.
#pragma once

#include <cstdint>
#include <string_view>

#include "backends/call_sites.h"

namespace hyper_parallel::shmem::host {

enum class HostCall : std::uint8_t {
  kCreateSegment,       // memfd_create, ftruncate, seals, mmap of the local heap
  kOpenPeerSegment,     // open /proc/<pid>/fd/<fd>, mmap of a peer heap
  kUnmapSegments,       // munmap, close
  kExchange,            // exchange of collective descriptors through control blocks
  kEnqueue,             // validate-and-enqueue of put/get/signal/wait/barrier
  kCopyBytes,           // memcpy / memmove on mapped heaps
  kAtomicSignal,        // atomic store / fetch_add on a signal word, then the doorbell
  kBoundedWait,         // spin, then futex wait on a doorbell, bounded by the timeout
  kCreateStream,        // start an executor thread
  kSynchronizeStream,   // wait for a stream to drain
  kRecordEvent,         // mark a point in a stream
  kSynchronizeEvent,    // block the caller until an event completes
  kPinThread,           // sched_setaffinity of the initialising thread (wait=auto)
  kCount,
};

/// The sites the host backend enters.
inline constexpr CallSites kHostSites = Sites(CallSite::kHostThread, CallSite::kStreamExecutor);

/// The table: allowed call sites of each HostCall, indexed by HostCall.
inline constexpr CallSites kAllowedSites[static_cast<int>(HostCall::kCount)] = {
    /* kCreateSegment     */ Sites(CallSite::kHostThread),
    /* kOpenPeerSegment   */ Sites(CallSite::kHostThread),
    /* kUnmapSegments     */ Sites(CallSite::kHostThread),
    /* kExchange          */ Sites(CallSite::kHostThread, CallSite::kStreamExecutor),
    /* kEnqueue           */ Sites(CallSite::kHostThread),
    /* kCopyBytes         */ Sites(CallSite::kHostThread, CallSite::kStreamExecutor),
    /* kAtomicSignal      */ Sites(CallSite::kHostThread, CallSite::kStreamExecutor),
    /* kBoundedWait       */ Sites(CallSite::kHostThread, CallSite::kStreamExecutor),
    /* kCreateStream      */ Sites(CallSite::kHostThread),
    /* kSynchronizeStream */ Sites(CallSite::kHostThread),
    /* kRecordEvent       */ Sites(CallSite::kHostThread),
    /* kSynchronizeEvent  */ Sites(CallSite::kHostThread),
    /* kPinThread         */ Sites(CallSite::kHostThread),
};

constexpr bool IsCallable(HostCall call, CallSite site) {
  return Allows(kAllowedSites[static_cast<int>(call)], site);
}

constexpr bool TableStaysOnHostSites() {
  for (CallSites sites : kAllowedSites) {
    if ((sites & ~kHostSites) != 0) return false;
  }
  return true;
}
static_assert(TableStaysOnHostSites(), "the host backend enters no other site");

std::string_view HostCallName(HostCall call);

/// Fails to compile when `call` may not be made from `site`. Put it first in every guarded
/// primitive: `RequireCallable<HostCall::kCopyBytes, kSite>();`.
template <HostCall call, CallSite site>
constexpr void RequireCallable() {
  static_assert(IsCallable(call, site),
                "this host-backend call is not callable from this call site "
                "(see kAllowedSites in backends/wait/call_sites.h)");
}

}  // namespace hyper_parallel::shmem::host
