"""PE-side MegaMoE measurements: the SHMEM path beside the all-to-all path, in one run.

Run by benchmarks/run.py (--moe) through the package's launcher, one process per PE:

    python -m hyper_parallel.core.multicore.shmem.launch --nproc N benchmarks/moe/moe_bench.py \
        --test step --configs NAME:H:I:IS:E:K:LAYERS:SEQ:BATCH[,...] [--warmup 3] [--steps 7]
    python -m hyper_parallel.core.multicore.shmem.launch --nproc N benchmarks/moe/moe_bench.py \
        --test memory --configs ...
    python -m hyper_parallel.core.multicore.shmem.launch --nproc N benchmarks/moe/moe_bench.py \
        --test comm --configs NAME:H:I:IS:E:K:LAYERS:SEQ:BATCH[,...] [--reps 30]
    python -m hyper_parallel.core.multicore.shmem.launch --nproc N benchmarks/moe/moe_bench.py \
        --test compiled --configs ... [--warmup 3] [--steps 7]
    (any of them) [--device cpu|cuda]

step: the full training step of the small decoder (mega_moe.model): zero_grad, forward,
  backward, dense all-reduce, AdamW, on both paths built from the same seed with the routers
  frozen (both see the same load). After the warm-up steps, each step runs both paths in
  alternating order, each after a barrier; a step's time is the slowest PE's (rank max). Also
  per path: the time spent in the MoE layers' dispatch and combine (the all-to-all path's
  count exchanges, all-to-alls and regrouping by expert; what the SHMEM calls spent outside
  the experts' computations), the same less the time spent waiting for the last PE to reach
  each MoE call, the step's CPU floor (the least wall time the cores could run the PEs' CPU
  time of the step in: their total over the cores), and the SHMEM pipeline's overlap counter (experts that started while a later
  expert's rows were still arriving).
compiled: the training step of each path eager and with its forward and loss compiled
  (torch.compile, inductor; the SHMEM path through mega_moe.compile_model: one graph,
  fullgraph, the token count symbolic; the all-to-all path with torch.compile(dynamic=True),
  which breaks its graph at the all-to-alls and their splits): four steps per round, in an
  order that turns every round, each after a barrier, rank max. Also the compile time (the
  first compiled step, rank max), each path's graph breaks (torch._dynamo.explain) and the
  graphs dynamo compiled in all. Every step takes the same tokens (step 0's), so the routes
  and the all-to-all's split sizes stay fixed: the all-to-all path's compiled graphs take its
  split sizes as constants and would recompile at every new split otherwise. The backward,
  the gradient reduction and AdamW are the same eager code on every side (the backward runs
  the compiled backward graphs).
memory: per path, the peak resident memory of a step above the resident set before it
  (VmHWM after a reset, with malloc returning every block of 64 KiB or more when freed) and
  the symmetric heap bytes held; in a launch of its own, since it changes the allocator.
comm: dispatch + combine alone for one layer's worth of routed rows (the count exchange,
  the rows to their owners, the rows back; the experts are the identity), SHMEM against
  all_to_all_single over gloo (NCCL with --device cuda): ROUNDS blocks of repetitions per
  path, the paths alternating which goes first, each repetition after a barrier, rank max.
  SHMEM twice: "shmem", the rows back in this PE's return buffer (finish(copy=False): a view
  valid until the next call, as the layer's backward reads them), and "shmem_copy", then
  copied out into a tensor of the caller's own (run()'s default: one more pass over them).

--device cuda (default cpu): each PE on GPU LOCAL_RANK % device count, the SHMEM CUDA backend
  (HYPER_PARALLEL_SHMEM_BACKEND=cuda unless set; a package built with CUDA), the process group
  "cpu:gloo,cuda:nccl" (the a2a path's all-to-alls and both paths' dense all-reduce on NCCL),
  models, optimizers and tokens on the GPU. NCCL refuses two ranks on one GPU, so with fewer
  GPUs than PEs (or none) every PE exits 77 and PE 0 says why. Every measured region ends
  with torch.cuda.synchronize(). What differs from cpu:
  - step: the a2a path's communication time is its layers' clock, whose every reading on a GPU
    synchronises the device (reference.CommClock.now), as do the arrival marks of its MoE
    calls; so the a2a step carries those synchronisations (about ten per MoE layer per step). The SHMEM path's
    communication time is null: its waits and experts are queued on the stream and its
    PipelineStats times are the host's enqueue times, and no per-step measure of the
    communication alone exists outside the pipeline; its step time is measured. started_early
    is null (not counted on a GPU).
  - memory: torch.cuda.max_memory_allocated over two steps above torch.cuda.memory_allocated
    before them (torch's allocator only: not the symmetric heap, reported as heap_bytes, nor
    NCCL's buffers).
  - comm: both paths on CUDA tensors (counts included), each repetition synchronised.

PE 0 prints one JSON line per configuration (with a "device" field); every PE uses one torch
intra-op thread.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import re
import sys
import time

import torch
import torch.distributed as dist

from hyper_parallel.core.multicore import shmem
from hyper_parallel.core.multicore.mega_moe import MegaMoEResources
from hyper_parallel.core.multicore.mega_moe.model import (DecoderConfig, MoEDecoder,
                                                          make_optimizer, parameter_count,
                                                          reduce_gradients, synthetic_tokens,
                                                          train_step)
from hyper_parallel.core.multicore.mega_moe.reference import all_to_all
from hyper_parallel.core.multicore.shmem.launch import init_process_group_from_environment

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/
from common.results import emit_on, session  # noqa: E402
from common.units import shapes  # noqa: E402

PATHS = ("shmem", "a2a")
ROUNDS = 4  # comm: blocks per path
SKIP = 77  # exit status: this machine cannot run the measurement (--device cuda)


def parse_configs(text: str) -> list:
    """NAME:H:I:IS:E:K:LAYERS:SEQ:BATCH entries, comma separated -> [(name, DecoderConfig)]."""
    out = []
    for name, (h, i, shared, e, k, layers, seq, batch) in shapes(
            text, "NAME:H:I:IS:E:K:LAYERS:SEQ:BATCH"):
        heads = max(1, h // 32)
        out.append((name, DecoderConfig(vocab_size=4 * h, hidden_size=h, layers=layers,
                                        heads=heads, kv_heads=max(1, heads // 2), num_experts=e,
                                        top_k=k, intermediate_size=i,
                                        shared_intermediate_size=shared, sequence=seq,
                                        batch=batch)))
    return out


def _rank_max(values: list) -> list:
    """Element-wise maximum over the PEs of equally long lists (gloo, outside any timing)."""
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, values)
    return [max(column) for column in zip(*gathered)]


def _synchronize(device: str) -> None:
    """Waits for every queued GPU operation (every stream: NCCL's too) on cuda; nothing on cpu."""
    if device == "cuda":
        torch.cuda.synchronize()


def _cuda_refusal() -> str | None:
    """Why --device cuda cannot run here (None: it can): no GPU, or fewer GPUs than PEs on
    this machine (NCCL refuses two ranks on one GPU: "Duplicate GPU detected"), or no NCCL."""
    pes = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus == 0:
        return "no CUDA device visible to torch"
    if gpus < pes:
        return (f"{gpus} GPU(s) for {pes} PEs: NCCL needs a GPU per PE "
                "(it refuses two ranks on one GPU)")
    if not dist.is_nccl_available():
        return "this torch has no NCCL"
    return None


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as status:
            match = re.search(field + r":\s+(\d+)", status.read())
        return int(match.group(1)) if match else None
    except OSError:
        return None


def _reset_peak() -> bool:
    """Resets VmHWM to the current resident set (Linux 4.0+); False where not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
        return True
    except OSError:
        return False


def _exact_allocator() -> bool:
    """Makes glibc's malloc map every block of 64 KiB or more on its own and unmap it when
    freed, and trims what it holds: the resident set then follows the live tensors, so its
    high-water mark is a step's peak (for the memory phase only: it slows allocation)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3
        ok = libc.mallopt(m_mmap_threshold, 64 * 1024) == 1
        ok = libc.mallopt(m_trim_threshold, 0) == 1 and ok
        libc.malloc_trim(0)
        return ok
    except OSError:
        return False


def _peak_step_bytes(model, optimizer, config, rank: int, device: str = "cpu") -> int | None:
    """The peak resident memory of two steps above the resident set before them (None where
    the allocator or /proc does not allow the measurement); on cuda, torch's peak allocated
    GPU memory of two steps above what was allocated before them."""
    gc.collect()
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        for step in range(2):
            train_step(model, optimizer, synthetic_tokens(config, rank, 10_000 + step).cuda())
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before
    if not _exact_allocator() or not _reset_peak():
        return None
    before = _status_kib("VmRSS")
    for step in range(2):
        train_step(model, optimizer, synthetic_tokens(config, rank, 10_000 + step))
    peak = _status_kib("VmHWM")
    return None if before is None or peak is None else (peak - before) * 1024


def _record_arrivals(moe, entries: list, device: str = "cpu") -> None:
    """Appends perf_counter() (one clock for every process of the machine) to `entries` when
    a MoE layer's forward and its backward begin (on cuda, once the device has caught up)."""
    inner = moe.forward_routed

    def now() -> float:
        _synchronize(device)
        return time.perf_counter()

    def forward_routed(x, topk_ids, topk_weights):
        entries.append(now())
        out = inner(x, topk_ids, topk_weights)
        if out.requires_grad:
            out.register_hook(lambda grad: entries.append(now()))
        return out

    moe.forward_routed = forward_routed


def _net_of_arrival(comm_us: list, arrivals: list) -> list:
    """Per step, the slowest PE's communication time less the time it spent waiting for the
    last PE to reach each MoE call (arrival skew: no transport removes it)."""
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, [comm_us, arrivals])
    out = []
    for step in range(len(comm_us)):
        calls = list(zip(*(pe[1][step] for pe in gathered)))  # per call: every PE's entry
        net = []
        for pe, (comm, entries) in enumerate(gathered):
            wait = sum(max(call) - call[pe] for call in calls) * 1e6
            net.append(comm[step] - wait)
        out.append(max(net))
    return out


