// Which transport reaches the remote peers: decided once, at init (remote_transport.h).
//
// Pure apart from loading the transport's library; safe from one thread at a time.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "backends/transport/remote_transport.h"
#include "base/status.h"

namespace hyper_parallel::shmem::transport {

struct TransportOptions {
  /// HYPER_PARALLEL_SHMEM_REMOTE_TRANSPORT: "ucx", or "reordering" (UCX behind
  /// ReorderingTransport, for tests).
  std::string kind = "ucx";
  std::string ucx_library;  ///< empty: libucp.so.0
  std::chrono::milliseconds timeout{120000};
  std::string path = "auto";  ///< HYPER_PARALLEL_SHMEM_REMOTE_PATH: auto, messages or rma
};

/// Loads the transport `options` names. UNSUPPORTED_CAPABILITY names what is missing (the
/// library, a symbol, a too old version, a build without UCX); INVALID_CONFIG a bad setting.
Status OpenRemoteTransport(const TransportOptions& options, std::unique_ptr<RemoteTransport>* out);

}  // namespace hyper_parallel::shmem::transport
