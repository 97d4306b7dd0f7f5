"""The fake NPU device for PyTorch (tests/fake_npu: a stand-in `torch_npu` over the fake ACL
runtime): tensors on torch.device("npu", i), torch.npu's streams and events, real asynchrony,
and torch_npu's host-side task queue that only reading `npu_stream` (or a synchronisation)
moves onto the ACL stream.

Each test runs its script in a subprocess, so the device registration (PrivateUse1 renamed
"npu", the guard and the kernels) never leaks into the other tests of this pytest process. The
first import builds the extension (tests/fake_npu/build/, about a minute); later ones load it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FAKE_NPU = REPO / "tests" / "fake_npu"
ENV_LIBRARY = "HYPER_PARALLEL_SHMEM_ACL_LIBRARY"
REQUIRED = (b"aclrtLaunchCallback", b"aclrtStreamWaitEvent", b"hps_fake_set_async_streams")


def _fake_library():
    """(path to the fake ACL runtime, or None; why not)."""
    candidates = []
    if os.environ.get(ENV_LIBRARY):
        candidates.append(Path(os.environ[ENV_LIBRARY]))
    candidates.append(REPO / "build" / "backends" / "cann" / "fake_cann" /
                      "libhps_fake_cann_v1_5.so")
    for path in candidates:
        if path.is_file():
            data = path.read_bytes()
            missing = [name.decode() for name in REQUIRED if name not in data]
            if missing:
                return None, f"{path} lacks {', '.join(missing)} (rebuild hps_fake_cann_v1_5)"
            return path, ""
    return None, ("fake ACL runtime not built (cmake --build build --target hps_fake_cann_v1_5, "
                  f"or set {ENV_LIBRARY})")


LIBRARY, WHY = _fake_library()
pytestmark = pytest.mark.skipif(LIBRARY is None, reason=WHY)

PRELUDE = """
import ctypes, os, sys, time
import torch
import torch_npu
from torch_npu import fake
dev = torch.device("npu", 0)
"""


def run(script: str, timeout: float = 600, extra_env: dict | None = None,
        expect_ok: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(FAKE_NPU)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env[ENV_LIBRARY] = str(LIBRARY)
    env.pop("HPS_FAKE_NPU_DEVICES", None)
    env.update(extra_env or {})
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(script)], env=env,
                          capture_output=True, text=True, timeout=timeout, cwd=str(REPO))
    if expect_ok:
        assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-6000:]}"
    return proc


@pytest.fixture(scope="module", autouse=True)
def built_extension():
    """Builds (or loads) the extension once, so each test's timeout covers only its work."""
    run("print(torch.npu.device_count())", timeout=900)


def test_tensors_and_operators_match_the_cpu():
    run("""
        assert torch.npu.is_available() and torch.npu.device_count() == 8
        assert torch.npu.current_device() == 0 and torch_npu.npu is torch.npu
        torch.manual_seed(0)
        a, b = torch.randn(4, 5), torch.randn(5, 3)
        A, B = a.to(dev), b.npu()
        assert A.device == dev and A.is_npu and not A.is_cpu
        assert torch.allclose((A + 1.5 * A).cpu(), a + 1.5 * a)
        assert torch.allclose((A @ B).cpu(), a @ b, atol=1e-6)
        assert torch.allclose(torch.matmul(A, B).cpu(), torch.matmul(a, b), atol=1e-6)
        assert torch.allclose(torch.softmax(A, -1).cpu(), torch.softmax(a, -1))
        assert torch.allclose(A.sum(dim=0).cpu(), a.sum(dim=0))
        assert abs(A.sum().item() - a.sum().item()) < 1e-5
        assert torch.equal(A[1:3, ::2].cpu(), a[1:3, ::2])
        assert torch.equal(A.t().contiguous().cpu(), a.t().contiguous())
        assert torch.equal(A[torch.tensor([0, 2])].cpu(), a[torch.tensor([0, 2])])
        assert torch.equal(A[A > 0].cpu(), a[a > 0])  # data-dependent shape: blocking path
        assert torch.equal(torch.cat([A, A * 2]).cpu(), torch.cat([a, a * 2]))
        assert torch.equal(torch.stack([A, A]).cpu(), torch.stack([a, a]))
        values, indices = A.max(dim=1)
        assert torch.equal(indices.cpu(), a.max(dim=1).indices)
        C = torch.empty(3, 3, device=dev).fill_(2.5)
        assert torch.equal(C.cpu(), torch.full((3, 3), 2.5))
        D = torch.zeros(4, 5, device=dev)
        D.copy_(A)
        assert torch.equal(D.cpu(), a)
        D[1].zero_()
        expected = a.clone(); expected[1] = 0
        assert torch.equal(D.cpu(), expected)
        out = torch.empty(0, device=dev)
        torch.add(A, 1, out=out)
        assert torch.allclose(out.cpu(), a + 1)
        assert torch.equal(torch.arange(5, device="npu").cpu(), torch.arange(5))
        assert torch.equal(A.to(torch.float64).cpu(), a.to(torch.float64))
        assert torch.equal(A.view(20).cpu(), a.view(20)) and A.reshape(5, 4).shape == (5, 4)
        assert torch.equal(A, A) and not torch.equal(A, A + 1)
        assert torch.equal(A.to("npu:1").cpu(), a)  # across devices: stream order kept
        E = torch.ones(2, 3, device="npu:1")
        assert E.device == torch.device("npu", 1) and E.sum().item() == 6.0
        with torch.npu.device(2):
            assert torch.npu.current_device() == 2
            assert torch.empty(1, device="npu").device.index == 2
        assert torch.npu.current_device() == 0
        torch.npu.set_device("npu:3"); assert torch.npu.current_device() == 3
        torch.npu.set_device(0)
        torch.npu.synchronize()
        print("ok")
    """)


