"""MegaMoE in torch.distributed training, on 1, 2 and 4 PEs:

- the experts are DTensors: Shard(0) over one 1-D "ep" mesh per EP group, global shapes, the
  router and the shared expert plain; the forward and every gradient as before (against the
  dense layer in one process and the all-to-all layer);
- state_dict / load_state_dict in one process, torch.distributed.checkpoint across EP sizes
  (EP 4 -> 2 x DP 2 -> 1 x DP 4 -> 4, and 2 PEs -> 1) restoring the same full weights and AdamW
  moments; misuse: a DTensor on another mesh, a checkpoint of another expert count;
- DDP through prepare_ddp (EP = world on 2 PEs, EP 2 x DP 2 on 4) equal to the model's own
  reduction, no_sync() deferring both; DDP without the helper failing at construction; FSDP2
  through mega_moe.fully_shard (per layer, then the root) likewise, torch's own fully_shard
  over the experts failing at construction;
- clip_grad_norm_ against torch's over the full (dense) gradients, 2-norm and inf-norm, the
  same on every rank, and the clipped gradients against the dense ones.
"""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor, Shard
from torch.nn.parallel import DistributedDataParallel as DDP

from hyper_parallel.core.multicore.mega_moe import (AllToAllMoE, MegaMoE, MegaMoEResources,
                                                    clip_grad_norm_, dense_moe, fully_shard,
                                                    expert_data_parallel_groups, prepare_ddp)
from hyper_parallel.core.multicore.mega_moe.model import (DecoderConfig, MoEDecoder,
                                                          load_checkpoint, make_optimizer,
                                                          reduce_gradients, save_checkpoint,
                                                          synthetic_tokens)

ROOT = Path(__file__).resolve().parents[2]
H, I, IS = 16, 24, 8
EXPERTS = ("gate_proj", "up_proj", "down_proj")
RTOL, ATOL = 1e-5, 1e-6


def _tokens(rank: int, count: int) -> torch.Tensor:
    return torch.randn(count, H, generator=torch.Generator().manual_seed(100 + rank))


def _grad_out(rank: int, count: int) -> torch.Tensor:
    return torch.randn(count, H, generator=torch.Generator().manual_seed(200 + rank))


def _local(t):
    return t.to_local() if isinstance(t, DTensor) else t


def _full(t):
    return t.full_tensor() if isinstance(t, DTensor) else t


def _dense(layer, dense: dict, x: torch.Tensor) -> torch.Tensor:
    return dense_moe(x, dense["router"], dense["gate_proj"], dense["up_proj"], dense["down_proj"],
                     layer.top_k, normalize_topk=layer.normalize_topk,
                     shared_gate_proj=dense.get("shared_gate_proj"),
                     shared_up_proj=dense.get("shared_up_proj"),
                     shared_down_proj=dense.get("shared_down_proj"),
                     shared_expert_gate=dense.get("shared_expert_gate"))


def _groups(size: int, ep_size: int):
    return expert_data_parallel_groups(ep_size) if ep_size < size else (None, None)


def _destroy(*groups) -> None:
    for group in groups:
        if group is not None:
            dist.destroy_process_group(group)


# ---- 1. the experts are DTensors ---------------------------------------------------------------


