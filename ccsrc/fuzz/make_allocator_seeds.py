#!/usr/bin/env python3
# Writes the hand-made seeds of corpus/allocator/ from readable operation lists, in the input
# layout allocator_fuzz.cc reads (a heap size, then opcode bytes with their operands). The
# seeds are binary; this is how to read them and how to redo them if the layout changes.
# Inputs libFuzzer found (found-*) are not touched.
#
#   python3 ccsrc/fuzz/make_allocator_seeds.py
import os
import struct


def u8(v):
    return bytes([v & 0xFF])


def u16(v):
    return struct.pack("<H", v)


def u32(v):
    return struct.pack("<I", v)


def u64(v):
    return struct.pack("<Q", v)


# Heap sizes (PickHeapBytes).
def heap_tiny(n): return u8(0) + u8(n)
def heap_granules(g): return u8(1) + u8(g - 1)  # 1..256 granules of 64 bytes
def heap_ragged(g, r): return u8(2) + u16(g) + u8(r)
def heap_mib(m): return u8(3) + u8(m - 1)  # 1..8 MiB
def heap_max(d): return u8(4) + u8(d)  # Config::kMaxHeapBytes - d


# Request sizes (PickBytes).
ZERO = u8(0)
def small(v): return u8(1) + u8(v)
def medium(v): return u8(2) + u16(v)
def granules(g): return u8(3) + u8(g)
def heap_mod(v): return u8(4) + u32(v)
def largest_plus(d): return u8(5) + u8(d)  # largest free block + signed d
def u64_max_minus(v): return u8(6) + u8(v)
def heap_minus(v): return u8(7) + u8(v)


# Alignments (PickAlignment): 1 << n for n < 22, or one of the special values.
def align(log2): return u8(log2)
A_ZERO, A_THREE, A_48, A_4MIB, A_2POW63, A_U64_MAX = (u8(192 + i) for i in range(6))
def a_raw(v): return u8(198) + u64(v)
A_2MIB = u8(199)


# Operations (the opcode switch in AllocatorFuzzer::Run). Indices pick among live blocks in id
# order, or among ids freed in this lifecycle, or among ids of earlier lifecycles.
def allocate(b, a): return u8(0) + b + a
def place_commit(b, a): return u8(2) + b + a
def free(i): return u8(3) + u16(i)
def free_freed(i): return u8(5) + u16(i)
def free_view(i, offset_delta, bytes_delta):
    return u8(6) + u16(i) + u8(offset_delta) + u8(bytes_delta)
def resolve(i, offset_kind, offset_arg, bytes_kind, bytes_arg):
    return u8(7) + u16(i) + u8(offset_kind) + offset_arg + u8(bytes_kind) + bytes_arg
def mark_leaked(i): return u8(9) + u8(1) + u16(i)
def mark_leaked_id(small_id, v): return u8(9) + u8(0) + u8(0 if small_id else 1) + u8(v)
def end_lifecycle(reclaim_leaks): return u8(10) + u8(reclaim_leaks)
def begin_lifecycle(heap): return u8(11) + heap  # when no lifecycle is running
def restart_lifecycle(reclaim_leaks, heap): return u8(11) + u8(reclaim_leaks) + heap
def stale_id(i): return u8(12) + u8(1) + u16(i)
def never_issued(kind, v=0): return u8(12) + u8(0) + u8(kind) + (u8(v) if kind else b"")
def release_offset32(v): return u8(13) + u8(1) + u32(v)
def release_offset64(v): return u8(13) + u8(0) + u64(v)
def free_all(order): return u8(14) + u8(order)  # 0 by id, 1 by offset descending, 2 even/odd
def fill(b, a, place_then_commit): return u8(15) + b + a + u8(place_then_commit)


