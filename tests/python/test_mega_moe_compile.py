"""MegaMoE under torch.compile(fullgraph=True) on 2 PEs: the layer (inductor) and the decoder of
mega_moe.model (aot_eager) compile with no graph break, give eager's outputs and gradients
(fp32, within 1e-5 of each tensor's largest element) at several token counts per PE, and
compile once for all of them; the profiler shows the call's phases as named ranges, on the
thread that runs each.

Each test runs with an inductor cache of its own (a fresh directory, shared by its PEs), so
that no graph compiled before a schema change is reused; dynamo's in-memory caches are reset
before and after (the PE pool outlives the test). The PEs take turns at inductor's compilation
(a file lock; the backward compiled with the forward), so that the second finds the first's
kernels in the shared cache instead of compiling them again on the same two cores."""

from __future__ import annotations

import fcntl
import os
import tempfile

import pytest
import torch

from hyper_parallel.core.multicore.mega_moe import (MegaMoE, MegaMoEResources, compile_model)

pytestmark = pytest.mark.host_only("inductor's CPU code and the host stream's executor thread")

H, I, IS, E, K = 32, 24, 16, 4, 2  # H >= 32: see _layer_against_eager
TOKEN_COUNTS = (19, 26, 33)  # per PE (PE 1: +3), all > 16


@pytest.fixture
def inductor_cache():
    with tempfile.TemporaryDirectory(prefix="hps-inductor-") as path:
        yield path


def _fresh_compiler(cache: str) -> None:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"  # no compile workers: one core per PE
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()