def _layout(rank, size, ep_size):
    torch.set_num_threads(1)
    ep, dp = _groups(size, ep_size)
    experts = 2 * ep_size
    first = rank - rank % ep_size
    torch.manual_seed(7)
    with MegaMoEResources(H, experts, 2, group=ep) as resources:
        layer = MegaMoE(H, I, experts, 2, shared_intermediate_size=IS, gated_shared_expert=True,
                        group=ep, resources=resources)
        second = MegaMoE(H, I, experts, 2, group=ep, resources=resources)
        for name, shape in (("gate_proj", (experts, I, H)), ("up_proj", (experts, I, H)),
                            ("down_proj", (experts, H, I))):
            param = getattr(layer, name)
            assert isinstance(param, DTensor) and tuple(param.shape) == shape, (name, param)
            assert tuple(param.placements) == (Shard(0),)
            assert param.device_mesh.mesh_dim_names == ("ep",)
            assert param.device_mesh.mesh.tolist() == list(range(first, first + ep_size))
            assert param.device_mesh is layer.mesh is second.mesh, "one mesh per EP group"
            assert tuple(param.to_local().shape) == (2,) + shape[1:]
        for name in ("router", "shared_gate_proj", "shared_up_proj", "shared_down_proj",
                     "shared_expert_gate"):
            assert not isinstance(getattr(layer, name), DTensor), name
        # The state_dict's names and global shapes are the dense layer's.
        dense = layer.dense_weights()
        state = layer.state_dict()
        assert set(state) == set(dense)
        for name, value in dense.items():
            assert tuple(state[name].shape) == tuple(value.shape), name
            assert torch.equal(_full(state[name]), value), name
        # Forward and every gradient against the dense layer, experts read through to_local().
        x = _tokens(rank, 13).requires_grad_(True)
        g = _grad_out(rank, 13)
        (layer(x) * g).sum().backward()
        every = {name: value.clone().requires_grad_(True) for name, value in dense.items()}
        for source in range(first, first + ep_size):
            (_dense(layer, every, _tokens(source, 13)) * _grad_out(source, 13)).sum().backward()
        place = rank - first
        for name in EXPERTS:
            grad = getattr(layer, name).grad
            assert isinstance(grad, DTensor) and tuple(grad.placements) == (Shard(0),), name
            assert torch.allclose(grad.to_local(), every[name].grad[2 * place:2 * place + 2],
                                  rtol=RTOL, atol=1e-5), name
        # The all-to-all layer holds the same DTensors.
        torch.manual_seed(7)
        a2a = AllToAllMoE(H, I, experts, 2, shared_intermediate_size=IS,
                          gated_shared_expert=True, group=ep)
        assert a2a.mesh is layer.mesh
        assert all(torch.equal(_local(a2a.state_dict()[k]), _local(state[k])) for k in state)
    _destroy(ep, dp)
    return True


@pytest.mark.parametrize("size,ep_size", [(1, 1), (2, 2), (4, 4), (4, 2)])
def test_the_experts_are_dtensors_sharded_over_the_ep_mesh(pes, size, ep_size):
    assert all(pes(size).run(_layout, ep_size, timeout=300))


# ---- 2. state_dict and checkpoints -------------------------------------------------------------


def _state_dict_round_trip(rank, size):
    torch.set_num_threads(1)
    torch.manual_seed(3)
    layer = MegaMoE(H, I, 2 * size, 2, shared_intermediate_size=IS, gated_shared_expert=True)
    torch.manual_seed(4)
    other = MegaMoE(H, I, 2 * size, 2, shared_intermediate_size=IS, gated_shared_expert=True)
    assert not torch.equal(other.dense_weights()["gate_proj"], layer.dense_weights()["gate_proj"])
    other.load_state_dict(layer.state_dict())  # DTensors on the same mesh
    dense = layer.dense_weights()
    assert all(torch.equal(other.dense_weights()[k], v) for k, v in dense.items())
    # Full plain tensors of every expert: each PE keeps its rows.
    torch.manual_seed(5)
    third = MegaMoE(H, I, 2 * size, 2, shared_intermediate_size=IS, gated_shared_expert=True)
    third.load_state_dict(dense)
    assert all(torch.equal(third.dense_weights()[k], v) for k, v in dense.items())
    assert isinstance(third.gate_proj, DTensor) and third.gate_proj.device_mesh is layer.mesh
    # A checkpoint of another expert count, plain or DTensor.
    bigger = MegaMoE(H, I, 4 * size, 2, shared_intermediate_size=IS, gated_shared_expert=True)
    with pytest.raises(ValueError, match=rf"gate_proj must be the weights of {2 * size} experts "
                                         rf".*but got a checkpoint of {4 * size} experts"):
        layer.load_state_dict(bigger.state_dict())
    with pytest.raises(ValueError, match=r"a checkpoint of"):
        layer.load_state_dict(bigger.dense_weights())
    if size > 1:
        # A DTensor on another mesh (an EP group of this rank alone) is refused by name.
        alone = [dist.new_group([r]) for r in range(size)][rank]
        single = MegaMoE(H, I, 2 * size, 2, shared_intermediate_size=IS,
                         gated_shared_expert=True, group=alone)
        with pytest.raises(ValueError, match=r"gate_proj must be a DTensor Shard\(0\) on the mesh "
                                             r"of this layer's EP group .* but got a DTensor "
                                             rf"\(Shard\(dim=0\),\) on the mesh of global ranks "
                                             rf"\[{rank}\]"):
            layer.load_state_dict(single.state_dict())
        # A DTensor replaced by hand on another mesh fails at the next call, by name.
        layer.up_proj = torch.nn.Parameter(single.up_proj.detach().clone())
        with pytest.raises(RuntimeError, match=r"up_proj must be the layer's own DTensor"):
            layer(_tokens(rank, 3))
        dist.destroy_process_group(alone)
    layer.close()
    return True


