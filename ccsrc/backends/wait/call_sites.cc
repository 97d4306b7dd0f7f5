#include "backends/wait/call_sites.h"

namespace hyper_parallel::shmem::host {

std::string_view HostCallName(HostCall call) {
  switch (call) {
    case HostCall::kCreateSegment: return "create_segment";
    case HostCall::kOpenPeerSegment: return "open_peer_segment";
    case HostCall::kUnmapSegments: return "unmap_segments";
    case HostCall::kExchange: return "exchange";
    case HostCall::kEnqueue: return "enqueue";
    case HostCall::kCopyBytes: return "copy_bytes";
    case HostCall::kAtomicSignal: return "atomic_signal";
    case HostCall::kBoundedWait: return "bounded_wait";
    case HostCall::kCreateStream: return "create_stream";
    case HostCall::kSynchronizeStream: return "synchronize_stream";
    case HostCall::kRecordEvent: return "record_event";
    case HostCall::kSynchronizeEvent: return "synchronize_event";
    case HostCall::kPinThread: return "pin_thread";
    case HostCall::kCount: break;
  }
  return "unknown";
}

}  // namespace hyper_parallel::shmem::host
