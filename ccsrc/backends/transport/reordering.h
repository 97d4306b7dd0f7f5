// ReorderingTransport: another RemoteTransport behind a layer that delays and reorders what it
// sends, as far as the transport guarantees allow (remote_transport.h) and no further. Links
// such as EFA's are reliable but unordered; this transport makes a loopback UCX behave like
// one, so that tests prove the host code, its collectives and the OpenSHMEM layer rely on
// the ordering points alone (docs/scale-out.md, "Transports").
//
// A put (Put, PutNbi, and Begin without a signal) is copied and held. Held puts go, in a
// shuffled order, at the next ordering point that needs them:
//   - a signal, an atomic or a get to PE p releases the puts held for p first;
//   - Fence, Flush and Quiet release every held put;
//   - a put held longer than `delay` goes (a thread of this transport), as does everything
//     once more than `max_held` are held, so data without an ordering point still lands.
// Everything else is passed on unchanged. debug_state()'s network counters add `reordered`:
// the puts that went out of the order they were issued in.
//
// Thread-safety: as RemoteTransport; the held puts are guarded by one mutex, held while they
// and the ordering operation that released them are passed on (so no later operation can
// overtake them).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backends/transport/remote_transport.h"
#include "base/mutex.h"

namespace hyper_parallel::shmem::transport {

class ReorderingTransport final : public RemoteTransport {
 public:
  struct Options {
    std::uint32_t seed = 1;                      ///< the shuffle's
    std::chrono::microseconds delay{500};        ///< the longest a put is held
    std::size_t max_held = 64;                   ///< beyond this many, every held put goes
  };

  ReorderingTransport(std::unique_ptr<RemoteTransport> inner, Options options);
  ~ReorderingTransport() override;

  std::string name() const override { return "reordering over " + inner_->name(); }
  std::string version() const override { return inner_->version(); }
  Status Register(void* base, std::uint64_t bytes, std::string* blob) override {
    return inner_->Register(base, bytes, blob);
  }
  Status Connect(int rank, const std::vector<std::string>& blobs, const std::vector<bool>& remote,
                 const std::vector<bool>& watched, LostFn lost) override {
    return inner_->Connect(rank, blobs, remote, watched, std::move(lost));
  }
  void ReportLost(int pe) override { inner_->ReportLost(pe); }
  Status Start(Liveness liveness, const std::atomic<bool>* abort, Doorbell* own_bell,
               WaitPolicy policy) override;
  void Close() override;

  Status Put(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes,
             Audience audience) override;
  Status PutSignal(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes,
                   const RemoteSignal& signal, Audience audience) override;
  Status Begin(Outbound* out, int pe, std::uint64_t offset, const void* source,
               std::uint64_t bytes, const RemoteSignal& signal, Audience audience) override;
  Status Finish(Outbound* out) override { return inner_->Finish(out); }
  Status Atomic(int pe, const AtomicRequest& request, std::uint64_t* old) override;
  Status Fence() override;
  Status PutNbi(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes,
                std::shared_ptr<const void> hold) override;
  Status GetNbi(int pe, void* destination, std::uint64_t offset, std::uint64_t bytes,
                std::shared_ptr<const void> hold) override;
  Status CompleteNbi() override { return inner_->CompleteNbi(); }
  Status Quiet() override;
  Status Get(int pe, void* destination, std::uint64_t offset, std::uint64_t bytes) override;
  Status Flush() override;
  bool Poll() override { return inner_->Poll(); }

  Armed Arm(Doorbell* bell) override { return inner_->Arm(bell); }
  void Sleep(Doorbell* bell, std::chrono::nanoseconds timeout) override {
    inner_->Sleep(bell, timeout);
  }

  bool remote(int pe) const override { return inner_->remote(pe); }
  std::string PathName(int pe) const override { return inner_->PathName(pe); }
  RemoteCounters counters() const override;
  int endpoints() const override { return inner_->endpoints(); }

  /// Puts held now (for tests).
  std::size_t held() const;

  void AddWaiters(int delta) override;

 private:
  struct Held {
    int pe = -1;
    std::uint64_t offset = 0;
    std::vector<std::byte> data;
    Audience audience = Audience::kAnyone;
    std::uint64_t order = 0;  // the issue order
    std::chrono::steady_clock::time_point since;
  };
  // Holds a copy of a put (releasing everything when more than max_held are held).
  Status Hold(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes,
              Audience audience);
  // Passes on, shuffled, the held puts to `pe` (every PE: -1) that `due` accepts; the first
  // failure.
  template <class Due>
  Status Release(int pe, Due&& due) REQUIRES(mutex_);
  Status ReleaseAll() REQUIRES(mutex_);
  void RunReleaser();

  std::unique_ptr<RemoteTransport> inner_;
  const Options options_;
  mutable Mutex mutex_;
  std::vector<Held> held_ GUARDED_BY(mutex_);
  std::mt19937 shuffle_ GUARDED_BY(mutex_);
  std::uint64_t issued_ GUARDED_BY(mutex_) = 0;
  bool stopping_ GUARDED_BY(mutex_) = false;
  CondVar wake_;
  std::thread releaser_;
  std::atomic<std::uint64_t> reordered_{0};
};

}  // namespace hyper_parallel::shmem::transport
