// Where each host-backend call may be made.
//
// Three call sites exist:
//   kHostThread      a user thread outside any stream: init, shutdown, allocation, and the
//                    inline default stream, which runs operations on the calling thread;
//   kStreamExecutor  the FIFO executor thread of an asynchronous host stream;
//   kCustomOp        inside a torch custom op (traced or replayed as part of a graph).
//
// Lifecycle calls are collective and may block for the whole timeout, so they belong to a host
// thread only; the exchange of collective descriptors also runs on an executor, as the first
// step of a queued barrier or all_gather. Enqueuing RMA is fine inside a custom op; the data path (copies, atomic
// signals, bounded waits) runs on a host thread or a stream executor. Synchronising a stream is
// forbidden on an executor, where it could wait for itself.
//
// The table is constexpr, and every guarded primitive is a template on its call site that
// static_asserts against the table, so a call from the wrong place does not compile.
#pragma once

#include <cstdint>
#include <string_view>

namespace hyper_parallel::shmem::host {

enum class CallSite : std::uint8_t {
  kHostThread = 1u << 0,
  kStreamExecutor = 1u << 1,
  kCustomOp = 1u << 2,
};

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

constexpr std::uint8_t Sites(CallSite a) { return static_cast<std::uint8_t>(a); }
constexpr std::uint8_t Sites(CallSite a, CallSite b) { return Sites(a) | Sites(b); }
constexpr std::uint8_t Sites(CallSite a, CallSite b, CallSite c) {
  return Sites(a) | Sites(b) | Sites(c);
}

/// The table: allowed call sites of each HostCall, indexed by HostCall.
inline constexpr std::uint8_t kAllowedSites[static_cast<int>(HostCall::kCount)] = {
    /* kCreateSegment     */ Sites(CallSite::kHostThread),
    /* kOpenPeerSegment   */ Sites(CallSite::kHostThread),
    /* kUnmapSegments     */ Sites(CallSite::kHostThread),
    /* kExchange          */ Sites(CallSite::kHostThread, CallSite::kStreamExecutor),
    /* kEnqueue           */ Sites(CallSite::kHostThread, CallSite::kCustomOp),
    /* kCopyBytes         */ Sites(CallSite::kHostThread, CallSite::kStreamExecutor),
    /* kAtomicSignal      */ Sites(CallSite::kHostThread, CallSite::kStreamExecutor),
    /* kBoundedWait       */ Sites(CallSite::kHostThread, CallSite::kStreamExecutor),
    /* kCreateStream      */ Sites(CallSite::kHostThread),
    /* kSynchronizeStream */ Sites(CallSite::kHostThread),
    /* kRecordEvent       */ Sites(CallSite::kHostThread, CallSite::kCustomOp),
    /* kSynchronizeEvent  */ Sites(CallSite::kHostThread),
    /* kPinThread         */ Sites(CallSite::kHostThread),
};

constexpr bool IsCallable(HostCall call, CallSite site) {
  return (kAllowedSites[static_cast<int>(call)] & Sites(site)) != 0;
}

std::string_view HostCallName(HostCall call);
std::string_view CallSiteName(CallSite site);

/// Fails to compile when `call` may not be made from `site`. Put it first in every guarded
/// primitive: `RequireCallable<HostCall::kCopyBytes, kSite>();`.
template <HostCall call, CallSite site>
constexpr void RequireCallable() {
  static_assert(IsCallable(call, site),
                "this host-backend call is not callable from this call site "
                "(see kAllowedSites in backends/host/call_sites.h)");
}

}  // namespace hyper_parallel::shmem::host
