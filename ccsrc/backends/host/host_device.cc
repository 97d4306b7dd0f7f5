#include "backends/host/host_device.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace hyper_parallel::shmem::host {

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

Status HostDevice::Timeout(int slot, std::uint64_t epoch, const std::vector<int>& sources,
                           std::string_view operation, std::string_view waiting_for) const {
  std::string missing = "[";
  for (int source : sources) {
    if (Observed(slot, source) >= epoch) continue;
    missing += (missing.size() > 1 ? "," : "") + std::to_string(source);
  }
  missing += "]";
  return Status::Assertion(ErrorCode::kTimeout, std::string(operation) + " timed out",
                           {{"pe", std::to_string(rank_)},
                            {"waiting_for", std::string(waiting_for)},
                            {"epoch", std::to_string(epoch)},
                            {"missing_pes", missing},
                            {"timeout_ms", std::to_string(timeout_.count())}});
}

CopyWorkers::CopyWorkers(int threads) {
  for (int worker = 1; worker <= threads; ++worker) {
    threads_.emplace_back([this, worker] { Loop(worker); });
  }
}

CopyWorkers::~CopyWorkers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

void CopyWorkers::Run(const std::function<void(int worker)>& body) {
  std::lock_guard<std::mutex> run(run_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    body_ = &body;
    pending_ = static_cast<int>(threads_.size());
    ++generation_;
  }
  start_.notify_all();
  body(0);
  std::unique_lock<std::mutex> lock(mutex_);
  finished_.wait(lock, [this] { return pending_ == 0; });
  body_ = nullptr;
}

void CopyWorkers::Loop(int worker) {
  std::uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    const std::function<void(int)>* body = body_;
    lock.unlock();
    (*body)(worker);
    lock.lock();
    if (--pending_ == 0) finished_.notify_all();
  }
}

int DefaultCopyWorkers(int local_pes, int cap) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::clamp(cores / std::max(1, local_pes), 1, cap);
}

}  // namespace hyper_parallel::shmem::host