def test_layers_and_blocking_operators_match_the_cpu():
    run("""
        torch.manual_seed(0)
        a = torch.randn(3, 4)
        A = a.to(dev)
        assert "device='npu:0'" in repr(A) and A.tolist() == a.tolist()
        assert torch.equal(torch.nonzero(A > 0).cpu(), torch.nonzero(a > 0))
        assert torch.equal(A.sort(dim=1).values.cpu(), a.sort(dim=1).values)
        B = A.clone(); B[B > 0] = 0
        b = a.clone(); b[b > 0] = 0
        assert torch.equal(B.cpu(), b)
        x = torch.randn(2, 3, 8, 8, requires_grad=True)
        X = x.detach().to(dev).requires_grad_()
        conv = torch.nn.Conv2d(3, 4, 3)
        npu_conv = torch.nn.Conv2d(3, 4, 3).to(dev)
        npu_conv.load_state_dict(conv.state_dict())
        conv(x).square().sum().backward()
        npu_conv(X).square().sum().backward()
        assert torch.allclose(X.grad.cpu(), x.grad, atol=1e-4)
        assert torch.allclose(npu_conv.weight.grad.cpu(), conv.weight.grad, atol=1e-3)
        ln = torch.nn.LayerNorm(8)
        assert torch.allclose(ln.to(dev)(X).cpu(), ln.cpu()(x), atol=1e-5)
        q = torch.randn(1, 2, 5, 8)
        sdpa = torch.nn.functional.scaled_dot_product_attention
        assert torch.allclose(sdpa(q.to(dev), q.to(dev), q.to(dev)).cpu(), sdpa(q, q, q),
                              atol=1e-5)
        target = torch.tensor([0, 1, 3])
        ce = torch.nn.functional.cross_entropy
        assert torch.allclose(ce(A, target.to(dev)).cpu(), ce(a, target))
        print("ok")
    """)


def test_mlp_backward_and_step_match_the_cpu():
    run("""
        import copy
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                    torch.nn.Linear(16, 4))
        npu_model = copy.deepcopy(model).to(dev)
        x, y = torch.randn(10, 8), torch.randn(10, 4)
        for m, xs, ys in ((model, x, y), (npu_model, x.to(dev), y.to(dev))):
            opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
            for _ in range(3):
                opt.zero_grad()
                loss = torch.nn.functional.mse_loss(m(xs), ys)
                loss.backward()
                opt.step()
        for p, q in zip(model.parameters(), npu_model.parameters()):
            assert q.device == dev
            assert torch.allclose(p.grad, q.grad.cpu(), atol=1e-5)
            assert torch.allclose(p, q.cpu(), atol=1e-5)
        print("ok")
    """)


# A CPU matmul chain long enough (hundreds of ms) that another stream overtakes it.
SLOW = """
big = torch.randn(1024, 1024, device=dev) / 32
def slow(z):
    for _ in range(8):
        z = z @ big
    return z
"""


def test_non_default_stream_with_wait_stream_is_correct():
    run(SLOW + textwrap.dedent("""
        s1, s2 = torch.npu.Stream(), torch.npu.Stream()
        assert s1 != s2 and s1.device_index == 0 and isinstance(s1, torch.Stream)
        x = torch.zeros(1000, device=dev)
        torch.npu.synchronize()
        with torch.npu.stream(s1):
            assert torch.npu.current_stream() == s1
            slow(big)
            x.add_(1)
        assert torch.npu.current_stream() == torch.npu.default_stream()
        with torch.npu.stream(s2):
            s2.wait_stream(s1)
            snap = x.clone()
        torch.npu.current_stream().wait_stream(s2)
        assert snap.cpu().sum().item() == 1000.0
        # events: record on s1, wait on s2
        with torch.npu.stream(s1):
            slow(big)
            x.add_(1)
            event = torch.npu.Event()
            event.record()
        with torch.npu.stream(s2):
            event.wait()
            snap = x * 1
        s2.synchronize()
        assert event.query() and s2.query()
        event.synchronize()
        with torch.npu.stream(s2):
            assert snap.cpu().sum().item() == 2000.0
        print("ok")
    """))


