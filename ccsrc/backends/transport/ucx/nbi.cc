// UcxTransport's non-blocking operations (ucx_transport.h): put_nbi and get_nbi, their
// completion, and quiet.
#include <memory>
#include <utility>
#include <vector>

#include "backends/transport/ucx/paths.h"

namespace hyper_parallel::shmem::transport {

#if HPS_HAVE_UCX_HEADERS

Status UcxTransport::PutNbi(int pe, std::uint64_t offset, const void* source,
                            std::uint64_t bytes, std::shared_ptr<const void> hold) {
  HPS_RETURN_IF_ERROR(Connected(pe));
  return peers_[pe].path->PutNbi(*this, peers_[pe], offset, source, bytes, std::move(hold));
}

Status UcxTransport::GetNbi(int pe, void* destination, std::uint64_t offset, std::uint64_t bytes,
                            std::shared_ptr<const void> hold) {
  HPS_RETURN_IF_ERROR(Connected(pe));
  return peers_[pe].path->GetNbi(*this, peers_[pe], destination, offset, bytes, std::move(hold));
}

Status UcxTransport::CompleteNbi() {
  if (!has_nbi_.load(std::memory_order_acquire)) [[likely]] return Status::Ok();
  std::vector<NbiPut> puts;
  std::vector<NbiGet> gets;
  {
    MutexLock lock(&nbi_mutex_);
    puts.swap(nbi_puts_);
    gets.swap(nbi_gets_);
    has_nbi_.store(false, std::memory_order_release);
  }
  // Every one is waited for, also after a failure, so that no hold is dropped while UCX may
  // still read or write its memory.
  Status first;
  for (NbiPut& put : puts) {
    Status finished = Finish(put.out.get());
    if (first.ok()) first = std::move(finished);
  }
  for (NbiGet& get : gets) {
    Status finished = AwaitGet(get.pe, get.get, get.token);
    if (first.ok()) first = std::move(finished);
  }
  return first;
}

Status UcxTransport::Quiet() {
  HPS_RETURN_IF_ERROR(CompleteNbi());
  return Flush();
}

#endif

}  // namespace hyper_parallel::shmem::transport
