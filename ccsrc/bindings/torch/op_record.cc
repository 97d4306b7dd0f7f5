// The recent-operations record (op_record.h): a ring of kOpRecordCapacity entries under one
// mutex. A record costs a lock and a few stores, small beside the cheapest put.
#include "bindings/torch/op_record.h"

#include <array>

#include "base/mutex.h"

namespace hyper_parallel::shmem::binding {
namespace {

class Ring {
 public:
  void Add(std::string_view op, int pe, CallPath path) EXCLUDES(mutex_) {
    MutexLock lock(&mutex_);
    ++count_;
    entries_[count_ % kOpRecordCapacity] = OpRecordEntry{count_, op, pe, path};
  }

  std::vector<OpRecordEntry> Recent() EXCLUDES(mutex_) {
    MutexLock lock(&mutex_);
    std::vector<OpRecordEntry> out;
    const std::uint64_t first = count_ > kOpRecordCapacity ? count_ - kOpRecordCapacity + 1 : 1;
    for (std::uint64_t sequence = first; sequence <= count_; ++sequence) {
      out.push_back(entries_[sequence % kOpRecordCapacity]);
    }
    return out;
  }

 private:
  Mutex mutex_;
  std::uint64_t count_ GUARDED_BY(mutex_) = 0;
  std::array<OpRecordEntry, kOpRecordCapacity> entries_ GUARDED_BY(mutex_){};
};

Ring& ProcessRing() {
  static Ring* ring = new Ring();  // never destroyed: a record may come late at exit
  return *ring;
}

}  // namespace

void RecordOp(std::string_view op, int pe, CallPath path) { ProcessRing().Add(op, pe, path); }

std::vector<OpRecordEntry> RecentOps() { return ProcessRing().Recent(); }

}  // namespace hyper_parallel::shmem::binding