SEEDS = {
    "alloc-free-basic": heap_granules(16) + allocate(small(10), align(0)) + allocate(ZERO, align(6))
    + allocate(small(100), align(12)) + free(0) + free_all(0),
    "fill-granules-free-even-odd": heap_granules(64) + fill(granules(1), align(6), 0) + free_all(2),
    "fill-odd-sizes-free-reverse": heap_granules(200) + fill(medium(1000), align(9), 1)
    + free_all(1),
    "best-fit-tightest-hole": heap_granules(64) + allocate(granules(8), align(6))
    + allocate(granules(1), align(6)) + allocate(granules(2), align(6))
    + allocate(granules(1), align(6)) + free(0) + free(1) + allocate(granules(2), align(6)),
    "invalid-alignments": heap_mib(2) + allocate(small(8), A_ZERO) + allocate(small(8), A_THREE)
    + allocate(small(8), A_48) + allocate(small(8), A_4MIB) + allocate(small(8), A_2POW63)
    + allocate(small(8), A_U64_MAX) + place_commit(small(8), a_raw(0x40000))
    + allocate(small(8), A_2MIB),
    "huge-and-boundary-sizes": heap_ragged(100, 37) + allocate(u64_max_minus(0), align(0))
    + allocate(heap_minus(0), align(0)) + allocate(largest_plus(1), align(0))
    + allocate(largest_plus(0), align(0)) + allocate(heap_mod(5000), align(3)) + free_all(0)
    + allocate(largest_plus(0), align(6)) + allocate(ZERO, align(0)),
    "double-free-after-reuse": heap_granules(32) + allocate(medium(256), align(6)) + free(0)
    + allocate(medium(256), align(6)) + free_freed(0) + release_offset32(64) + free(0)
    + free_freed(1),
    "stale-after-lifecycle": heap_granules(32) + allocate(small(8), align(6))
    + allocate(small(8), align(6)) + free(0) + end_lifecycle(0) + stale_id(0) + stale_id(1)
    + never_issued(1, 0) + allocate(small(8), align(6)) + begin_lifecycle(heap_granules(8))
    + stale_id(1) + allocate(small(8), align(6)) + never_issued(1, 3),
    "leaks-reclaimed-at-end": heap_granules(32) + allocate(small(1), align(6))
    + allocate(small(2), align(6)) + allocate(small(3), align(6)) + mark_leaked(0)
    + mark_leaked(2) + mark_leaked(2) + end_lifecycle(1) + begin_lifecycle(heap_granules(32))
    + stale_id(0) + allocate(small(4), align(6)),
    "leaks-kept-across-begin": heap_granules(32) + allocate(small(1), align(6)) + mark_leaked(0)
    + mark_leaked_id(True, 1) + mark_leaked_id(False, 0) + restart_lifecycle(0, heap_tiny(200))
    + stale_id(0) + allocate(ZERO, align(0)),
    "resolve-views": heap_granules(32) + allocate(medium(256), align(6))
    + resolve(0, 0, u8(100), 1, b"") + resolve(0, 0, u8(100), 2, b"")
    + resolve(0, 1, u8(0), 0, u8(0)) + resolve(0, 1, u8(1), 0, u8(0))
    + resolve(0, 2, u8(1), 0, u8(1)) + resolve(0, 0, u8(0), 3, u64(2**64 - 1))
    + resolve(0, 3, u64(2**64 - 1), 0, u8(1))
    + free_view(0, 0, 0) + free_view(0, 64, -64) + free_view(0, 0, -1) + free(0),
    "zero-byte-allocation-views": heap_granules(4) + allocate(ZERO, align(0))
    + resolve(0, 0, u8(0), 0, u8(0)) + resolve(0, 1, u8(0), 0, u8(0)) + free_view(0, 0, 1)
    + free(0),
    "never-issued-ids": heap_granules(4) + never_issued(0) + allocate(small(1), align(0))
    + never_issued(1, 0) + never_issued(1, 200) + never_issued(2, 0) + never_issued(2, 255)
    + mark_leaked_id(True, 0),
    "release-unknown-offsets": heap_granules(16) + allocate(granules(2), align(6))
    + release_offset32(64) + release_offset32(1) + release_offset32(16 * 64)
    + release_offset64(2**64 - 64) + free(0) + release_offset32(0),
    "heap-below-one-granule": heap_tiny(63) + allocate(ZERO, align(0)) + fill(ZERO, align(0), 1)
    + free_all(0) + restart_lifecycle(0, heap_tiny(0)) + allocate(ZERO, align(0))
    + restart_lifecycle(0, heap_tiny(64)) + allocate(small(64), align(0))
    + allocate(ZERO, align(0)),
    "two-mib-alignment": heap_mib(5) + allocate(small(1), A_2MIB) + allocate(small(1), A_2MIB)
    + allocate(small(1), A_2MIB) + allocate(small(1), A_2MIB) + allocate(small(1), align(0))
    + free(0) + allocate(small(1), A_2MIB) + free_all(2),
    "place-commit-mixed": heap_granules(128) + place_commit(medium(300), align(7))
    + allocate(small(5), align(0)) + place_commit(granules(3), align(10)) + free(0)
    + place_commit(medium(300), align(8)) + fill(small(200), align(6), 1) + free_all(1),
    "fragment-then-coalesce": heap_granules(100) + fill(granules(3), align(6), 0) + free(1)
    + free(2) + free(4) + free(5) + free(7) + allocate(granules(5), align(6))
    + allocate(granules(2), align(7)) + free_all(2),
    "largest-runtime-heap": heap_max(7) + allocate(heap_minus(0), align(0))
    + allocate(heap_minus(200), A_2MIB) + free(0) + allocate(u64_max_minus(0), align(0))
    + allocate(largest_plus(0), A_2MIB) + allocate(heap_mod(2**32 - 1), align(21)) + free_all(2),
}

if __name__ == "__main__":
    corpus = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "allocator")
    os.makedirs(corpus, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(corpus, name), "wb") as seed:
            seed.write(data)
    print(f"wrote {len(SEEDS)} seeds to {corpus}")
