#!/usr/bin/env python3
"""Proves tools/check_layers.py can fail: it must pass a small tree that keeps the rules and
refuse each of the edges the rules forbid, naming the file and line. Run by ctest."""
import pathlib
import subprocess
import sys
import tempfile

CHECKER = pathlib.Path(__file__).resolve().parent / "check_layers.py"

CLEAN = {
    "base/status.h": "// a comment may say CUDA or CANN\n",
    "base/config.h": 'std::string backend = "auto";  // kept as given: the backends check it\n',
    "data_plane/collective.h": '#include "base/status.h"\n',
    "ops/all_to_all/all_to_all.h": '#include "data_plane/collective.h"\n',
    "ops/collectives.h": '#include "data_plane/collective.h"\n',
    "ops/collectives.cc": '#include "ops/collectives.h"\n#include "ops/all_to_all/all_to_all.h"\n',
    "backends/backend.h": '#include "base/status.h"\n',
    "runtime/runtime.cc": '#include "backends/backend.h"\n#include "data_plane/collective.h"\n'
                          "// ops:: in a comment names nothing\n",
    "bindings/torch/module.cc": '#include "ops/collectives.h"\n#include "runtime/runtime.cc"\n',
    "bindings/torch/heap_tensors.h": '#include "runtime/runtime.cc"\n',
    "ops/mega_moe/kernels.h": '#include "data_plane/collective.h"\n',
    "bindings/mega_moe/mega_moe.h": "",
    "bindings/mega_moe/mega_moe.cc": '#include "bindings/mega_moe/mega_moe.h"\n'
                                     '#include "bindings/torch/heap_tensors.h"\n'
                                     '#include "ops/mega_moe/kernels.h"\n'
                                     '#include "runtime/runtime.cc"\n'
                                     'm.def("moe_layout", &MoeLayoutDict);\n',
}

VIOLATIONS = {
    "runtime includes an op": (
        "runtime/runtime.cc", '#include "ops/all_to_all/all_to_all.h"\n',
        "runtime must not include ops/all_to_all/all_to_all.h"),
    "runtime names an op": (
        "runtime/runtime.cc", "auto& op = ops::AllToAll();\n", "runtime must not name an op"),
    "runtime includes the list of collectives": (
        "runtime/runtime.cc", '#include "ops/collectives.h"\n',
        "runtime must not include ops/collectives.h"),
    "the binding includes a concrete op": (
        "bindings/torch/module.cc", '#include "ops/all_to_all/all_to_all.h"\n',
        "bindings/torch must not include ops/all_to_all/all_to_all.h"),
    "the generic binding includes a consumer's op": (
        "bindings/torch/module.cc", '#include "ops/mega_moe/kernels.h"\n',
        "bindings/torch must not include ops/mega_moe/kernels.h"),
    "the generic binding includes a consumer's binding": (
        "bindings/torch/module.cc", '#include "bindings/mega_moe/mega_moe.h"\n',
        "bindings/torch must not include bindings/mega_moe/mega_moe.h"),
    "the generic binding names a consumer's op": (
        "bindings/torch/module.cc", 'm.def("moe_layout", &MoeLayoutDict);\n',
        "bindings/torch must not name a consumer (MegaMoE)"),
    "the generic binding names a consumer's namespace": (
        "bindings/torch/heap_tensors.h", "ops::MegaMoeLayout layout;\n",
        "bindings/torch must not name a consumer (MegaMoE)"),
    "a consumer's op includes its binding": (
        "ops/mega_moe/kernels.h", '#include "bindings/mega_moe/mega_moe.h"\n',
        "ops/mega_moe must not include bindings/mega_moe/mega_moe.h"),
    "an op includes another op": (
        "ops/all_to_all/all_to_all.h", '#include "ops/collectives.h"\n',
        "ops/<op> must not include ops/collectives.h"),
    "base names a backend": (
        "base/config.h", "enum class BackendKind { kAuto, kHost, kCuda, kCann };\n",
        "base must not name a vendor (Cuda)"),
    "base names a vendor's setting": (
        "base/config.h", 'inline constexpr char kNpuDevice[] = "ASCEND_DEVICE";\n',
        "base must not name a vendor (ASCEND)"),
    "a backend includes the runtime": (
        "backends/backend.h", '#include "runtime/runtime.cc"\n',
        "backends must not include runtime/runtime.cc"),
}


def check(tree: dict) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as root:
        for relative, text in tree.items():
            path = pathlib.Path(root, relative)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return subprocess.run([sys.executable, str(CHECKER), root], capture_output=True,
                              text=True)


def main() -> int:
    failures = []
    clean = check(CLEAN)
    if clean.returncode != 0:
        failures.append(f"the clean tree was refused: {clean.stderr}")
    for name, (relative, line, expected) in VIOLATIONS.items():
        tree = dict(CLEAN)
        tree[relative] = tree[relative] + line
        result = check(tree)
        if result.returncode != 1 or expected not in result.stderr:
            failures.append(f"{name}: exit {result.returncode}, stderr {result.stderr!r}")
    for failure in failures:
        print(failure, file=sys.stderr)
    print(f"{len(VIOLATIONS) + 1 - len(failures)} of {len(VIOLATIONS) + 1} cases as expected")
    return 1 if failures else 0


def test_check_layers_refuses_every_forbidden_edge():
    """The same cases under pytest."""
    assert main() == 0


if __name__ == "__main__":
    sys.exit(main())
