#include "backends/blocking_ops.h"

#include <sys/syscall.h>
#include <unistd.h>

namespace hyper_parallel::shmem {

BlockingOpTable::Scope& BlockingOpTable::Scope::operator=(Scope&& other) noexcept {
  if (this != &other) {
    Reset();
    table_ = other.table_;
    id_ = other.id_;
    other.table_ = nullptr;
    other.id_ = 0;
  }
  return *this;
}

void BlockingOpTable::Scope::Reset() {
  if (table_ != nullptr) table_->Remove(id_);
  table_ = nullptr;
  id_ = 0;
}

BlockingOpTable::Scope BlockingOpTable::Enter(std::string_view operation, std::string stream,
                                              Describe describe) {
  Scope scope;
  MutexLock lock(&mutex_);
  Entry entry;
  entry.op.id = next_id_++;
  entry.op.operation = std::string(operation);
  entry.op.stream = std::move(stream);
  entry.op.since = std::chrono::system_clock::now();
  entry.describe = std::move(describe);
  scope.table_ = this;
  scope.id_ = entry.op.id;
  entries_.push_back(std::move(entry));
  return scope;
}

void BlockingOpTable::Remove(std::uint64_t id) {
  MutexLock lock(&mutex_);
  entries_.remove_if([id](const Entry& entry) { return entry.op.id == id; });
}

std::vector<BlockingOp> BlockingOpTable::Snapshot() const {
  MutexLock lock(&mutex_);
  std::vector<BlockingOp> ops;
  ops.reserve(entries_.size());
  for (const Entry& entry : entries_) {
    BlockingOp op = entry.op;
    if (entry.describe) op.waiting_for = entry.describe();
    ops.push_back(std::move(op));
  }
  return ops;
}

long CurrentThreadId() {
  thread_local const long tid = static_cast<long>(::syscall(SYS_gettid));
  return tid;
}

std::string DefaultStreamLabel(long tid) {
  return "default (thread " + std::to_string(tid == 0 ? CurrentThreadId() : tid) + ")";
}

}  // namespace hyper_parallel::shmem