def _cpu_floor(cpu_us: list) -> list:
    """Per step, the least wall time the machine's cores could run the PEs' CPU time in: the
    CPU time of every thread of every PE (process_time), summed over the PEs, over the cores
    they may use. A step at its floor kept every core busy throughout: with computation, or
    with a wait that spun (with a core per PE the host backend spins up to 200 us, then
    yields up to 100 us, before it sleeps; with more PEs than cores it sleeps at once; on a
    GPU, torch's synchronisations spin)."""
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, (cpu_us, sorted(os.sched_getaffinity(0))))
    cores = len(set().union(*(cpus for _, cpus in gathered)))  # every PE's cpus (pinned or not)
    return [sum(step) / cores for step in zip(*(pe for pe, _ in gathered))]


def bench_step(name: str, config: DecoderConfig, args, rank: int, size: int) -> dict:
    device = args.device
    cuda = device == "cuda"
    models = {path: MoEDecoder(config, path, seed=1).to(device) for path in PATHS}
    try:
        for model in models.values():
            model.freeze_routers()
        optimizers = {path: make_optimizer(model) for path, model in models.items()}
        times = {path: [] for path in PATHS}
        comm = {path: [] for path in PATHS}
        cpu = {path: [] for path in PATHS}
        skew = {path: [] for path in PATHS}
        arrivals = {path: [] for path in PATHS}  # per step: when this PE entered each call
        # On cuda the SHMEM path has no communication time to net (see the docstring).
        measured = ("a2a",) if cuda else PATHS
        for path in measured:
            for layer in models[path].layers:
                _record_arrivals(layer.moe, arrivals[path], device)
        total = args.warmup + args.steps
        for step in range(total):
            order = PATHS if step % 2 == 0 else PATHS[::-1]  # alternate who goes first
            tokens = synthetic_tokens(config, rank, step).to(device)
            for path in order:
                _synchronize(device)
                shmem.barrier()  # aligns the PEs more tightly than gloo
                arrivals[path].clear()
                spent = models[path].communication_s()
                cpu_started = time.process_time()
                started = time.perf_counter()
                train_step(models[path], optimizers[path], tokens)
                _synchronize(device)
                elapsed = time.perf_counter() - started
                cpu_spent = time.process_time() - cpu_started
                if step >= args.warmup:
                    times[path].append(elapsed * 1e6)
                    cpu[path].append(cpu_spent * 1e6)
                    comm[path].append((models[path].communication_s() - spent) * 1e6)
                    skew[path].append(list(arrivals[path]))
            if rank == 0:
                print(f"progress step {name} x{size}: {step + 1}/{total}", file=sys.stderr,
                      flush=True)
        stats = models["shmem"].resources.stats
        gathered = [None] * size
        dist.all_gather_object(gathered, [stats.started_early, stats.experts])
        record = {
            "moe": "step", "config": name, "pes": size, "device": device,
            "shape": config.__dict__,
            "parameters": parameter_count(models["a2a"]), "warmup": args.warmup,
            "steps_us": {path: _rank_max(times[path]) for path in PATHS},
            "comm_us": {path: _rank_max(comm[path]) if path in measured else None
                        for path in PATHS},
            "comm_net_us": {path: _net_of_arrival(comm[path], skew[path]) if path in measured
                            else None for path in PATHS},
            "cpu_floor_us": {path: _cpu_floor(cpu[path]) for path in PATHS},
            "started_early": None if cuda else sum(row[0] for row in gathered),
            "experts": sum(row[1] for row in gathered),
        }
        return record
    finally:
        for model in models.values():
            model.close()


