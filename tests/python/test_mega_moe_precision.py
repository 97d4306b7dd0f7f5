"""MegaMoE in mixed precision on 1 and 2 PEs: under torch.autocast the routed experts compute in
the autocast dtype (as torch.nn.Linear does) and their rows travel in it, against the dense
layer and the all-to-all layer under the same autocast; .to(dtype) converts a layer and its
own buffers (nothing left behind) or, with shared resources, refuses at once; PEs that
disagree on the dtype, and dtypes the buffers cannot hold, fail alike on every PE."""

from __future__ import annotations

import pytest
import torch
from torch.distributed.tensor import DTensor

from helpers import ON_NPU, device, expect_shmem_error
from hyper_parallel.core.multicore import shmem
from hyper_parallel.core.multicore.mega_moe import (AllToAllMoE, MegaMoE, MegaMoEResources,
                                                    dense_moe)

pytestmark = pytest.mark.cann_fake  # also run on the CANN fake (scripts/test.sh)


def _local(t: torch.Tensor) -> torch.Tensor:
    """This PE's shard of an expert weight's gradient (a DTensor Shard(0) over the EP group)."""
    return t.to_local() if isinstance(t, DTensor) else t

H, I, IS = 16, 24, 8
BF16 = torch.bfloat16


def _tokens(rank: int, count: int, dtype=torch.float32) -> torch.Tensor:
    return torch.randn(count, H, generator=torch.Generator().manual_seed(100 + rank)).to(
        device(), dtype)


def _grads(rank: int, count: int) -> torch.Tensor:
    return torch.randn(count, H, generator=torch.Generator().manual_seed(200 + rank)).to(device())


def _dense(layer, dense: dict, x: torch.Tensor) -> torch.Tensor:
    return dense_moe(x, dense["router"], dense["gate_proj"], dense["up_proj"], dense["down_proj"],
                     layer.top_k, normalize_topk=layer.normalize_topk,
                     shared_gate_proj=dense.get("shared_gate_proj"),
                     shared_up_proj=dense.get("shared_up_proj"),
                     shared_down_proj=dense.get("shared_down_proj"),
                     shared_expert_gate=dense.get("shared_expert_gate"))


def _leaf(dense: dict) -> dict:
    return {name: value.clone().requires_grad_(True) for name, value in dense.items()}


def _live() -> int:
    return len(shmem.debug_state()["live_allocations"])


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _under_autocast(rank, size):
    torch.manual_seed(9)
    experts = 2 * size
    tokens = 11 + 3 * rank
    with MegaMoEResources(H, experts, 2) as resources:
        layer = MegaMoE(H, I, experts, 2, shared_intermediate_size=IS, gated_shared_expert=True,
                        resources=resources)
        dense = layer.dense_weights()
        x, g = _tokens(rank, tokens).requires_grad_(True), _grads(rank, tokens)
        y32 = layer(x).detach()
        layer.zero_grad()
        with torch.autocast("cpu", dtype=BF16):
            assert layer.compute_dtype("cpu") == BF16
            y = layer(x)
        (y * g).sum().backward()
        assert y.dtype == torch.float32  # x's dtype: the routed sum is taken in fp32
        # The rows travelled as bf16 in views of the fp32 buffers (the same allocations).
        for name in ("forward", "backward"):
            direction = resources._directions[name]
            recv, returned = resources._buffers._allocations[name]
            assert direction.recv.dtype == direction.returned.dtype == BF16, name
            assert recv.dtype == torch.float32
            assert _storage(direction.recv) == _storage(recv), name
            assert _storage(direction.returned) == _storage(returned), name
        assert layer.gate_proj.grad.dtype == torch.float32  # the parameters' own dtype
        # The dense layer under the same autocast: its experts are nn.Linear-like matmuls.
        weights = _leaf(dense)
        xr = x.detach().clone().requires_grad_(True)
        with torch.autocast("cpu", dtype=BF16):
            yr = _dense(layer, weights, xr)
        (yr * g).sum().backward()
        assert torch.allclose(y, yr, rtol=1e-2, atol=1e-3), (y - yr).abs().max()
        assert torch.allclose(x.grad, xr.grad, rtol=1e-2, atol=1e-3), (x.grad - xr.grad).abs().max()
        # It computed in bf16: off the fp32 result by bf16's rounding, not by fp32's.
        off = (y.detach() - y32).abs().max().item()
        assert 1e-4 < off < 5e-2, off
        # Expert weights: gradients from every PE's tokens under autocast, at the owner.
        every = _leaf(dense)
        for source in range(size):
            count = 11 + 3 * source
            with torch.autocast("cpu", dtype=BF16):
                ys = _dense(layer, every, _tokens(source, count))
            (ys * _grads(source, count)).sum().backward()
        local = slice(rank * layer.local_experts, (rank + 1) * layer.local_experts)
        diffs = {"y": (y - yr).abs().max().item(), "x.grad": (x.grad - xr.grad).abs().max().item(),
                 "off_fp32": off}
        for name in ("gate_proj", "up_proj", "down_proj"):
            mine, theirs = _local(getattr(layer, name).grad), every[name].grad[local]
            diffs[name] = (mine - theirs).abs().max().item()
            assert torch.allclose(mine, theirs, rtol=2e-2, atol=2e-3), (name, diffs[name])
        # The all-to-all layer under the same autocast computes as MegaMoE does.
        torch.manual_seed(9)
        a2a = AllToAllMoE(H, I, experts, 2, shared_intermediate_size=IS, gated_shared_expert=True)
        xa = x.detach().clone().requires_grad_(True)
        with torch.autocast("cpu", dtype=BF16):
            ya = a2a(xa)
        (ya * g).sum().backward()
        assert torch.allclose(y, ya, rtol=1e-2, atol=1e-3), (y - ya).abs().max()
        assert torch.allclose(x.grad, xa.grad, rtol=1e-2, atol=1e-3)
        for name in ("gate_proj", "up_proj", "down_proj"):
            mine, theirs = _local(getattr(layer, name).grad), _local(getattr(a2a, name).grad)
            assert torch.allclose(mine, theirs, rtol=2e-2, atol=2e-3), name
        # Out of autocast the same buffers carry fp32 rows again.
        assert torch.equal(layer(x).detach(), y32)
        assert resources._directions["forward"].recv.dtype == torch.float32
    return diffs


