#include "backends/transport/transport.h"

#include <utility>

#include "backends/transport/reordering.h"
#include "backends/transport/ucx/ucx_transport.h"

namespace hyper_parallel::shmem::transport {

Status OpenRemoteTransport(const TransportOptions& options,
                           std::unique_ptr<RemoteTransport>* out) {
  if (options.kind != "ucx" && options.kind != "reordering") {
    return Status::Assertion(ErrorCode::kInvalidConfig, "unknown remote transport",
                             {{"transport", options.kind}, {"expected", "ucx or reordering"}});
  }
  UcxTransport::Options ucx;
  ucx.library = options.ucx_library;
  ucx.timeout = options.timeout;
  ucx.path = options.path;
  std::unique_ptr<RemoteTransport> loaded;
  HPS_RETURN_IF_ERROR(UcxTransport::Load(ucx, &loaded));
  if (options.kind == "reordering") {
    loaded = std::make_unique<ReorderingTransport>(std::move(loaded), ReorderingTransport::Options{});
  }
  *out = std::move(loaded);
  return Status::Ok();
}

}  // namespace hyper_parallel::shmem::transport
