// The messages UcxTransport sends on its messages path (ucx_transport.h; docs/scale-out.md, "The messages path").
//
// Every operation on a remote peer is one UCX active message: a fixed header (WireHeader) and,
// for a put, its data. The target's handler checks the header (Validate), lands the data in its
// own segment at `offset`, then applies the signal the header carries: a set or an add of a
// 32- or 64-bit word, seq_cst, after the data, followed by the target's doorbell. Messages from
// one source are applied in the order that source sent them; a rendezvous put (its data follows
// later) holds back the rest of its source's messages until its data has landed
// (DeferredMessage), so "a signal lands after every earlier put to that PE" holds for every
// size.
//
// Pure value types and functions; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "backends/atomic_op.h"
#include "backends/transport/remote_transport.h"

namespace hyper_parallel::shmem::transport {

enum class WireKind : std::uint8_t {
  kPut = 1,         ///< data (possibly none) to `offset`, then the signal if any
  kGet = 2,         ///< answer with `bytes` from `offset` in a kGetReply carrying `token`
  kGetReply = 3,    ///< the data a kGet asked for
  kFlush = 4,       ///< answer with a kFlushReply once every earlier message landed
  kFlushReply = 5,  ///< `token` is the answered flush's
  kHello = 6,       ///< the sender made its endpoint to this PE (it says farewell here at close)
  kLost = 7,        ///< the sender knows PE `value` is lost (passed on once by each PE)
  kAtomic = 8,      ///< `atomic` on the `width`-byte word at `offset` with `value` (and
                    ///< `compare`); a `token` other than 0 asks for a kAtomicReply
  kAtomicReply = 9, ///< `value` is the word's old value; `token` the answered atomic's
};

/// WireHeader::flags.
inline constexpr std::uint8_t kWireOrdered = 1;  ///< lands after every earlier message's data

/// The header of every message (the active message's user header).
struct WireHeader {
  std::uint32_t magic = kMagic;
  WireKind kind = WireKind::kPut;
  SignalAction action = SignalAction::kNone;
  std::uint8_t width = 0;
  std::uint8_t flags = 0;    ///< kWireOrdered: the first message after a fence
  std::int32_t source = -1;  ///< the sender's PE
  std::uint32_t atomic = 0;  ///< kAtomic: the AtomicOp
  std::uint64_t offset = 0;         ///< where the data lands (kPut), or is read (kGet)
  std::uint64_t bytes = 0;          ///< the data's length
  std::uint64_t signal_offset = 0;  ///< the signal's word (kPut with an action)
  std::int64_t value = 0;           ///< the signal's operand
  std::uint64_t token = 0;          ///< pairs a reply with its request
  std::uint64_t compare = 0;        ///< kAtomic: a compare-and-swap's expected value

  static constexpr std::uint32_t kMagic = 0x48505358;  // "HPSX": with atomics
};
static_assert(sizeof(WireHeader) == 64, "the header is part of the wire format");

/// The header of a kPut from PE `source`: `bytes` of data to `offset`, then `signal`.
inline WireHeader PutHeader(int source, std::uint64_t offset, std::uint64_t bytes,
                            const RemoteSignal& signal) {
  WireHeader header;
  header.kind = WireKind::kPut;
  header.source = source;
  header.offset = offset;
  header.bytes = bytes;
  header.action = signal.action;
  header.width = signal.width;
  header.signal_offset = signal.offset;
  header.value = signal.value;
  return header;
}

/// Why `header` (with `length` data bytes) cannot be applied to a segment of
/// `segment_bytes` bytes from a job of `pes` PEs; empty when it can.
inline std::string_view Validate(const WireHeader& header, std::uint64_t length,
                                 std::uint64_t segment_bytes, int pes) {
  if (header.magic != WireHeader::kMagic) return "bad magic";
  if (header.source < 0 || header.source >= pes) return "source out of range";
  auto inside = [segment_bytes](std::uint64_t offset, std::uint64_t bytes) {
    return offset <= segment_bytes && bytes <= segment_bytes - offset;
  };
  switch (header.kind) {
    case WireKind::kPut:
      if (length != header.bytes) return "data length differs from the header";
      if (!inside(header.offset, header.bytes)) return "data outside the segment";
      if (header.action == SignalAction::kNone) return {};
      if (header.action != SignalAction::kSet && header.action != SignalAction::kAdd) {
        return "unknown signal action";
      }
      if (header.width != 4 && header.width != 8) return "signal width not 4 or 8";
      if (header.signal_offset % header.width != 0) return "signal word not aligned";
      if (!inside(header.signal_offset, header.width)) return "signal word outside the segment";
      return {};
    case WireKind::kGet:
      if (!inside(header.offset, header.bytes)) return "read outside the segment";
      return {};
    case WireKind::kAtomic:
      if (length != 0) return "an atomic carries no data";
      if (header.atomic >= static_cast<std::uint32_t>(kAtomicOps)) return "unknown atomic";
      if (header.width != 4 && header.width != 8) return "atomic width not 4 or 8";
      if (header.offset % header.width != 0) return "atomic word not aligned";
      if (!inside(header.offset, header.width)) return "atomic word outside the segment";
      return {};
    case WireKind::kAtomicReply:
    case WireKind::kGetReply:
    case WireKind::kFlush:
    case WireKind::kFlushReply:
    case WireKind::kHello:
      return {};
    case WireKind::kLost:
      if (header.value < 0 || header.value >= pes) return "lost PE out of range";
      return {};
  }
  return "unknown kind";
}

/// A message that arrived while an earlier one of its source was still landing: kept, in
/// order, until that one has (UcxTransport's inbound queue).
struct DeferredMessage {
  WireHeader header;
  std::vector<std::byte> data;  ///< an eager message's data, copied
  void* rendezvous = nullptr;   ///< a rendezvous message's UCX data descriptor
};

}  // namespace hyper_parallel::shmem::transport