def test_asynchrony_is_real_a_wrong_stream_reads_stale_data():
    run(textwrap.dedent("""
        import torch_npu.fake
        s1, s2 = torch.npu.Stream(), torch.npu.Stream()
        x = torch.zeros(1000, device=dev)
        torch.npu.synchronize()
        gate = torch_npu.fake.hold(s1)  # s1's worker waits here until the gate opens
        with torch.npu.stream(s1):
            x.add_(1)
            s1.npu_stream  # on the ACL stream, behind the gate
        with torch.npu.stream(s2):  # no wait_stream: the bug the fake must show
            snap = x.clone()
        s2.synchronize()
        gate.open()
        torch.npu.synchronize()
        assert snap.cpu().sum().item() == 0.0, "s2 should have overtaken s1"
        assert x.cpu().sum().item() == 1000.0
        print("ok")
    """))


def test_host_task_queue_reaches_the_acl_stream_only_through_npu_stream():
    run("""
        lib = ctypes.CDLL(os.environ["HYPER_PARALLEL_SHMEM_ACL_LIBRARY"])  # the same instance
        lib.aclrtMemcpyAsync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                                         ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
        lib.hps_fake_pending.argtypes = [ctypes.c_void_p]
        s = torch.npu.current_stream()
        raw = fake.acl_stream_no_flush(s)
        src, dst = torch.zeros(4, device=dev), torch.zeros(4, device=dev)
        torch.npu.synchronize()
        assert fake.host_queue_length(s) == 0
        src.fill_(7)
        # queued on the host, not on the ACL stream
        assert fake.host_queue_length(s) == 1
        assert fake.acl_pending(s) == 0 and lib.hps_fake_pending(ctypes.c_void_p(raw)) == 0
        # a consumer that bypasses npu_stream: its copy runs before torch's fill
        assert lib.aclrtMemcpyAsync(dst.data_ptr(), 16, src.data_ptr(), 16, 3, raw) == 0
        torch.npu.synchronize()
        assert dst.cpu().tolist() == [0.0] * 4 and src.cpu().tolist() == [7.0] * 4
        # through npu_stream: the fill is on the stream first
        src.fill_(9)
        handle = torch.npu.current_stream().npu_stream
        assert handle == raw and fake.host_queue_length(s) == 0
        assert lib.aclrtMemcpyAsync(dst.data_ptr(), 16, src.data_ptr(), 16, 3, handle) == 0
        torch.npu.synchronize()
        assert dst.cpu().tolist() == [9.0] * 4
        # the queue also flushes past its bound, and on a synchronisation
        for _ in range(100):
            src.add_(1)
        assert 0 < fake.host_queue_length(s) <= 65
        s.synchronize()
        assert fake.host_queue_length(s) == 0 and src.cpu().tolist() == [109.0] * 4
        print("ok")
    """)


def test_failed_work_raises_at_the_next_synchronisation():
    run("""
        a = torch.arange(4.0, device=dev)
        bad = a[torch.tensor([10])]  # the meta kernel cannot see it; the CPU kernel raises
        try:
            torch.npu.synchronize()
        except RuntimeError as e:
            assert "out of bounds" in str(e), e
        else:
            raise AssertionError("no error")
        torch.npu.synchronize()  # reported once
        assert (a * 2).cpu().tolist() == [0.0, 2.0, 4.0, 6.0]
        try:
            a[torch.tensor([7])].cpu()
        except RuntimeError as e:
            assert "out of bounds" in str(e), e
        else:
            raise AssertionError("no error")
        print("ok")
    """)


def test_memory_freed_while_queued_stays_valid_until_the_stream_passes():
    run("""
        n = 1 << 20
        a = torch.ones(n, device=dev)
        b = a * 3
        del a  # the block is released in stream order, after b's kernel
        c = torch.empty(n, device=dev).fill_(5)  # may reuse memory on a real allocator
        assert b.sum().item() == 3.0 * n and c.sum().item() == 5.0 * n
        print("ok")
    """)


def test_device_count_follows_the_environment():
    proc = run("""
        print(torch.npu.device_count())
        x = torch.ones(2, device="npu:2")
        print(x.device, fake.device_of_pointer(x.data_ptr()))
        try:
            fake.device_of_pointer(torch.ones(2).data_ptr())
        except RuntimeError as e:
            print("host" if "not fake NPU device memory" in str(e) else e)
    """, extra_env={"HPS_FAKE_NPU_DEVICES": "3"})
    assert proc.stdout.split() == ["3", "npu:2", "2", "host"], proc.stdout


def test_import_without_the_library_says_what_to_set():
    env = {ENV_LIBRARY: ""}
    proc = subprocess.run(
        [sys.executable, "-c", "import torch_npu"], capture_output=True, text=True,
        env={**os.environ, **env, "PYTHONPATH": str(FAKE_NPU)}, timeout=120)
    assert proc.returncode != 0 and ENV_LIBRARY in proc.stderr