def _inductor_in_turn(cache: str):
    """Inductor (compile_fx) under a lock shared by the PEs, the backward compiled at once."""
    from torch._inductor.compile_fx import compile_fx

    def backend(graph, example_inputs):
        with open(os.path.join(cache, "compile.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            with torch._functorch.config.patch(force_non_lazy_backward_lowering=True):
                return compile_fx(graph, example_inputs)

    return backend


def _grads(module, x) -> list:
    out = [x.grad.clone()]
    for p in module.parameters():
        g = p.grad
        out.append(None if g is None else (g.to_local() if hasattr(g, "to_local") else g).clone())
    return out


def _close(a, b) -> bool:
    # fp32, 1e-5 of the tensor's largest magnitude: inductor's fused kernels sum in another
    # order than eager's, so an element near zero may differ by a few ulps of the larger ones
    # (seen: 2.4e-7 on a gradient whose largest element is about 0.1).
    scale = float(b.abs().max()) if b.numel() else 0.0
    return torch.allclose(a, b, rtol=1e-5, atol=max(1e-7, 1e-5 * scale))


def _layer_against_eager(rank, size, cache):
    """The layer compiled whole (inductor) against eager, forward and backward, at three token
    counts per PE, with one compilation. H is 32: with H + T <= 32, inductor's CPU
    decomposition of a small matmul (the gated shared expert's backward) guards on T and
    would recompile at T > 32 - H (a property of tiny models, documented)."""
    _fresh_compiler(cache)
    torch.manual_seed(3)
    with MegaMoEResources(H, E, K, max_tokens=64) as resources:
        layer = MegaMoE(H, I, E, K, shared_intermediate_size=IS, gated_shared_expert=True,
                        resources=resources)

        def step(x, g):
            return (layer(x) * g).sum()

        x0 = torch.randn(TOKEN_COUNTS[0] + 3 * rank, H, requires_grad=True)
        explained = torch._dynamo.explain(step)(x0, torch.ones_like(x0))
        assert explained.graph_break_count == 0, explained.break_reasons
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        compiled = compile_model(step, backend=_inductor_in_turn(cache))
        for count in TOKEN_COUNTS:
            generator = torch.Generator().manual_seed(10 * count + rank)
            x = torch.randn(count + 3 * rank, H, generator=generator).requires_grad_(True)
            g = torch.randn(count + 3 * rank, H, generator=generator)
            loss = compiled(x, g)
            loss.backward()
            counts = layer.group_tokens_per_expert.clone()
            got = _grads(layer, x)
            layer.zero_grad()
            x.grad = None
            expected = step(x, g)
            expected.backward()
            assert _close(loss, expected), (count, float(loss), float(expected))
            assert torch.equal(counts, layer.group_tokens_per_expert)
            for a, b in zip(got, _grads(layer, x)):
                assert (a is None and b is None) or _close(a, b), (count, (a - b).abs().max())
            layer.zero_grad()
        # One graph for every token count: no recompilation.
        assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1, \
            dict(torch._dynamo.utils.counters["stats"])
        # The compiled call shows its ops and the phases inside them.
        names = _profiled_names(lambda: compiled(x, g).backward())
        assert {"hps_moe::forward", "hps_moe::backward"} <= names, sorted(names)
        assert {"hps_moe::count_exchange", "hps_moe::dispatch", "hps_moe::expert_0",
                "hps_moe::expert_1", "hps_moe::combine", "hps_moe::wait_results"} <= names
    torch._dynamo.reset()
    return True


def test_the_layer_compiles_whole_and_matches_eager_without_recompiling(pes, inductor_cache):
    assert all(pes(2).run(_layer_against_eager, inductor_cache, timeout=600))


def _decoder_against_eager(rank, size, cache):
    """The decoder (two MegaMoE layers sharing resources, attention, norms, LM head, loss)
    compiled whole against eager: the loss and every parameter's gradient at three sequence
    lengths, one compilation. aot_eager: the same graphs as inductor's input, at a fraction
    of the compile time (inductor is the layer's test)."""
    from hyper_parallel.core.multicore.mega_moe.model import DecoderConfig, MoEDecoder, lm_loss
    _fresh_compiler(cache)
    config = DecoderConfig(hidden_size=32, layers=2, sequence=24, batch=2)
    model = MoEDecoder(config, "shmem")
    try:
        def step(tokens):
            return lm_loss(model(tokens), tokens)

        compiled = compile_model(step, backend="aot_eager")  # fullgraph: a break would raise
        for sequence in (24, 17, 12):
            tokens = torch.randint(0, config.vocab_size, (2, sequence + rank),
                                   generator=torch.Generator().manual_seed(sequence + rank))
            model.zero_grad()
            loss = compiled(tokens)
            loss.backward()
            got = [p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad
                   for p in model.parameters()]
            got = [g.clone() for g in got]
            model.zero_grad()
            expected = step(tokens)
            expected.backward()
            assert _close(loss, expected), (sequence, float(loss), float(expected))
            for (name, p), a in zip(model.named_parameters(), got):
                b = p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad
                assert _close(a, b), (sequence, name, (a - b).abs().max())
        assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1, \
            dict(torch._dynamo.utils.counters["stats"])
        assert not torch._dynamo.utils.counters["graph_break"], \
            dict(torch._dynamo.utils.counters["graph_break"])
    finally:
        model.close()
        torch._dynamo.reset()
    return True


def test_the_decoder_compiles_whole_and_matches_eager_without_recompiling(pes, inductor_cache):
    assert all(pes(2).run(_decoder_against_eager, inductor_cache, timeout=600))


def _profiled_names(fn, threads: bool = False):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    events = [e for e in prof.events() if e.name.startswith("hps_moe::")]
    if threads:
        return events
    return {e.name for e in events}


def _phases_by_thread(rank, size):
    """Eager forward and backward under torch.profiler: every phase as a named range, the
    dispatch on the caller's thread, the combine on the combine stream's executor thread when
    the combine overlaps the experts, on the caller's when it follows them."""
    torch.manual_seed(3)
    for overlap in (True, False):
        with MegaMoEResources(H, E, K, overlap_combine=overlap) as resources:
            layer = MegaMoE(H, I, E, K, resources=resources)
            x = torch.randn(20 + rank, H, requires_grad=True)
            events = _profiled_names(lambda: layer(x).sum().backward(), threads=True)
            names = {e.name for e in events}
            assert {"hps_moe::count_exchange", "hps_moe::dispatch", "hps_moe::wait_rows",
                    "hps_moe::expert_0", "hps_moe::expert_1", "hps_moe::combine",
                    "hps_moe::wait_results"} <= names, sorted(names)
            caller = {e.thread for e in events if e.name == "hps_moe::dispatch"}
            combine = {e.thread for e in events if e.name == "hps_moe::combine"}
            experts = {e.thread for e in events if e.name.startswith("hps_moe::expert_")}
            # Forward and backward: two calls, each with its dispatch and combine.
            assert sum(e.name == "hps_moe::combine" for e in events) == 2
            assert caller == experts and len(caller) == 1, (caller, experts)
            assert (combine.isdisjoint(caller) if overlap else combine == caller), \
                (overlap, combine, caller)
            layer.close()
    return True


def test_the_profiler_shows_each_phase_on_the_thread_that_runs_it(pes):
    assert all(pes(2).run(_phases_by_thread, timeout=300))
