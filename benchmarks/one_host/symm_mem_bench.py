"""torch's symmetric-memory API (torch.distributed._symmetric_memory) on the HPS CPU backend,
beside gloo, and a MoE layer written against that API beside MegaMoE, in one run.

Run by benchmarks/run.py (--symm-mem, --symm-mem-only) through the package's launcher, one
process per PE, or by hand:

    python -m hyper_parallel.core.multicore.shmem.launch --nproc N benchmarks/one_host/symm_mem_bench.py \
        [--test ops,moe] [--sizes 4096,262144,4194304] [--reps 48] [--warmup 2] \
        [--configs NAME:H:I:E:K:T[,...]] [--moe-reps 32]

Importing hyper_parallel.core.multicore.shmem registers the allocator "HPS" for the CPU device:
symm_mem.empty(..., device="cpu") allocates on the symmetric heap (collective: every PE, same
sizes, same order) and torch.ops.symm_mem.* run on CPU processes over the gloo WORLD. Where
symm_mem.get_backend("cpu") is not "HPS" (the backend is not installed), the symm_mem paths
are skipped with a note and the rest runs.

ops: per size (bytes of each PE's input), each symm_mem operator beside the gloo calls a torch
  user would write instead, on the same inputs (integer-valued float32, so every sum is exact),
  checked equal to gloo's result before any timing:
    one_shot_all_reduce, two_shot_all_reduce_   dist.all_reduce (one measurement for both)
    reduce_scatter_out (split_last_dim=False)   dist.reduce_scatter_single (gloo has it)
    all_to_all_vdev                              the split exchange (all_to_all_single of the
                                                 splits, .tolist()) and all_to_all_single with
                                                 the split lists; "known": the latter alone
    all_to_all_vdev_2d (MoE dispatch)            the same, then the permute from rank-major to
                                                 expert-major (index_select by a permutation
                                                 built from the counts); "known": no exchange
    all_to_all_vdev_2d_offset (MoE combine)      the inverse permute, then all_to_all_single
                                                 back with the dispatch's split lists
  The all-to-alls move rows of 64 float32 (256 B) with random splits per destination (the 2-D
  ones over 4 local experts per PE); all_to_all_vdev_2d is also checked with major_align=8, and
  the combine's output against the dispatch's input (the round trip). A failed check or a
  raised error is reported with its text and that row is not timed.
moe: one MoE layer's forward (torch.no_grad) three ways, same weights, same tokens per PE:
    torch_symm  TorchSymmMemMoE (symm_mem_moe.py), written only against torch's API: router top-k, rows
                dispatched by all_to_all_vdev_2d (the splits exchanged inside the op), local
                experts on the expert-major output, combined back by all_to_all_vdev_2d_offset,
                weighted sum (symmetric buffers allocated once, as torchtitan's dispatcher does)
    mega        MegaMoE (hyper_parallel.core.multicore.mega_moe), its default path
    a2a         AllToAllMoE: the same layer over gloo's all_to_all_single
  checked before timing: torch_symm's output against a2a's (bitwise) and every path against
  the dense reference (mega_moe.reference.dense_moe).

Timing: ROUNDS blocks of repetitions per path, the paths alternating which goes first; each
repetition after shmem.barrier() (aligns the PEs more tightly than gloo), `warmup` untimed
repetitions at the start of each block; a repetition's time is the slowest PE's (rank max);
figures are medians. PE 0 prints one JSON line per row and progress lines on stderr; every PE
uses one torch intra-op thread. Every symmetric tensor is dropped, in the same order on every
PE, then shmem.symm_mem_shutdown() (collective) ends the symm_mem use before the runtime closes
and the process group is destroyed.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/
from common.results import emit_on, session  # noqa: E402
from common.units import KIB, MIB, csv, human, ints, shape_text, shapes  # noqa: E402
from one_host.symm_mem_gloo import (ALIGN, OpsSize, expected_offsets, gloo_a2a,  # noqa: E402
                                    gloo_combine, gloo_dispatch)
from one_host.symm_mem_moe import TorchSymmMemMoE  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.abspath(__file__)
ROUNDS = 4           # blocks per path, alternating the order
SIZES = (4 * KIB, 256 * KIB, 4 * MIB)
# NAME: hidden, intermediate, experts, top-k, tokens per PE.
CONFIGS = {"small": (64, 128, 8, 2, 256), "medium": (256, 512, 8, 2, 512),
           "wide": (512, 64, 8, 2, 1024)}
OPS = ("one_shot_all_reduce", "two_shot_all_reduce_", "reduce_scatter_out", "all_to_all_vdev",
       "all_to_all_vdev_2d", "all_to_all_vdev_2d_offset")
GLOO_NAME = {"one_shot_all_reduce": "dist.all_reduce", "two_shot_all_reduce_": "dist.all_reduce",
             "reduce_scatter_out": "dist.reduce_scatter_single",
             "all_to_all_vdev": "split exchange + all_to_all_single",
             "all_to_all_vdev_2d": "split exchange + all_to_all_single + permute",
             "all_to_all_vdev_2d_offset": "inverse permute + all_to_all_single"}


def config_text(name: str) -> str:
    """NAME:H:I:E:K:T, the --configs form of CONFIGS[name]."""
    return shape_text(name, CONFIGS[name])


def _progress(rank: int, text: str) -> None:
    if rank == 0:
        print(f"progress symm_mem: {text}", file=sys.stderr, flush=True)


def _rank_max(values: list) -> list:
    """Element-wise maximum over the PEs of equally long lists (gloo, outside any timing)."""
    import torch.distributed as dist
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, values)
    return [max(column) for column in zip(*gathered)]


def _agree(error: str | None) -> list:
    """Every PE's error text (None: fine), gathered: so that every PE skips a failed row."""
    import torch.distributed as dist
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, error)
    return [f"PE {pe}: {e}" for pe, e in enumerate(gathered) if e]