def _compiled_loss(model, path: str):
    """The model's forward and loss compiled: (compiled function, its graph breaks)."""
    from hyper_parallel.core.multicore.mega_moe import compile_model
    from hyper_parallel.core.multicore.mega_moe.model import lm_loss

    def loss(tokens):
        return lm_loss(model(tokens), tokens)

    probe = synthetic_tokens(model.config, dist.get_rank(), 0)
    breaks = torch._dynamo.explain(loss)(probe).graph_break_count
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    if path == "shmem":
        return compile_model(loss), breaks
    return torch.compile(loss, dynamic=True), breaks


def _timed_step(model, optimizer, loss_fn, tokens) -> float:
    """zero_grad, forward and loss (loss_fn), backward, gradient reduction, AdamW: seconds."""
    shmem.barrier()
    started = time.perf_counter()
    optimizer.zero_grad(set_to_none=False)
    loss_fn(tokens).backward()
    reduce_gradients(model)
    optimizer.step()
    return time.perf_counter() - started


def bench_compiled(name: str, config: DecoderConfig, args, rank: int, size: int) -> dict:
    """Eager against compiled training steps of both paths (see the module docstring)."""
    from hyper_parallel.core.multicore.mega_moe.model import lm_loss
    if args.device != "cpu":
        raise SystemExit("--test compiled: cpu only")
    sides = [(path, mode) for path in PATHS for mode in ("eager", "compiled")]
    models = {side: MoEDecoder(config, side[0], seed=1) for side in sides}
    try:
        fns, breaks, compile_s = {}, {}, {}
        for (path, mode), model in models.items():
            model.freeze_routers()
            if mode == "eager":
                fns[(path, mode)] = (lambda m: lambda tokens: lm_loss(m(tokens), tokens))(model)
            else:
                fns[(path, mode)], breaks[path] = _compiled_loss(model, path)
        optimizers = {side: make_optimizer(model) for side, model in models.items()}
        times = {side: [] for side in sides}
        total = args.warmup + args.steps
        tokens = synthetic_tokens(config, rank, 0)  # fixed routes (see the docstring)
        for step in range(total):
            turn = step % len(sides)
            for side in sides[turn:] + sides[:turn]:  # every side first in turn
                elapsed = _timed_step(models[side], optimizers[side], fns[side], tokens)
                if step == 0 and side[1] == "compiled":
                    compile_s[side[0]] = elapsed
                if step >= args.warmup:
                    times[side].append(elapsed * 1e6)
            if rank == 0:
                print(f"progress compiled {name} x{size}: {step + 1}/{total}", file=sys.stderr,
                      flush=True)
        return {
            "moe": "compiled", "config": name, "pes": size, "device": "cpu",
            "shape": config.__dict__, "warmup": args.warmup,
            "steps_us": {f"{path}_{mode}": _rank_max(times[(path, mode)])
                         for path, mode in sides},
            "compile_s": {path: max(_rank_max([compile_s[path]])) for path in PATHS},
            "graph_breaks": breaks,
            "graphs": int(torch._dynamo.utils.counters["stats"]["unique_graphs"]),
        }
    finally:
        for model in models.values():
            model.close()