@pytest.mark.parametrize("size", [1, 2])
def test_under_autocast_the_experts_compute_and_exchange_in_the_autocast_dtype(pes, size):
    if ON_NPU:
        pytest.skip("autocast on NPU tensors: the fake NPU has no AMP (tests/fake_npu/README.md)")
    results = pes(size).run(_under_autocast, timeout=300)
    assert len(results) == size


def _to_dtype(rank, size):
    torch.manual_seed(4)
    experts = 2 * size
    layer = MegaMoE(H, I, experts, 2, shared_intermediate_size=IS,
                    gated_shared_expert=True).to(device())  # helpers.device(): the NPU's too
    try:
        x = _tokens(rank, 9)
        layer(x)
        assert layer.resources.dtype == torch.float32
        held, old, fp32 = _live(), layer.resources, layer.resources._buffers
        fp32_sizes = (fp32.capacity, fp32.return_rows, fp32.held_bytes)
        assert layer.to(BF16) is layer  # nn.Module.to: the layer itself
        assert layer.dtype == BF16 and all(p.dtype == BF16 for p in layer.parameters())
        # The fp32 buffers are closed at the next call (collective), bf16 ones made there.
        xb = x.to(BF16).requires_grad_(True)
        y = layer(xb)
        assert y.dtype == BF16 and layer.resources.dtype == BF16
        assert _live() == held, "the fp32 buffers were freed, bf16 ones took their place"
        assert old.closed and not old._buffers._allocations, "the fp32 buffers are freed"
        bf16 = layer.resources._buffers
        assert (bf16.capacity, bf16.return_rows) == fp32_sizes[:2]
        assert bf16.held_bytes < fp32_sizes[2]  # the same rows in half the bytes (granules)
        dense = layer.dense_weights()
        assert dense["gate_proj"].dtype == BF16
        yr = _dense(layer, dense, xb.detach())
        assert torch.allclose(y.float(), yr.float(), rtol=1e-2, atol=1e-2), (
            (y.float() - yr.float()).abs().max())
        y.float().sum().backward()
        assert layer.gate_proj.grad.dtype == BF16 and torch.isfinite(_local(layer.gate_proj.grad)).all()
        assert xb.grad.dtype == BF16
        # .float() converts back, and .half() to fp16: each call runs in the new dtype.
        layer.float()
        assert layer(x).dtype == torch.float32 and layer.resources.dtype == torch.float32
        layer.half()
        assert layer(x.half()).dtype == torch.float16 and layer.resources.dtype == torch.float16
        assert _live() == held
        # A dtype the buffers cannot take: ShmemTypeError (a TypeError) at once, nothing
        # converted.
        with pytest.raises(shmem.ShmemTypeError, match=r"dtype must be one of torch.float64"):
            layer.to(torch.float8_e4m3fn)
        assert layer.dtype == torch.float16 and layer.gate_proj.dtype == torch.float16
        assert layer(x.half()).dtype == torch.float16
        # A conversion with no call after it: close() frees the old buffers too.
        layer.to(torch.float32)
    finally:
        layer.close()
    assert shmem.debug_state()["live_allocations"] == []
    layer.close()  # idempotent
    return True