@pytest.mark.parametrize("size", [1, 2])
def test_state_dict_round_trips_and_refuses_other_meshes_and_expert_counts(pes, size):
    assert all(pes(size).run(_state_dict_round_trip, timeout=300))


_SMALL = DecoderConfig(num_experts=4, layers=1, sequence=12, batch=2, hidden_size=32,
                       intermediate_size=32, shared_intermediate_size=16)


def _train(model, optimizer, rank, steps, first=0):
    for step in range(first, first + steps):
        optimizer.zero_grad(set_to_none=False)
        loss, _ = model.loss(synthetic_tokens(model.config, rank, step))
        loss.backward()
        reduce_gradients(model)
        optimizer.step()


def _snapshot(model, optimizer) -> dict:
    """The full weights and the full AdamW moments, by parameter name (collective)."""
    out = {}
    names = {id(p): n for n, p in model.named_parameters()}
    for name, p in model.named_parameters():
        out[name] = _full(p.detach()).clone()
    for p, state in optimizer.state.items():
        for key in ("exp_avg", "exp_avg_sq"):
            out[f"{names[id(p)]}.{key}"] = _full(state[key]).clone()
        out[f"{names[id(p)]}.step"] = state["step"].clone()
    return out


def _dcp_across_ep_sizes(rank, size, path, sizes):
    """Trains at EP sizes[0], saves; each next EP size loads the last checkpoint, checks the
    full weights and moments, trains a step, saves; returns the snapshots."""
    torch.set_num_threads(1)
    previous = None
    for index, ep_size in enumerate(sizes):
        ep, dp = _groups(size, ep_size)
        model = MoEDecoder(_SMALL, "shmem", seed=31 + index, group=ep, dp_group=dp)
        optimizer = make_optimizer(model)
        try:
            if previous is None:
                _train(model, optimizer, rank, 2)
            else:
                load_checkpoint(model, optimizer, f"{path}/{index - 1}")
                now = _snapshot(model, optimizer)
                assert now.keys() == previous.keys(), set(now) ^ set(previous)
                unequal = [k for k in now if not torch.equal(now[k], previous[k])]
                assert not unequal, f"EP {sizes[index - 1]} -> {ep_size}: {unequal}"
                exp_avg = optimizer.state[model.layers[0].moe.gate_proj]["exp_avg"]
                assert isinstance(exp_avg, DTensor) and exp_avg.device_mesh is model.layers[0].moe.mesh
                _train(model, optimizer, rank, 1, first=10 + index)
            previous = _snapshot(model, optimizer)
            save_checkpoint(model, optimizer, f"{path}/{index}")
        finally:
            model.close()
            _destroy(ep, dp)
    return previous


def test_dcp_reshards_weights_and_adamw_moments_across_ep_sizes(pes, tmp_path):
    # EP 4 -> EP 2 x DP 2 -> EP 1 x DP 4 -> EP 4, on 4 PEs.
    results = pes(4).run(_dcp_across_ep_sizes, str(tmp_path), [4, 2, 1, 4], timeout=600)
    assert all(torch.equal(results[0][k], r[k]) for r in results for k in results[0])


