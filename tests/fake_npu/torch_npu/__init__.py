"""A fake ``torch_npu`` (tests only): an NPU device for PyTorch over the fake ACL runtime.

``import torch, torch_npu`` with ``tests/fake_npu`` on ``PYTHONPATH`` and
``HYPER_PARALLEL_SHMEM_ACL_LIBRARY`` naming the fake ACL runtime (the fake CANN library the
SHMEM backend loads) registers torch's PrivateUse1 device as ``npu`` and ``torch.npu``
(this package's ``npu`` module), as the real torch_npu does. See ../README.md.

The C++ extension (csrc/) is built on first import with torch.utils.cpp_extension.load into
``tests/fake_npu/build/`` (``HPS_FAKE_NPU_BUILD_DIR`` overrides); concurrent imports wait on
cpp_extension's lock in that folder.
"""

import os

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))
_ENV_LIBRARY = "HYPER_PARALLEL_SHMEM_ACL_LIBRARY"


def _library_path():
    path = os.environ.get(_ENV_LIBRARY)
    if not path:
        raise ImportError(
            f"fake torch_npu: set {_ENV_LIBRARY} to the fake ACL runtime library, e.g. "
            "<build>/backends/cann/fake_cann/libhps_fake_cann_v1_5.so (build it with "
            "`cmake --build <build> --target hps_fake_cann_v1_5`)")
    if not os.path.isfile(path):
        raise ImportError(f"fake torch_npu: {_ENV_LIBRARY}={path} is not a file")
    return os.path.abspath(path)


def _build_extension():
    from torch.utils import cpp_extension

    build_dir = os.environ.get("HPS_FAKE_NPU_BUILD_DIR") or os.path.join(
        os.path.dirname(_HERE), "build")
    os.makedirs(build_dir, exist_ok=True)
    return cpp_extension.load(
        name="hps_fake_torch_npu_C",
        sources=[os.path.join(_HERE, "csrc", "fake_npu.cpp")],
        build_directory=build_dir,
        extra_cflags=["-O1"],
        verbose=os.environ.get("HPS_FAKE_NPU_VERBOSE") == "1",
    )


_library = _library_path()
_C = _build_extension()
_device_count = _C._init(_library)

torch.utils.rename_privateuse1_backend("npu")

from . import npu  # noqa: E402
from . import fake  # noqa: E402

torch._register_device_module("npu", npu)
torch.utils.generate_methods_for_privateuse1_backend(
    for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True)


def _at_exit():
    # Tensors freed while Python tears down leave their memory to the process.
    _C._shutdown()


import atexit  # noqa: E402

atexit.register(_at_exit)

__all__ = ["npu", "fake"]
