// Atomics on one word of a symmetric heap (docs/atomics.md): what they do, and the one way the
// host backend applies them with the CPU's atomics, whoever asks (this PE, a PE of this host
// through the shared mapping, a PE of another host through a message its target applies).
//
// Pure value types and functions; safe from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace hyper_parallel::shmem {

/// What an atomic does to its word. Every op returns the word's old value to a caller that
/// wants it (the fetching forms); kFetch only reads.
enum class AtomicOp : std::uint8_t {
  kFetch = 0,
  kSet = 1,
  kSwap = 2,
  kCompareSwap = 3,  ///< writes `value` only where the old value equals `compare`
  kAdd = 4,          ///< wraps around modulo 2^width, as C's unsigned arithmetic
  kAnd = 5,
  kOr = 6,
  kXor = 7,
};
inline constexpr int kAtomicOps = 8;

std::string_view AtomicOpName(AtomicOp op);

/// One atomic: `op` on the `width`-byte word (4 or 8) at heap offset `offset`, with the bit
/// patterns of `value` and `compare` (a float's bits; the low `width` bytes count).
struct AtomicRequest {
  std::uint64_t offset = 0;
  std::uint8_t width = 8;
  AtomicOp op = AtomicOp::kFetch;
  std::uint64_t value = 0;
  std::uint64_t compare = 0;
};

namespace internal {

template <class Word>
Word ApplyWord(Word* address, AtomicOp op, Word value, Word compare) {
  std::atomic_ref<Word> word(*address);
  constexpr auto kOrder = std::memory_order_seq_cst;
  switch (op) {
    case AtomicOp::kFetch:
      return word.load(kOrder);
    case AtomicOp::kSet:
    case AtomicOp::kSwap:
      return word.exchange(value, kOrder);
    case AtomicOp::kCompareSwap:
      word.compare_exchange_strong(compare, value, kOrder);
      return compare;  // the old value either way
    case AtomicOp::kAdd:
      return word.fetch_add(value, kOrder);
    case AtomicOp::kAnd:
      return word.fetch_and(value, kOrder);
    case AtomicOp::kOr:
      return word.fetch_or(value, kOrder);
    case AtomicOp::kXor:
      return word.fetch_xor(value, kOrder);
  }
  return word.load(kOrder);
}

}  // namespace internal

/// Applies `request`'s op to the word at `address` (aligned to its width) with the CPU's
/// seq_cst atomics and returns the old value's bits (zero-extended from 32 bits).
inline std::uint64_t ApplyAtomic(std::byte* address, std::uint8_t width, AtomicOp op,
                                 std::uint64_t value, std::uint64_t compare) {
  if (width == 4) {
    return internal::ApplyWord<std::uint32_t>(reinterpret_cast<std::uint32_t*>(address), op,
                                              static_cast<std::uint32_t>(value),
                                              static_cast<std::uint32_t>(compare));
  }
  return internal::ApplyWord<std::uint64_t>(reinterpret_cast<std::uint64_t*>(address), op, value,
                                            compare);
}

/// Whether `op` writes the word (every op but kFetch; a compare-and-swap may not).
constexpr bool Writes(AtomicOp op) { return op != AtomicOp::kFetch; }

}  // namespace hyper_parallel::shmem
