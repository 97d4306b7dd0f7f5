#include "backends/transport/reordering.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace hyper_parallel::shmem::transport {

ReorderingTransport::ReorderingTransport(std::unique_ptr<RemoteTransport> inner, Options options)
    : inner_(std::move(inner)), options_(options), shuffle_(options.seed) {}

ReorderingTransport::~ReorderingTransport() { Close(); }

void ReorderingTransport::AddWaiters(int delta) {
  // The waiters drive the inner transport's progress: it is the one that must know of them.
  RemoteTransport::AddWaiters(delta);
  inner_->AddWaiters(delta);
}

Status ReorderingTransport::Start(Liveness liveness, const std::atomic<bool>* abort,
                                  Doorbell* own_bell, WaitPolicy policy) {
  HPS_RETURN_IF_ERROR(inner_->Start(std::move(liveness), abort, own_bell, policy));
  releaser_ = std::thread([this] { RunReleaser(); });
  return Status::Ok();
}

void ReorderingTransport::Close() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
    (void)ReleaseAll();  // bounded: the inner transport's waits are
  }
  wake_.SignalAll();
  if (releaser_.joinable()) releaser_.join();
  if (inner_) inner_->Close();
}

void ReorderingTransport::RunReleaser() {
  MutexLock lock(&mutex_);
  while (!stopping_) {
    (void)wake_.WaitUntil(&mutex_, std::chrono::steady_clock::now() + options_.delay / 2);
    if (stopping_) break;
    const auto due = std::chrono::steady_clock::now() - options_.delay;
    // A failure reaches the caller of the next ordering operation to that PE: the inner
    // transport latches lost peers itself.
    (void)Release(-1, [due](const Held& held) { return held.since <= due; });
  }
}

template <class Due>
Status ReorderingTransport::Release(int pe, Due&& due) {
  std::vector<Held> going;
  auto keep = std::stable_partition(held_.begin(), held_.end(), [&](const Held& held) {
    return !((pe < 0 || held.pe == pe) && due(held));
  });
  going.assign(std::make_move_iterator(keep), std::make_move_iterator(held_.end()));
  held_.erase(keep, held_.end());
  std::shuffle(going.begin(), going.end(), shuffle_);
  Status first;
  std::uint64_t last = 0;
  bool in_order = true;
  for (std::size_t i = 0; i < going.size(); ++i) {
    const Held& held = going[i];
    if (i > 0 && held.order < last) in_order = false;
    last = held.order;
    Status sent = inner_->Put(held.pe, held.offset, held.data.data(), held.data.size(),
                              held.audience);
    if (!sent.ok() && first.ok()) first = std::move(sent);
  }
  if (!in_order) reordered_.fetch_add(going.size(), std::memory_order_relaxed);
  return first;
}

Status ReorderingTransport::ReleaseAll() {
  return Release(-1, [](const Held&) { return true; });
}

Status ReorderingTransport::Hold(int pe, std::uint64_t offset, const void* source,
                                 std::uint64_t bytes, Audience audience) {
  if (bytes == 0) return Status::Ok();
  MutexLock lock(&mutex_);
  Held held;
  held.pe = pe;
  held.offset = offset;
  held.data.resize(bytes);
  std::memcpy(held.data.data(), source, bytes);
  held.audience = audience;
  held.order = issued_++;
  held.since = std::chrono::steady_clock::now();
  held_.push_back(std::move(held));
  if (held_.size() > options_.max_held) return ReleaseAll();
  return Status::Ok();
}

Status ReorderingTransport::Put(int pe, std::uint64_t offset, const void* source,
                                std::uint64_t bytes, Audience audience) {
  return Hold(pe, offset, source, bytes, audience);
}

Status ReorderingTransport::PutNbi(int pe, std::uint64_t offset, const void* source,
                                   std::uint64_t bytes, std::shared_ptr<const void> /*hold*/) {
  // The copy is made now: the put is complete (its source free) when this returns.
  return Hold(pe, offset, source, bytes, Audience::kAnyone);
}

Status ReorderingTransport::PutSignal(int pe, std::uint64_t offset, const void* source,
                                      std::uint64_t bytes, const RemoteSignal& signal,
                                      Audience audience) {
  MutexLock lock(&mutex_);
  HPS_RETURN_IF_ERROR(Release(pe, [](const Held&) { return true; }));
  return inner_->PutSignal(pe, offset, source, bytes, signal, audience);
}

Status ReorderingTransport::Begin(Outbound* out, int pe, std::uint64_t offset,
                                  const void* source, std::uint64_t bytes,
                                  const RemoteSignal& signal, Audience audience) {
  if (signal.action == SignalAction::kNone) return Hold(pe, offset, source, bytes, audience);
  MutexLock lock(&mutex_);
  HPS_RETURN_IF_ERROR(Release(pe, [](const Held&) { return true; }));
  return inner_->Begin(out, pe, offset, source, bytes, signal, audience);
}

Status ReorderingTransport::Atomic(int pe, const AtomicRequest& request, std::uint64_t* old) {
  MutexLock lock(&mutex_);
  HPS_RETURN_IF_ERROR(Release(pe, [](const Held&) { return true; }));
  return inner_->Atomic(pe, request, old);
}

Status ReorderingTransport::Get(int pe, void* destination, std::uint64_t offset,
                                std::uint64_t bytes) {
  MutexLock lock(&mutex_);
  HPS_RETURN_IF_ERROR(Release(pe, [](const Held&) { return true; }));
  return inner_->Get(pe, destination, offset, bytes);
}

Status ReorderingTransport::GetNbi(int pe, void* destination, std::uint64_t offset,
                                   std::uint64_t bytes, std::shared_ptr<const void> hold) {
  MutexLock lock(&mutex_);
  HPS_RETURN_IF_ERROR(Release(pe, [](const Held&) { return true; }));
  return inner_->GetNbi(pe, destination, offset, bytes, std::move(hold));
}

Status ReorderingTransport::Fence() {
  MutexLock lock(&mutex_);
  HPS_RETURN_IF_ERROR(ReleaseAll());
  return inner_->Fence();
}

Status ReorderingTransport::Flush() {
  MutexLock lock(&mutex_);
  HPS_RETURN_IF_ERROR(ReleaseAll());
  return inner_->Flush();
}

Status ReorderingTransport::Quiet() {
  MutexLock lock(&mutex_);
  HPS_RETURN_IF_ERROR(ReleaseAll());
  return inner_->Quiet();
}

RemoteCounters ReorderingTransport::counters() const {
  RemoteCounters counters = inner_->counters();
  counters.reordered = reordered_.load(std::memory_order_relaxed);
  return counters;
}

std::size_t ReorderingTransport::held() const {
  MutexLock lock(&mutex_);
  return held_.size();
}

}  // namespace hyper_parallel::shmem::transport