def _dcp_load_only(rank, size, path, expected_experts):
    torch.set_num_threads(1)
    config = DecoderConfig(**{**_SMALL.__dict__, "num_experts": expected_experts})
    model = MoEDecoder(config, "shmem", seed=99)
    optimizer = make_optimizer(model)
    try:
        if expected_experts != _SMALL.num_experts:
            # The router is the first weight whose shape names the expert count.
            with pytest.raises(ValueError, match=r"holds model\.layers\.0\.moe\.router of "
                                                 r"shape \(4, 32\), but the model's is "
                                                 r"\(8, 32\) \(a checkpoint of another model"):
                load_checkpoint(model, optimizer, path)
            return None
        load_checkpoint(model, optimizer, path)
        return _snapshot(model, optimizer)
    finally:
        model.close()


def test_a_checkpoint_of_2_pes_loads_on_1_and_refuses_another_expert_count(pes, tmp_path):
    saved = pes(2).run(_dcp_across_ep_sizes, str(tmp_path), [2], timeout=600)
    loaded = pes(1).run(_dcp_load_only, str(tmp_path / "0"), 4, timeout=300)[0]
    assert loaded.keys() == saved[0].keys()
    assert all(torch.equal(loaded[k], saved[0][k]) for k in loaded)
    pes(1).run(_dcp_load_only, str(tmp_path / "0"), 8, timeout=300)


# ---- 3. DDP ------------------------------------------------------------------------------------


def _ddp(rank, size, ep_size):
    """DDP(prepare_ddp(model)) against the model's own reduction: two synchronised steps and
    one accumulated under no_sync(); every gradient and parameter equal."""
    torch.set_num_threads(1)
    ep, dp = _groups(size, ep_size)
    ours = MoEDecoder(_SMALL, "shmem", seed=5, group=ep, dp_group=dp)
    reference = MoEDecoder(_SMALL, "shmem", seed=5, group=ep, dp_group=dp)
    try:
        # Without the helper DDP fails at its construction (never silently).
        with pytest.raises(RuntimeError, match=r"DTensor"):
            DDP(ours)
        with pytest.raises(ValueError, match=r"dp_group must be the data-parallel group"):
            prepare_ddp(ours, dp_group=None if dp is not None else dist.group.WORLD)
        if dp is not None:  # the right size, the wrong ranks: the EP group itself
            with pytest.raises(ValueError, match=r"dp_group must be the data-parallel group of "
                               r"this rank's experts: .* at EP places \[0, 1\]"):
                prepare_ddp(ours, dp_group=ep)
        wrapped = DDP(prepare_ddp(ours, dp_group=dp))
        # A conversion after the helper (it swaps the DTensor parameters' tensors) keeps the
        # experts' reduction.
        ours.float()
        with pytest.raises(ValueError, match=r"prepare_ddp\(model\) comes before DDP"):
            prepare_ddp(wrapped)
        optimizers = make_optimizer(ours), make_optimizer(reference)
        state = ours._mega_moe_ddp
        worst = 0.0
        for step in range(3):
            for optimizer in optimizers:
                optimizer.zero_grad(set_to_none=False)
            micro = 2 if step == 2 else 1  # the last step accumulates two micro-batches
            for m in range(micro):
                tokens = synthetic_tokens(_SMALL, rank, 10 * step + m)
                if m < micro - 1:
                    with wrapped.no_sync():
                        loss, _ = _ddp_loss(wrapped, tokens)
                        loss.backward()
                    reductions = state.reductions
                else:
                    loss, _ = _ddp_loss(wrapped, tokens)
                    loss.backward()
                reference.loss(tokens)[0].backward()
            if micro == 2:
                assert state.reductions == reductions + 1, "one reduction for both micro-batches"
            reduce_gradients(reference)
            for (name, p), q in zip(ours.named_parameters(), reference.parameters()):
                assert torch.allclose(_local(p.grad), _local(q.grad), rtol=RTOL, atol=ATOL), \
                    (step, name, float((_local(p.grad) - _local(q.grad)).abs().max()))
                worst = max(worst, float((_local(p.grad) - _local(q.grad)).abs().max()))
            for optimizer in optimizers:
                optimizer.step()
        assert state.reductions == 3
        # The experts stayed each PE's own: DDP broadcast none of them.
        for p, q in zip(ours.expert_parameters(), reference.expert_parameters()):
            assert torch.allclose(_local(p.detach()), _local(q.detach()), rtol=RTOL, atol=ATOL)
        return worst
    finally:
        ours.close()
        reference.close()
        _destroy(ep, dp)


