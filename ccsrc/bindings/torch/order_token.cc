// The order token's life and check (order_token.h; docs/compile.md): made when a lifecycle
// begins (OpenOrderToken, ops.h), dropped when it ends, checked by every custom op of the
// binding and of a consumer's module. Includes ATen's Tensor, not torch's custom-op headers.
#include "bindings/torch/order_token.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <utility>

#include "base/mutex.h"
#include "bindings/torch/errors.h"
#include "bindings/torch/heap_tensors.h"
#include "bindings/torch/ops.h"
#include "runtime/runtime.h"

namespace hyper_parallel::shmem::binding {
namespace {

// The token's value is this process's salt (high 32 bits, never 0) and the lifecycle number
// (low 32 bits): a copy of the live token holds the live value, an earlier lifecycle's token
// the same salt and an older number, any other tensor almost surely neither.
std::uint64_t Salt() {
  static const std::uint64_t salt = [] {
    std::random_device device;
    return (static_cast<std::uint64_t>(device()) & 0x7fffffffu) | 1u;
  }();
  return salt;
}

// The live value (0: no lifecycle); read by every kernel without a lock.
std::atomic<std::int64_t> live_value{0};

// The live token itself (undefined outside a lifecycle), for order_token().
class LiveToken {
 public:
  void Set(at::Tensor token, std::int64_t value) EXCLUDES(mutex_) {
    MutexLock lock(&mutex_);
    token_ = std::move(token);
    live_value.store(value, std::memory_order_release);
  }

  at::Tensor Get() EXCLUDES(mutex_) {
    MutexLock lock(&mutex_);
    return token_;
  }

 private:
  Mutex mutex_;
  at::Tensor token_ GUARDED_BY(mutex_);
};

// Never destroyed, so no tensor is released after torch at exit.
LiveToken& Live() {
  static LiveToken* live = new LiveToken();
  return *live;
}

std::string Lifecycle(std::int64_t value) { return std::to_string(value & 0xffffffffll); }

constexpr const char* kTokenRule =
    "the live lifecycle's order token (shmem._ops.order_token(), a one-element torch.int64 CPU "
    "tensor)";


}  // namespace

at::Tensor OrderToken() {
  at::Tensor token = Live().Get();
  if (!token.defined()) {
    ThrowUnnoted(Status::Assertion(ErrorCode::kInvalidState,
                                   "no live lifecycle: the order token exists from init to "
                                   "shutdown",
                                   {{"state", std::string(RuntimeStateName(
                                                  Runtime::Process().state()))}})
                     .At("order_token", "validate"));
  }
  return token;
}

void CheckOrderToken(const at::Tensor& order, const char* op) {
  const std::int64_t live = live_value.load(std::memory_order_acquire);
  if (live == 0) {
    Throw(Status::Assertion(ErrorCode::kInvalidState,
                            "no live lifecycle: the op needs the order token of a live one",
                            {{"state", std::string(RuntimeStateName(
                                           Runtime::Process().state()))}})
              .At(op, "validate"));
  }
  if (!order.defined() || !order.device().is_cpu() || order.scalar_type() != at::kLong ||
      order.numel() != 1) {
    Check(Contract(op, "order", kTokenRule, order.defined() ? Describe(order) : "None"));
  }
  const std::int64_t value = *order.const_data_ptr<std::int64_t>();
  if (value == live) [[likely]] return;
  if (static_cast<std::uint64_t>(value) >> 32 == Salt()) {
    Throw(Status::Assertion(ErrorCode::kStaleLifecycle,
                            "the order token of an earlier lifecycle (a compiled function or a "
                            "token kept across shutdown and init)",
                            {{"token_lifecycle", Lifecycle(value)},
                             {"live_lifecycle", Lifecycle(live)}})
              .At(op, "validate"));
  }
  Check(Contract(op, "order", kTokenRule, "a tensor that is not an order token"));
}

void OpenOrderToken() {
  const std::uint64_t lifecycle = Runtime::Process().Snapshot().lifecycle;
  const std::int64_t value = static_cast<std::int64_t>(Salt() << 32 | (lifecycle & 0xffffffffu));
  at::Tensor token = at::empty({1}, at::TensorOptions().dtype(at::kLong));
  *token.mutable_data_ptr<std::int64_t>() = value;
  Live().Set(std::move(token), value);
}

void CloseOrderToken() { Live().Set(at::Tensor(), 0); }

}  // namespace hyper_parallel::shmem::binding