def _attempt(fn) -> str | None:
    """Runs fn; its exception as one line of text (None when it returned)."""
    try:
        fn()
        return None
    except Exception as exc:  # noqa: BLE001 (reported, not hidden)
        text = f"{type(exc).__name__}: {exc}".replace("\n", " | ")
        return text[:400]


def time_paths(bodies: dict, reps: int, warmup: int) -> dict:
    """{path: rank-max microseconds per repetition}. bodies: {path: (prepare or None, call)};
    prepare runs before the barrier, untimed."""
    from hyper_parallel.core.multicore import shmem
    paths = list(bodies)
    samples = {path: [] for path in paths}
    block = max(1, reps // ROUNDS)
    for round_ in range(ROUNDS):
        for path in (paths if round_ % 2 == 0 else paths[::-1]):
            prepare, call = bodies[path]
            for rep in range(warmup + block):
                if prepare is not None:
                    prepare()
                shmem.barrier()
                started = time.perf_counter()
                call()
                elapsed = time.perf_counter() - started
                if rep >= warmup:
                    samples[path].append(elapsed * 1e6)
    return {path: _rank_max(values) for path, values in samples.items()}


def bench_ops(size_bytes: int, args, rank: int, world: int, symm: bool) -> list:
    """The operator rows of one size (see the module docstring)."""
    import torch
    import torch.distributed as dist
    ops = torch.ops.symm_mem
    s = OpsSize(size_bytes, rank, world, symm)
    g = s.group
    ne = s.ne
    s.send_list = s.splits.tolist()
    s.send_list2d = s.splits2d.view(world, ne).sum(1).tolist()
    records = []
    try:
        # -- gloo's results, the references -----------------------------------------------
        ref_sum = s.reduce_in.clone()
        dist.all_reduce(ref_sum)
        ref_rs = torch.empty(s.reduce_in.numel() // world)
        dist.reduce_scatter_single(ref_rs, s.reduce_in)
        ref_a2a = gloo_a2a(s, exchange=True)
        ref_grouped, ref_by_source = gloo_dispatch(s, exchange=True)
        s.known_recv2d = ref_by_source.reshape(-1).clone()
        ref_back = gloo_combine(s, ref_grouped, ref_by_source)
        assert torch.equal(ref_back, s.rows_in), "gloo's own dispatch + combine round trip"
        # The splits the 2-D dispatch must return: expert-major [ne, W].
        splits_em = ref_by_source.t().reshape(-1).tolist()

        def check(op: str, fn) -> list:
            if not symm:
                return ["symm_mem backend HPS not installed"]
            errors = _agree(_attempt(fn))
            if errors:
                _progress(rank, f"{op} {human(size_bytes)} x{world}: FAILED: {errors[0][:200]}")
            return errors

        def expect(cond: bool, what: str) -> None:
            if not cond:
                raise AssertionError(what)

        def c_one_shot():
            got = ops.one_shot_all_reduce(s.s_reduce, "sum", g)
            expect(torch.equal(got, ref_sum), "one_shot_all_reduce result differs from "
                   f"dist.all_reduce (max abs diff {(got - ref_sum).abs().max().item()})")
            expect(torch.equal(s.s_reduce, s.reduce_in), "one_shot_all_reduce changed its input")

        def c_two_shot():
            s.s_reduce.copy_(s.reduce_in)
            got = ops.two_shot_all_reduce_(s.s_reduce, "sum", g)
            expect(torch.equal(s.s_reduce, ref_sum), "two_shot_all_reduce_ in-place result "
                   f"differs (max abs diff {(s.s_reduce - ref_sum).abs().max().item()})")
            expect(got is None or got.data_ptr() == s.s_reduce.data_ptr(),
                   "two_shot_all_reduce_ did not return its input")
            s.s_reduce.copy_(s.reduce_in)

        def c_reduce_scatter():
            s.s_reduce_out.fill_(-1)
            got = ops.reduce_scatter_out(s.s_reduce, g, False, s.s_reduce_out)
            expect(torch.equal(s.s_reduce_out, ref_rs), "reduce_scatter_out differs from "
                   f"dist.reduce_scatter_single (max abs diff "
                   f"{(s.s_reduce_out - ref_rs).abs().max().item()})")
            expect(got is None or got.data_ptr() == s.s_reduce_out.data_ptr(),
                   "reduce_scatter_out did not return its output")

        def c_a2a():
            s.s_out.fill_(-1)
            s.s_out_so.fill_(-1)
            ops.all_to_all_vdev(s.s_in, s.s_out, s.s_splits, s.s_out_so, g)
            got_splits, got_offsets = s.s_out_so.tolist()
            expect(got_splits == s.known_recv, f"all_to_all_vdev out splits {got_splits}, "
                   f"expected {s.known_recv}")
            expect(got_offsets == [sum(s.known_recv[:i]) for i in range(world)],
                   f"all_to_all_vdev out offsets {got_offsets}")
            n = sum(s.known_recv)
            expect(torch.equal(s.s_out[:n], ref_a2a), "all_to_all_vdev rows differ from "
                   "all_to_all_single's")
            expect(torch.equal(s.s_splits, s.splits), "all_to_all_vdev changed in_splits")

        def c_dispatch(align):
            s.s_out.fill_(-1)
            s.s_out_so2d.fill_(-1)
            if align is None:
                ops.all_to_all_vdev_2d(s.s_in, s.s_out, s.s_splits2d, s.s_out_so2d, g)
            else:
                ops.all_to_all_vdev_2d(s.s_in, s.s_out, s.s_splits2d, s.s_out_so2d, g,
                                       major_align=align)
            got_splits, got_offsets = s.s_out_so2d.tolist()
            expect(got_splits == splits_em, f"all_to_all_vdev_2d (major_align={align}) out "
                   f"splits {got_splits}, expected {splits_em}")
            want = expected_offsets(splits_em, world, ne, align or 1)
            expect(got_offsets == want, f"all_to_all_vdev_2d (major_align={align}) out offsets "
                   f"{got_offsets}, expected {want}")
            got = torch.cat([s.s_out[o:o + n] for n, o in zip(got_splits, got_offsets)])
            expect(torch.equal(got, ref_grouped), f"all_to_all_vdev_2d (major_align={align}) "
                   "rows differ from all_to_all_single + permute")
            expect(torch.equal(s.s_splits2d, s.splits2d), "all_to_all_vdev_2d changed in_splits")

        def c_combine():
            c_dispatch(None)  # the combine's input: the dispatch's output and its layout
            s.s_back.fill_(-1)
            s.s_back_so.fill_(-1)
            ops.all_to_all_vdev_2d_offset(s.s_out, s.s_back, s.s_out_so2d, s.s_back_so, g)
            got_splits, got_offsets = s.s_back_so.tolist()
            sent = s.splits2d.tolist()
            expect(got_splits == sent, f"all_to_all_vdev_2d_offset out splits {got_splits}, "
                   f"expected the dispatch's in_splits {sent}")
            expect(got_offsets == [sum(sent[:i]) for i in range(len(sent))],
                   f"all_to_all_vdev_2d_offset out offsets {got_offsets}")
            expect(torch.equal(s.s_back, ref_back), "all_to_all_vdev_2d_offset rows differ "
                   "from the inverse permute + all_to_all_single (and from the dispatch's input)")

        plain = s.reduce_in.clone()

        def refill_plain():
            plain.copy_(s.reduce_in)

        def refill_symm():
            s.s_reduce.copy_(s.reduce_in)

        rs_out = torch.empty(s.reduce_in.numel() // world)
        checks = {
            "one_shot_all_reduce": [("", c_one_shot)],
            "two_shot_all_reduce_": [("", c_two_shot)],
            "reduce_scatter_out": [("", c_reduce_scatter)],
            "all_to_all_vdev": [("", c_a2a)],
            "all_to_all_vdev_2d": [("", lambda: c_dispatch(None)),
                                   (f" major_align={ALIGN}", lambda: c_dispatch(ALIGN))],
            "all_to_all_vdev_2d_offset": [("", c_combine)],
        }
        results = {}
        for op in OPS:
            if op not in args.ops:
                continue
            errors = []
            for suffix, fn in checks[op]:
                errors += [e if not suffix else f"{suffix.strip()}: {e}" for e in check(op, fn)]
            results[op] = errors
        # -- timing ----------------------------------------------------------------------
        ok = {op: symm and not errors for op, errors in results.items()}

        def timed(op: str, bodies: dict) -> dict:
            _progress(rank, f"{op} {human(size_bytes)} x{world}")
            if not ok[op]:
                bodies = {path: body for path, body in bodies.items() if path != "symm"}
            return time_paths(bodies, args.reps, args.warmup)

        def record(op: str, samples: dict) -> None:
            records.append({"symm": "op", "op": op, "pes": world, "bytes": size_bytes,
                            "gloo_equivalent": GLOO_NAME[op], "checked": ok[op],
                            "errors": results[op], "samples_us": samples,
                            "load": os.getloadavg()[0]})

        if "one_shot_all_reduce" in results or "two_shot_all_reduce_" in results:
            bodies = {"gloo": (refill_plain, lambda: dist.all_reduce(plain))}
            if "one_shot_all_reduce" in results and ok["one_shot_all_reduce"]:
                bodies["one_shot"] = (None, lambda: ops.one_shot_all_reduce(s.s_reduce, "sum", g))
            if "two_shot_all_reduce_" in results and ok["two_shot_all_reduce_"]:
                bodies["two_shot"] = (refill_symm,
                                      lambda: ops.two_shot_all_reduce_(s.s_reduce, "sum", g))
            _progress(rank, f"all_reduce {human(size_bytes)} x{world}")
            got = time_paths(bodies, args.reps, args.warmup)
            for op, path in (("one_shot_all_reduce", "one_shot"),
                             ("two_shot_all_reduce_", "two_shot")):
                if op in results:
                    mine = {"symm": got[path]} if path in got else {}
                    record(op, {"gloo": got["gloo"], **mine})
        # The other operators, in this order: each path's call (no refill between calls).
        paths = {
            "reduce_scatter_out": {
                "symm": lambda: ops.reduce_scatter_out(s.s_reduce, g, False, s.s_reduce_out),
                "gloo": lambda: dist.reduce_scatter_single(rs_out, s.reduce_in)},
            "all_to_all_vdev": {
                "symm": lambda: ops.all_to_all_vdev(s.s_in, s.s_out, s.s_splits, s.s_out_so, g),
                "gloo": lambda: gloo_a2a(s, exchange=True),
                "gloo_known": lambda: gloo_a2a(s, exchange=False)},
            "all_to_all_vdev_2d": {
                "symm": lambda: ops.all_to_all_vdev_2d(s.s_in, s.s_out, s.s_splits2d,
                                                       s.s_out_so2d, g),
                "gloo": lambda: gloo_dispatch(s, exchange=True),
                "gloo_known": lambda: gloo_dispatch(s, exchange=False)},
            "all_to_all_vdev_2d_offset": {
                "symm": lambda: ops.all_to_all_vdev_2d_offset(s.s_out, s.s_back, s.s_out_so2d,
                                                              s.s_back_so, g),
                "gloo": lambda: gloo_combine(s, ref_grouped, ref_by_source)},
        }
        for op, calls in paths.items():
            if op not in results:
                continue
            if op == "all_to_all_vdev_2d_offset" and ok[op]:
                # The input layout the timed combines read: one default dispatch.
                ops.all_to_all_vdev_2d(s.s_in, s.s_out, s.s_splits2d, s.s_out_so2d, g)
            record(op, timed(op, {path: (None, call) for path, call in calls.items()}))
        return records
    finally:
        s.release()


def parse_configs(text: str) -> list:
    return shapes(text, "NAME:H:I:E:K:T")


def bench_moe(name: str, shape: tuple, args, rank: int, world: int, symm: bool) -> dict:
    import torch
    import torch.distributed as dist
    from hyper_parallel.core.multicore.mega_moe import AllToAllMoE, MegaMoE, dense_moe
    hidden, inter, experts, top_k, tokens = shape
    if experts % world:
        raise SystemExit(f"{name}: {experts} experts do not split over {world} PEs")
    torch.manual_seed(11)
    mega = MegaMoE(hidden, inter, experts, top_k)
    a2a = AllToAllMoE(hidden, inter, experts, top_k)
    dense = mega.dense_weights()  # collective
    a2a.load_dense_weights(**dense)
    x = torch.randn(tokens, hidden, generator=torch.Generator().manual_seed(100 + rank))
    layers = {"mega": mega, "a2a": a2a}
    torch_symm = None
    errors, checks = [], {}
    try:
        if symm:
            gate, up, down = (t.detach() for t in mega.local_expert_weights())
            torch_symm = TorchSymmMemMoE(mega.router.detach(), gate, up, down, top_k, tokens,
                                         dist.group.WORLD)
        with torch.no_grad():
            reference = dense_moe(x, dense["router"], dense["gate_proj"], dense["up_proj"],
                                  dense["down_proj"], top_k)
            outputs = {path: layer(x) for path, layer in layers.items()}
            if torch_symm is not None:
                got = {}
                failed = _agree(_attempt(lambda: got.update(out=torch_symm(x))))
                if failed:
                    errors += [f"torch_symm forward: {e}" for e in failed]
                    _progress(rank, f"moe {name} x{world}: torch_symm FAILED: {failed[0][:200]}")
                else:
                    outputs["torch_symm"] = got["out"]
            else:
                errors.append("torch_symm: symm_mem backend HPS not installed")
            diffs = {path: (out - reference).abs().max().item() for path, out in outputs.items()}
            for path, diff in diffs.items():
                checks[f"{path}~dense"] = f"{max(_rank_max([diff])):.1e}"
            if "torch_symm" in outputs:
                same = torch.equal(outputs["torch_symm"], outputs["a2a"])
                agreed = all(v for v in _gather_flags(same))
                checks["torch_symm==a2a"] = "yes" if agreed else "NO"
                if not agreed:
                    gap = (outputs["torch_symm"] - outputs["a2a"]).abs().max().item()
                    errors.append("torch_symm's output is not bitwise a2a's (max abs diff "
                                  f"{max(_rank_max([gap])):.2e})")
            bad = [p for p, d in diffs.items() if not max(_rank_max([d])) <= 1e-4]
            if bad:
                errors.append(f"far from the dense reference: {bad}")
        bodies = {path: (None, (lambda layer: lambda: layer(x))(layer))
                  for path, layer in layers.items()}
        if "torch_symm" in outputs:
            bodies["torch_symm"] = (None, lambda: torch_symm(x))
        _progress(rank, f"moe {name} x{world}: timing {', '.join(bodies)}")
        with torch.no_grad():
            samples = time_paths(bodies, args.moe_reps, args.warmup)
        return {"symm": "moe", "config": name, "pes": world,
                "shape": {"hidden": hidden, "intermediate": inter, "experts": experts,
                          "top_k": top_k, "tokens": tokens},
                "samples_us": samples, "checks": checks, "errors": errors,
                "load": os.getloadavg()[0]}
    finally:
        if torch_symm is not None:
            torch_symm.close()
        mega.close()
        a2a.close()


def _gather_flags(flag: bool) -> list:
    import torch.distributed as dist
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, bool(flag))
    return gathered


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--test", default="ops,moe", help="ops, moe or both (default)")
    parser.add_argument("--sizes", default=csv(SIZES),
                        help="bytes of each PE's input, comma separated")
    parser.add_argument("--ops", default=",".join(OPS), help="the operators to measure")
    parser.add_argument("--configs", default=",".join(config_text(n) for n in CONFIGS),
                        help="MoE configurations NAME:H:I:E:K:T (T: tokens per PE)")
    parser.add_argument("--reps", type=int, default=48, help="timed calls per path (ops)")
    parser.add_argument("--moe-reps", type=int, default=32, help="timed calls per path (moe)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed calls per block")
    args = parser.parse_args()
    args.ops = [op for op in args.ops.split(",") if op]
    unknown = set(args.ops) - set(OPS)
    if unknown:
        parser.error(f"unknown --ops {sorted(unknown)}; known: {', '.join(OPS)}")
    tests = set(args.test.split(","))

    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem
    from hyper_parallel.core.multicore import shmem  # registers the HPS CPU backend
    from hyper_parallel.core.multicore.shmem.launch import init_process_group_from_environment

    torch.set_num_threads(1)  # one PE per core
    if not init_process_group_from_environment():
        raise SystemExit("symm_mem_bench: start it through the launcher (see --help)")
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        backend = symm_mem.get_backend("cpu")
    except Exception as exc:  # noqa: BLE001
        backend = f"error: {exc}"
    symm = backend == "HPS"
    emit_on(rank, {"symm": "backend", "pes": world, "backend": backend,
                   "torch": torch.__version__})
    if rank == 0 and not symm:
        print(f"symm_mem_bench: symm_mem.get_backend('cpu') is {backend!r}, not 'HPS': the "
              "symm_mem paths are skipped", file=sys.stderr, flush=True)
    with session(rank), shmem.acquire_shmem():
        if "ops" in tests:
            for size in ints(args.sizes):
                for record in bench_ops(size, args, rank, world, symm):
                    emit_on(rank, record)
        if "moe" in tests:
            for name, shape in parse_configs(args.configs):
                emit_on(rank, bench_moe(name, shape, args, rank, world, symm))
        gc.collect()  # every symm_mem tensor is gone: then end the symm_mem use
        shutdown = getattr(shmem, "symm_mem_shutdown", None)
        if symm and shutdown is not None:
            shutdown()  # collective: gives back the allocations every PE released
        shmem.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
