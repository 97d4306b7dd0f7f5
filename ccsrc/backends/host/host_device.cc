#include "backends/host/host_device.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "backends/host/host_stream.h"

namespace hyper_parallel::shmem::host {
namespace {

// Reads a slot's sequence word (acquire) and its other words into `words`, then checks the
// sequence again after an acquire fence: true when the slot held call `sequence` throughout.
template <std::size_t kWords, class Slot>
bool ReadSequencedSlot(const Slot& slot, std::uint64_t sequence,
                       std::array<std::uint64_t, kWords>* words) {
  (*words)[0] = slot.sequence.load(std::memory_order_acquire);
  for (std::size_t i = 1; i < kWords; ++i) {
    (*words)[i] = slot.words[i - 1].load(std::memory_order_relaxed);
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  return (*words)[0] == sequence && slot.sequence.load(std::memory_order_relaxed) == sequence;
}

}  // namespace

int HostDevice::workers() const { return workers_ == nullptr ? 1 : workers_->workers(); }

void HostDevice::CopyBytes(void* destination, const void* source, std::uint64_t bytes) {
  std::memcpy(destination, source, bytes);
}

void HostDevice::RunParallel(const std::function<void(int worker)>& body) const {
  if (workers_ == nullptr || workers_->workers() == 1) {
    body(0);
    return;
  }
  workers_->Run(body);
}

std::string HostDevice::ArrivalText(int slot, std::uint64_t epoch, std::uint64_t before,
                                    const std::vector<int>& sources) const {
  const std::uint64_t arrived = Arrived(slot, epoch, false) + Arrived(slot, epoch, true);
  std::string text = "arrived=" + std::to_string(arrived - before) + " of " +
                     std::to_string(sources.size()) + ", sources=[";
  for (std::size_t i = 0; i < sources.size(); ++i) {
    if (i > 0) text += ',';
    text += std::to_string(sources[i]);
  }
  return text + "]";
}

Status HostDevice::Timeout(int slot, std::uint64_t epoch, std::uint64_t before,
                           const std::vector<int>& sources, std::string_view operation,
                           std::string_view waiting_for) const {
  return Status::Assertion(ErrorCode::kTimeout, std::string(operation) + " timed out",
                           {{"pe", std::to_string(rank_)},
                            {"waiting_for", std::string(waiting_for)},
                            {"epoch", std::to_string(epoch)},
                            {"arrivals", ArrivalText(slot, epoch, before, sources)},
                            {"timeout_ms", std::to_string(timeout_.count())}});
}

void HostDevice::StoreSummary(SummarySlot& slot, const DescriptorSummary& summary) {
  const auto words = summary.Pack();
  for (int i = 1; i < DescriptorSummary::kWords; ++i) {
    slot.words[i - 1].store(words[i], std::memory_order_relaxed);
  }
  slot.sequence.store(summary.sequence, std::memory_order_release);
}

namespace {

Status AheadStatus(const data_plane::CollectiveGroup& group, std::uint64_t sequence, int pe,
                   std::uint64_t theirs) {
  std::vector<Field> fields;
  if (group.sync_slot != 0) fields.push_back({"team", GroupLabel(group)});
  fields.push_back({"sequence", std::to_string(sequence)});
  fields.push_back({"pe", std::to_string(pe)});
  fields.push_back({"their_sequence", std::to_string(theirs)});
  return Status::Assertion(ErrorCode::kCollectiveMismatch,
                           "a PE is ahead in the sequence of collective calls", fields);
}

}  // namespace

Status HostDevice::ReadSummary(const SummarySlot& slot, std::uint64_t sequence,
                               const data_plane::CollectiveGroup& group, int from,
                               DescriptorSummary* summary) {
  std::array<std::uint64_t, DescriptorSummary::kWords> words{};
  if (!ReadSequencedSlot(slot, sequence, &words)) {
    return AheadStatus(group, sequence, from, words[0]);
  }
  *summary = DescriptorSummary::Unpack(words);
  return Status::Ok();
}

Status HostDevice::ReadOwn(int pe, const data_plane::CollectiveGroup& group,
                           std::uint64_t sequence, CollectiveDescriptor* descriptor) const {
  const CollectiveSlot& theirs = layout_.Collective(access_.control(pe), group.sync_slot, sequence);
  std::array<std::uint64_t, CollectiveDescriptor::kWords> words{};
  // A PE two or more calls ahead can only be one whose sequence left ours (it skipped a
  // collective this PE made): its slot no longer holds call `sequence`.
  if (!ReadSequencedSlot(theirs, sequence, &words)) {
    return AheadStatus(group, sequence, pe, words[0]);
  }
  *descriptor = CollectiveDescriptor::Unpack(words);
  return Status::Ok();
}

std::string HostDevice::MissingExchange(const data_plane::CollectiveGroup& group,
                                        std::uint64_t sequence) const {
  std::string missing = "[";
  for (int member = 0; member < group.size(); ++member) {
    const int pe = group.pe(member);
    if (PublishedSequence(pe, group.sync_slot, sequence) >= sequence) continue;
    if (missing.size() > 1) missing += ',';
    missing += std::to_string(pe);
  }
  return missing + "]";
}

Status HostDevice::ExchangeTimeout(const data_plane::CollectiveGroup& group,
                                   const CollectiveDescriptor& mine) const {
  std::vector<Field> fields;
  fields.push_back({"pe", std::to_string(rank_)});
  if (group.sync_slot != 0) fields.push_back({"team", GroupLabel(group)});
  fields.push_back({"collective", mine.Describe()});
  fields.push_back({"missing_pes", MissingExchange(group, mine.sequence)});
  fields.push_back({"timeout_ms", std::to_string(timeout_.count())});
  return Status::Assertion(ErrorCode::kTimeout,
                           "collective call timed out waiting for PEs to enter it", fields);
}

Status HostDevice::ReadDescriptors(const data_plane::CollectiveGroup& group,
                                   std::uint64_t sequence,
                                   std::vector<CollectiveDescriptor>* all) const {
  all->assign(static_cast<std::size_t>(group.size()), CollectiveDescriptor{});
  for (int member = 0; member < group.size(); ++member) {
    HPS_RETURN_IF_ERROR(
        ReadOwn(group.pe(member), group, sequence, &(*all)[static_cast<std::size_t>(member)]));
  }
  return Status::Ok();
}

std::string HostDevice::CounterText(std::uint64_t offset, std::int64_t target) const {
  return Hex(access_.heap(rank_) + offset) + ", expected>=" + std::to_string(target) +
         ", observed=" + std::to_string(ReadCounter(rank_, offset));
}

bool HostDevice::CoreWordsMatch(const data_plane::CollectiveGroup& group,
                                const CollectiveDescriptor& mine) const {
  const auto words = mine.Pack();
  for (int member = 0; member < group.size(); ++member) {
    const int pe = group.pe(member);
    if (pe == rank_) continue;
    const CollectiveSlot& theirs = layout_.Collective(access_.control(pe), group.sync_slot, mine.sequence);
    if (theirs.sequence.load(std::memory_order_acquire) != mine.sequence) return false;
    for (int i = 1; i < CollectiveDescriptor::kCoreWords; ++i) {
      if (theirs.words[i - 1].load(std::memory_order_relaxed) != words[i]) return false;
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (theirs.sequence.load(std::memory_order_relaxed) != mine.sequence) return false;
  }
  return true;
}

BlockingOpTable::Scope HostDevice::Register(std::string_view operation, const HostStream* stream,
                                            BlockingOpTable::Describe describe) const {
  if (blocking_ops_ == nullptr) return {};
  return blocking_ops_->Enter(operation, StreamLabel(stream), std::move(describe));
}

std::string StreamLabel(const HostStream* stream) {
  return stream == nullptr ? DefaultStreamLabel() : "stream " + std::to_string(stream->id());
}

CopyWorkers::CopyWorkers(int threads) {
  for (int worker = 1; worker <= threads; ++worker) {
    threads_.emplace_back([this, worker] { Loop(worker); });
  }
}

CopyWorkers::~CopyWorkers() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
  }
  start_.SignalAll();
  for (std::thread& thread : threads_) thread.join();
}

void CopyWorkers::Run(const std::function<void(int worker)>& body) {
  MutexLock run(&run_mutex_);
  {
    MutexLock lock(&mutex_);
    body_ = &body;
    pending_ = static_cast<int>(threads_.size());
    ++generation_;
  }
  start_.SignalAll();
  body(0);
  MutexLock lock(&mutex_);
  while (pending_ != 0) finished_.Wait(&mutex_);
  body_ = nullptr;
}

void CopyWorkers::Loop(int worker) {
  std::uint64_t seen = 0;
  MutexLock lock(&mutex_);
  for (;;) {
    while (!stopping_ && generation_ == seen) start_.Wait(&mutex_);
    if (stopping_) return;
    seen = generation_;
    const std::function<void(int)>* body = body_;
    lock.Unlock();
    (*body)(worker);
    lock.Lock();
    if (--pending_ == 0) finished_.SignalAll();
  }
}

int DefaultCopyWorkers(int local_pes, int cap) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::clamp(cores / std::max(1, local_pes), 1, cap);
}

}  // namespace hyper_parallel::shmem::host
