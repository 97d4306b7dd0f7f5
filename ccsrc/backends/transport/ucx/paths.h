// The two ways UcxTransport reaches a peer (ucx_transport.h's file comment): the messages path
// (messages_path.cc) and the rma path (rma_path.cc), behind UcxTransport::PeerPath. Private to
// the transport's sources.
#pragma once

#include <atomic>
#include <memory>
#include <string_view>

#include "backends/transport/ucx/library.h"

namespace hyper_parallel::shmem::transport {

#define HPS_PEER_PATH_OVERRIDES                                                                \
  Status Transmit(UcxTransport& t, Peer& peer, std::uint64_t offset, const void* source,       \
                  std::uint64_t bytes, const RemoteSignal& signal, Audience audience,          \
                  bool heartbeat) const override;                                              \
  Status Begin(UcxTransport& t, Outbound* out, Peer& peer, std::uint64_t offset,               \
               const void* source, std::uint64_t bytes, const RemoteSignal& signal,            \
               Audience audience) const override;                                              \
  Status Get(UcxTransport& t, Peer& peer, void* destination, std::uint64_t offset,             \
             std::uint64_t bytes) const override;                                              \
  Status PutNbi(UcxTransport& t, Peer& peer, std::uint64_t offset, const void* source,         \
                std::uint64_t bytes, std::shared_ptr<const void> hold) const override;         \
  Status GetNbi(UcxTransport& t, Peer& peer, void* destination, std::uint64_t offset,          \
                std::uint64_t bytes, std::shared_ptr<const void> hold) const override;         \
  Status BeforeAtomic(UcxTransport& t, Peer& peer) const override;                             \
  void Beat(UcxTransport& t, Peer& peer, const RemoteSignal& beat) const override;

#if HPS_HAVE_UCX_HEADERS

// One message of an Outbound batch: its header (UCX reads it until the send completes) and
// its completion, shared by the batch and the send's callback, so that neither outlives the
// other's use (a batch given up on a failure leaves it to the callback).
struct UcxTransport::Sending {
  WireHeader header;
  std::atomic<bool> done{false};
  std::atomic<int> status{UCS_OK};
  int pe = -1;
  bool bulk = false;
  void (*request_free)(void*) = nullptr;
};

// One active message per operation, its data and its signal together (wire.h); a get is a
// request answered by a message, a flush a request answered once everything before it landed.
class UcxTransport::MessagesPath final : public UcxTransport::PeerPath {
 public:
  std::string_view name() const override { return "messages"; }
  bool OrderedByWorker() const override { return false; }
  HPS_PEER_PATH_OVERRIDES
};

// ucp_put_nbx and ucp_get_nbx into the peer's registered segment; a signal is a worker fence
// then ucp_atomic_op_nbx; fences and flushes go through the worker.
class UcxTransport::RmaPath final : public UcxTransport::PeerPath {
 public:
  std::string_view name() const override { return "rma"; }
  bool OrderedByWorker() const override { return true; }
  HPS_PEER_PATH_OVERRIDES
};

#endif

#undef HPS_PEER_PATH_OVERRIDES

}  // namespace hyper_parallel::shmem::transport