def _ddp_loss(wrapped, tokens):
    """The decoder's loss through DDP's forward (DDP calls the module: logits here)."""
    logits = wrapped(tokens)
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                             tokens[:, 1:].reshape(-1))
    return loss, logits


@pytest.mark.parametrize("size,ep_size", [(2, 2), (4, 2)])
def test_ddp_with_prepare_ddp_equals_the_models_own_reduction(pes, size, ep_size):
    worst = pes(size).run(_ddp, ep_size, timeout=600)
    assert max(worst) <= 1e-5, worst


def _fsdp(rank, size, ep_size):
    """FSDP2 through mega_moe.fully_shard (each decoder layer, then the root) against the
    model's own reduction: two synchronised steps and one accumulated with
    set_requires_gradient_sync(False); every gradient, the clip norm and every parameter after
    the step equal. torch's own fully_shard over the experts fails at its construction."""
    torch.set_num_threads(1)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard as torch_fully_shard

    ep, dp = _groups(size, ep_size)
    ours = MoEDecoder(_SMALL, "shmem", seed=5, group=ep, dp_group=dp)
    reference = MoEDecoder(_SMALL, "shmem", seed=5, group=ep, dp_group=dp)
    try:
        plain = MoEDecoder(_SMALL, "shmem", seed=5, group=ep, dp_group=dp)
        try:
            with pytest.raises(TypeError, match=r"Invariant encountered") as raised:
                torch_fully_shard(plain)
            # docs/mega_moe.md's troubleshooting quotes torch's message and the fix.
            section = (ROOT / "docs" / "mega_moe.md").read_text().split("## Troubleshooting")[1]
            section = " ".join(section.split("\n## ")[0].split())
            assert f"`TypeError: {raised.value}`" in section, str(raised.value)
            assert "DeviceMesh._concatenate" in "".join(traceback.format_tb(raised.tb))
            assert "DeviceMesh._concatenate" in section
        finally:
            plain.close()
        if size > 1:
            half = init_device_mesh("cpu", (2, size // 2))
            with pytest.raises(ValueError, match=r"mesh must be None or a 1-D mesh"):
                fully_shard(ours, mesh=half, dp_group=dp)
        with pytest.raises(ValueError, match=r"dp_group must be the data-parallel group"):
            fully_shard(ours, dp_group=None if dp is not None else dist.group.WORLD)
        moe = ours.layers[0].moe  # left with its experts only: nothing for FSDP2 to decide by
        with pytest.raises(ValueError, match=r"module must be a module with parameters other "
                           r"than MegaMoE experts"):
            fully_shard(moe, dp_group=dp, ignored_params=set(moe.parameters()))
        for layer in ours.layers:
            fully_shard(layer, dp_group=dp)
        fully_shard(ours, dp_group=dp)
        ours.float()  # after the helper: the experts' reduction stays
        assert not hasattr(ours, "_mega_moe_fsdp"), "the layers' calls took every expert"
        states = [layer._mega_moe_fsdp for layer in ours.layers]
        expert_ids = {id(p) for p in ours.expert_parameters()}
        for name, p in ours.named_parameters():
            # FSDP2 sharded the dense part over the world; the experts stayed the layer's.
            mesh = p.device_mesh
            assert (mesh.size() == ep_size if id(p) in expert_ids else mesh.size() == size), name
        optimizers = make_optimizer(ours), make_optimizer(reference)
        worst = 0.0
        for step in range(3):
            for optimizer in optimizers:
                optimizer.zero_grad(set_to_none=False)
            micro = 2 if step == 2 else 1  # the last step accumulates two micro-batches
            for m in range(micro):
                tokens = synthetic_tokens(_SMALL, rank, 10 * step + m)
                ours.set_requires_gradient_sync(m == micro - 1)
                reductions = [state.reductions for state in states]
                ours.loss(tokens)[0].backward()
                reference.loss(tokens)[0].backward()
                expected = 1 if m == micro - 1 else 0
                assert [s.reductions for s in states] == [r + expected for r in reductions]
            reduce_gradients(reference)
            norms = [clip_grad_norm_(list(model.parameters()), 0.5) for model in (ours, reference)]
            assert torch.allclose(norms[0], norms[1], rtol=RTOL), norms
            for (name, p), q in zip(ours.named_parameters(), reference.parameters()):
                mine = _local(p.grad) if id(p) in expert_ids else _full(p.grad)
                diff = float((mine - _local(q.grad)).abs().max())
                assert torch.allclose(mine, _local(q.grad), rtol=RTOL, atol=ATOL), (step, name, diff)
                worst = max(worst, diff)
            for optimizer in optimizers:
                optimizer.step()
        for (name, p), q in zip(ours.named_parameters(), reference.parameters()):
            mine = _local(p.detach()) if id(p) in expert_ids else _full(p.detach())
            assert torch.allclose(mine, _local(q.detach()), rtol=RTOL, atol=ATOL), name
        return worst
    finally:
        ours.close()
        reference.close()
        _destroy(ep, dp)


@pytest.mark.parametrize("size,ep_size", [(2, 2), (4, 2)])
def test_fsdp2_through_fully_shard_equals_the_models_own_reduction(pes, size, ep_size):
    worst = pes(size).run(_fsdp, ep_size, timeout=600)
    assert max(worst) <= 1e-5, worst


def _fsdp_mixed(rank, size, ep_size, reduce_dtype):
    """FSDP2 with MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype) through
    mega_moe.fully_shard against the float32 FSDP2 run of the same model: the routed experts
    compute in bfloat16 (compute_dtype() during the forward), the loss and every gradient
    within bfloat16's tolerance of float32's, the parameters and their gradients left in
    float32; with reduce_dtype bfloat16 and replicas to sum over, the experts' reduced
    gradients lie on bfloat16's grid (summed in it), with float32 they do not."""
    torch.set_num_threads(1)
    from torch.distributed.fsdp import MixedPrecisionPolicy

    ep, dp = _groups(size, ep_size)
    low = MoEDecoder(_SMALL, "shmem", seed=9, group=ep, dp_group=dp)
    full = MoEDecoder(_SMALL, "shmem", seed=9, group=ep, dp_group=dp)
    try:
        with pytest.raises(TypeError, match=r"mp_policy.param_dtype must be None or a dtype"):
            fully_shard(low, dp_group=dp,
                        mp_policy=MixedPrecisionPolicy(param_dtype=torch.int32))
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=reduce_dtype)
        for model, mp in ((low, policy), (full, MixedPrecisionPolicy())):
            for layer in model.layers:
                fully_shard(layer, dp_group=dp, mp_policy=mp)
            fully_shard(model, dp_group=dp, mp_policy=mp)
        seen = []
        moe = low.layers[0].moe
        moe.register_forward_pre_hook(lambda m, args: seen.append(m.compute_dtype()))
        tokens = synthetic_tokens(_SMALL, rank, 3)
        losses = [model.loss(tokens)[0] for model in (low, full)]
        assert seen == [torch.bfloat16], seen
        assert full.layers[0].moe.compute_dtype() == torch.float32
        assert abs(float(losses[0]) - float(losses[1])) <= 2e-2 * abs(float(losses[1])), losses
        for loss in losses:
            loss.backward()
        expert_ids = {id(p) for p in low.expert_parameters()}
        worst = 0.0
        for (name, p), q in zip(low.named_parameters(), full.parameters()):
            mine = _local(p.grad) if id(p) in expert_ids else _full(p.grad)
            theirs = _local(q.grad) if id(p) in expert_ids else _full(q.grad)
            assert p.dtype == mine.dtype == torch.float32, (name, p.dtype, mine.dtype)
            scale = float(theirs.abs().max()) or 1.0
            error = float((mine - theirs).abs().max()) / scale
            assert error <= 0.05, (name, error)
            worst = max(worst, error)
        if dp is not None:
            grads = torch.cat([_local(p.grad).reshape(-1) for p in low.expert_parameters()])
            on_grid = bool(torch.equal(grads, grads.to(torch.bfloat16).float()))
            # reduce_dtype None: FSDP2 reduces in param_dtype (bfloat16).
            assert on_grid == (reduce_dtype in (None, torch.bfloat16)), (reduce_dtype, on_grid)
        return worst
    finally:
        low.close()
        full.close()
        _destroy(ep, dp)


@pytest.mark.parametrize("size,ep_size,reduce_dtype", [
    (2, 2, torch.float32), (4, 2, torch.float32), (4, 2, None)])
def test_fsdp2_mixed_precision_computes_in_param_dtype_and_reduces_in_reduce_dtype(
        pes, size, ep_size, reduce_dtype):
    worst = pes(size).run(_fsdp_mixed, ep_size, reduce_dtype, timeout=600)
    print("worst relative gradient error against float32:", max(worst))


# ---- 4. gradient clipping ----------------------------------------------------------------------


def _clip(rank, size, ep_size, norm_type):
    """A layer (experts and a dense part) at EP ep_size: after the gradients are reduced
    (dense ones summed over the world, expert ones over DP), clip_grad_norm_ gives the norm
    torch's gives over the dense layer's gradients of every PE's tokens in one process, on
    every rank, and clips to the same gradients."""
    torch.set_num_threads(1)
    ep, dp = _groups(size, ep_size)
    experts = 2 * ep_size
    torch.manual_seed(7)
    with MegaMoEResources(H, experts, 2, group=ep) as resources:
        layer = MegaMoE(H, I, experts, 2, shared_intermediate_size=IS, gated_shared_expert=True,
                        group=ep, resources=resources)
        head = torch.nn.Linear(H, H)
        dense = layer.dense_weights()
        y = head(layer(_tokens(rank, 11)))
        (y * _grad_out(rank, 11)).sum().backward()
        for p in [*head.parameters(), layer.router, layer.shared_gate_proj, layer.shared_up_proj,
                  layer.shared_down_proj, layer.shared_expert_gate]:
            dist.all_reduce(p.grad)
        if dp is not None:
            for name in EXPERTS:
                dist.all_reduce(getattr(layer, name).grad.to_local(), group=dp)
        # The same model densely in one process, on every PE's tokens.
        every = {name: value.clone().requires_grad_(True) for name, value in dense.items()}
        head_ref = torch.nn.Linear(H, H)
        head_ref.load_state_dict(head.state_dict())
        for source in range(size):
            (head_ref(_dense(layer, every, _tokens(source, 11))) * _grad_out(source, 11)).sum() \
                .backward()
        reference = [*every.values(), *head_ref.parameters()]
        max_norm = 0.5
        expected = torch.nn.utils.clip_grad_norm_(reference, max_norm, norm_type)
        params = [*layer.parameters(), *head.parameters()]
        total = clip_grad_norm_(params, max_norm, norm_type)
        assert not isinstance(total, DTensor)
        assert torch.allclose(total, expected, rtol=1e-5, atol=1e-6), (total, expected)
        assert float(expected) > max_norm, "the test clips"
        # Every rank the same norm; the clipped gradients those of the dense model.
        gathered = [torch.zeros(()) for _ in range(size)]
        dist.all_gather(gathered, total.reshape(()).float())
        assert all(torch.equal(t, gathered[0]) for t in gathered), gathered
        place = rank % ep_size
        for name in EXPERTS:
            assert torch.allclose(getattr(layer, name).grad.to_local(),
                                  every[name].grad[2 * place:2 * place + 2], rtol=1e-4,
                                  atol=1e-6), name
        assert torch.allclose(layer.router.grad, every["router"].grad, rtol=1e-4, atol=1e-6)
        # torch's own refuses the mix (the reason for ours), and ours takes torch's signature.
        with pytest.raises(Exception, match=r"DTensor|mesh"):
            torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type)
        if norm_type == 2.0:
            for p in params:
                p.grad.zero_()
            layer.router.grad.fill_(float("nan"))
            with pytest.raises(RuntimeError, match=r"non-finite"):
                clip_grad_norm_(params, max_norm, error_if_nonfinite=True, foreach=False)
    _destroy(ep, dp)
    return float(total)


@pytest.mark.parametrize("size,ep_size", [(1, 1), (2, 2), (4, 4), (4, 2)])
@pytest.mark.parametrize("norm_type", [2.0, float("inf")])
def test_clip_grad_norm_is_the_dense_models_norm_on_every_rank(pes, size, ep_size, norm_type):
    totals = pes(size).run(_clip, ep_size, norm_type, timeout=300)
    assert len(set(totals)) == 1, totals