@pytest.mark.parametrize("size", [1, 2])
def test_to_dtype_converts_the_layer_and_its_own_buffers_and_leaks_nothing(pes, size):
    assert all(pes(size).run(_to_dtype, timeout=300))


def _shared_refuses(rank, size):
    torch.manual_seed(4)
    with MegaMoEResources(H, 2 * size, 2) as resources:
        layer = MegaMoE(H, I, 2 * size, 2, resources=resources).to(device())
        before = {name: p.detach().clone() for name, p in layer.named_parameters()}
        with pytest.raises(ValueError, match=r"build MegaMoEResources\(\.\.\., "
                           r"dtype=torch.bfloat16\) and the layers with dtype=torch.bfloat16, "
                           r"or run under torch.autocast"):
            layer.to(BF16)
        with pytest.raises(ValueError, match="shared resources"):
            torch.nn.Sequential(layer).half()
        assert layer.dtype == torch.float32
        for name, p in layer.named_parameters():  # nothing converted
            # (local shards: torch.equal of DTensors all-reduces over the mesh, gloo there)
            assert p.dtype == torch.float32 and torch.equal(_local(p), _local(before[name])), name
        layer.to(torch.float32)  # no change of dtype: fine
        x = _tokens(rank, 7)
        assert torch.allclose(layer(x), _dense(layer, layer.dense_weights(), x), rtol=1e-5,
                              atol=1e-6)
        # The layer of the resources' dtype is the supported way.
        with MegaMoEResources(H, 2 * size, 2, dtype=BF16) as bf16:
            half = MegaMoE(H, I, 2 * size, 2, resources=bf16, dtype=BF16).to(device())
            assert half(x.to(BF16)).dtype == BF16
            with pytest.raises(ValueError, match=r"resources must be of hidden_size"):
                MegaMoE(H, I, 2 * size, 2, resources=bf16)  # fp32 layer, bf16 buffers
    # The decoder's layers share its resources: it asks them before converting anything.
    from hyper_parallel.core.multicore.mega_moe.model import DecoderConfig, MoEDecoder

    decoder = MoEDecoder(DecoderConfig(num_experts=2 * size, layers=2, sequence=4, batch=1,
                                       hidden_size=16, intermediate_size=16,
                                       shared_intermediate_size=8), "shmem")
    try:
        with pytest.raises(ValueError, match="shared resources"):
            decoder.to(BF16)
        assert all(p.dtype == torch.float32 for p in decoder.parameters())
    finally:
        decoder.close()
    assert shmem.debug_state()["live_allocations"] == []
    return True


def test_to_dtype_with_shared_resources_raises_at_once_naming_the_supported_way(pes):
    assert all(pes(2).run(_shared_refuses, timeout=300))


def _disagreeing(rank, size):
    torch.manual_seed(4)
    with MegaMoEResources(H, 2 * size, 2) as resources:
        layer = MegaMoE(H, I, 2 * size, 2, resources=resources).to(device())
        x = _tokens(rank, 7)
        # PE 0 under autocast, the others not: every PE raises alike before any row moves.
        with torch.autocast("cpu", dtype=BF16, enabled=rank == 0):
            error = expect_shmem_error("COLLECTIVE_MISMATCH", layer, x)
        assert "field=dtype" in str(error), error
        assert "values_by_pe=['bfloat16'" + ", 'float32'" * (size - 1) + "]" in str(error), error
        # Nothing was left half done: the next call runs and is right.
        assert torch.allclose(layer(x), _dense(layer, layer.dense_weights(), x), rtol=1e-5,
                              atol=1e-6)
        assert resources.stats.calls == 1
        # Rows wider than the buffers: ValueError on every PE, after the same exchange.
    with MegaMoEResources(H, 2 * size, 2, dtype=BF16) as narrow:
        with pytest.raises(ValueError, match=r"the call's dtype must be torch.bfloat16 or a "
                           r"narrower one .* with dtype=torch.float32 instead\), but got "
                           r"torch.float32"):
            narrow.exchange_counts(torch.ones(2 * size, dtype=torch.int64), torch.float32)
        with pytest.raises(ValueError, match=r"rows must be rows of torch.bfloat16"):
            narrow.start("forward", torch.zeros(2, H), torch.zeros(size, 2 * size,
                                                                   dtype=torch.int64),
                         {}, lambda local, received: None)
    with pytest.raises(shmem.ShmemTypeError, match=r"dtype must be one of torch.float64"):
        MegaMoE(H, I, 2 * size, 2, dtype=torch.int32)
    assert shmem.debug_state()["live_allocations"] == []
    return True


def test_pes_that_disagree_on_the_dtype_fail_alike_and_the_next_call_runs(pes):
    if ON_NPU:
        pytest.skip("autocast on NPU tensors: the fake NPU has no AMP (tests/fake_npu/README.md)")
    assert all(pes(2).run(_disagreeing, timeout=300))