def bench_memory(name: str, config: DecoderConfig, args, rank: int, size: int) -> dict:
    """Peak step memory of both paths (in a process of its own: it changes the allocator)."""
    device = args.device
    models = {path: MoEDecoder(config, path, seed=1).to(device) for path in PATHS}
    try:
        for model in models.values():
            model.freeze_routers()
        optimizers = {path: make_optimizer(model) for path, model in models.items()}
        for path in PATHS:  # warm up: optimizer state and resident buffers exist before
            train_step(models[path], optimizers[path], synthetic_tokens(config, rank, 0).to(device))
        peaks = [_peak_step_bytes(models[path], optimizers[path], config, rank, device)
                 for path in PATHS]
        gathered = [None] * size
        dist.all_gather_object(gathered, peaks)
        return {"moe": "memory", "config": name, "pes": size, "device": device,
                "peak_step_bytes": {path: (None if any(row[i] is None for row in gathered)
                                           else max(row[i] for row in gathered))
                                    for i, path in enumerate(PATHS)},
                "heap_bytes": {"shmem": models["shmem"].resources.symmetric_bytes, "a2a": 0}}
    finally:
        for model in models.values():
            model.close()


def bench_comm(name: str, config: DecoderConfig, args, rank: int, size: int) -> dict:
    """Dispatch + combine of one layer's routed rows, identity experts, both paths."""
    device = args.device
    h, e, k = config.hidden_size, config.num_experts, config.top_k
    tokens = config.batch * config.sequence
    generator = torch.Generator().manual_seed(rank)
    x = torch.randn(tokens, h, generator=generator)
    ids = torch.rand(tokens, e, generator=generator).topk(k, dim=-1).indices.reshape(-1)
    order = torch.argsort(ids, stable=True)
    rows = x[order // k].contiguous().to(device)
    local_counts = torch.bincount(ids, minlength=e).to(device)
    local = e // size
    paths = ("shmem", "shmem_copy", "a2a")
    samples = {path: [] for path in paths}
    with MegaMoEResources(h, e, k, max_tokens=tokens) as resources:

        def shmem_once(copy: bool = False):
            counts = resources.exchange_counts(local_counts)
            layout = resources.layout(counts)
            return resources.run("forward", rows, counts, layout, lambda _local, got: got,
                                 copy=copy)

        def a2a_once():
            received = torch.empty_like(local_counts)
            dist.all_to_all_single(received, local_counts)
            send = local_counts.view(size, local).sum(1).tolist()
            recv = received.view(size, local).sum(1).tolist()
            there = all_to_all(rows, recv, send)
            return all_to_all(there, send, recv)

        assert torch.equal(shmem_once(), rows) and torch.equal(a2a_once(), rows)
        assert torch.equal(shmem_once(copy=True), rows)
        bodies = {"shmem": shmem_once, "shmem_copy": lambda: shmem_once(copy=True),
                  "a2a": a2a_once}
        # Blocks of repetitions, alternating which path goes first: each path is timed in the
        # steady state a training loop on it would see, both under the same machine noise.
        block = max(1, args.reps // ROUNDS)
        for round_ in range(ROUNDS):
            for path in (paths if round_ % 2 == 0 else paths[::-1]):
                for rep in range(args.warmup + block):
                    _synchronize(device)
                    shmem.barrier()  # aligns the PEs more tightly than gloo
                    started = time.perf_counter()
                    bodies[path]()
                    _synchronize(device)
                    if rep >= args.warmup:
                        samples[path].append((time.perf_counter() - started) * 1e6)
        return {"moe": "comm", "config": name, "pes": size, "device": device,
                "shape": config.__dict__,
                "rows_per_pe": rows.shape[0], "bytes_per_pe": rows.numel() * rows.element_size(),
                "samples_us": {path: _rank_max(samples[path]) for path in paths}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--test", choices=("step", "memory", "comm", "compiled"),
                        required=True)
    parser.add_argument("--configs", required=True)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=7)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="cpu (gloo, host backend) or cuda (a GPU per PE, NCCL, the CUDA "
                             "backend)")
    args = parser.parse_args()
    if args.steps < 5 or args.warmup < 3:
        parser.error("--steps must be at least 5 and --warmup at least 3")
    backend = "gloo"
    if args.device == "cuda":
        why = _cuda_refusal()
        if why is not None:
            if int(os.environ.get("RANK", "0")) == 0:
                print(f"moe_bench: skipped, --device cuda: {why}", file=sys.stderr, flush=True)
            return SKIP
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
        os.environ.setdefault("HYPER_PARALLEL_SHMEM_BACKEND", "cuda")  # read at the first call
        backend = "cpu:gloo,cuda:nccl"
    torch.set_num_threads(1)  # one PE per core
    init_process_group_from_environment(backend=backend)
    rank, size = dist.get_rank(), dist.get_world_size()
    with session(rank), shmem.acquire_shmem():
        for name, config in parse_configs(args.configs):
            if config.num_experts % size:
                raise SystemExit(f"{name}: {config.num_experts} experts do not split over "
                                 f"{size} PEs")
            bench = {"step": bench_step, "memory": bench_memory, "comm": bench_comm,
                     "compiled": bench_compiled}[args.test]
            emit_on(rank, bench(name, config, args, rank, size))
        shmem.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
