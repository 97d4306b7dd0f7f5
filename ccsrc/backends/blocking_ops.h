// BlockingOpTable: the operations of this process that are blocked right now, so that
// debug_state() can say what a stuck PE waits for (docs/architecture.md, "Threads: nothing waits
// holding the entry mutex"; the fields: docs/api.md, "Diagnostics").
//
// A wait registers itself only once it stops spinning (a wait that is answered at once costs
// nothing here), and deregisters before it returns. Each entry keeps a callback that describes
// what it waits for *now* (the signal word's current value, the PEs that have not arrived),
// evaluated when a snapshot is taken; the memory it reads stays mapped while the entry exists.
//
// Thread-safety: every member may be called from any thread at any time; the table has its own
// mutex and never takes another lock while holding it, except what a describe callback reads
// (atomic loads of mapped memory).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.h"

namespace hyper_parallel::shmem {

/// One blocked operation as a snapshot shows it.
struct BlockingOp {
  std::uint64_t id = 0;
  std::string operation;  ///< wait_signal, barrier, all_gather, empty, free, close, ...
  std::string stream;     ///< "default (thread 1234)" or "stream 3"
  std::chrono::system_clock::time_point since;
  std::string waiting_for;  ///< key=value text, evaluated when the snapshot was taken
};

class BlockingOpTable {
 public:
  using Describe = std::function<std::string()>;

  /// Deregisters its entry when destroyed; movable, default-constructible (no entry).
  class Scope {
   public:
    Scope() = default;
    Scope(Scope&& other) noexcept { *this = std::move(other); }
    Scope& operator=(Scope&& other) noexcept;
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope() { Reset(); }
    void Reset();

   private:
    friend class BlockingOpTable;
    BlockingOpTable* table_ = nullptr;
    std::uint64_t id_ = 0;
  };

  BlockingOpTable() = default;
  BlockingOpTable(const BlockingOpTable&) = delete;
  BlockingOpTable& operator=(const BlockingOpTable&) = delete;

  /// Registers a blocked operation until the returned scope is destroyed.
  [[nodiscard]] Scope Enter(std::string_view operation, std::string stream, Describe describe)
      EXCLUDES(mutex_);

  /// Every registered operation, oldest first, with `waiting_for` evaluated now.
  std::vector<BlockingOp> Snapshot() const EXCLUDES(mutex_);

 private:
  struct Entry {
    BlockingOp op;
    Describe describe;
  };
  void Remove(std::uint64_t id) EXCLUDES(mutex_);

  mutable Mutex mutex_;
  std::uint64_t next_id_ GUARDED_BY(mutex_) = 1;
  std::list<Entry> entries_ GUARDED_BY(mutex_);
};

/// The kernel's id of the calling thread (cached per thread).
long CurrentThreadId();

/// The label of thread `tid`'s default stream, "default (thread <tid>)"; the calling thread's
/// when `tid` is 0.
std::string DefaultStreamLabel(long tid = 0);

}  // namespace hyper_parallel::shmem
