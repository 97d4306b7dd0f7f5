"""The MoE layer is built on shmem's public API: it imports no private shmem module and parses
no diagnostic text (it asks shmem.backend_info() instead)."""

from __future__ import annotations

import ast
import pathlib

import hyper_parallel.core.multicore.mega_moe as mega_moe


def _sources():
    folder = pathlib.Path(mega_moe.__file__).parent
    return sorted(folder.glob("*.py"))


def _private_shmem_imports(path: pathlib.Path) -> list:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            parts = module.split(".")
            names = [alias.name for alias in node.names]
            if "shmem" in parts:
                after = parts[parts.index("shmem") + 1:]
                if any(part.startswith("_") for part in after):
                    found.append(f"{path.name}:{node.lineno}: from {module} import ...")
            if module.endswith("shmem") and any(name.startswith("_") for name in names):
                found.append(f"{path.name}:{node.lineno}: private names {names}")
        elif isinstance(node, ast.Attribute) and node.attr in ("snapshot",
                                                               "hyper_parallel_shmem_torch"):
            found.append(f"{path.name}:{node.lineno}: .{node.attr}")
    return found


def test_mega_moe_uses_only_shmems_public_api():
    sources = _sources()
    assert len(sources) >= 5, sources
    offences = [line for path in sources for line in _private_shmem_imports(path)]
    assert offences == []


def test_the_check_sees_a_private_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from ..shmem._runtime import native\nfrom ..shmem import _api\n"
                   "state = native.snapshot()\n")
    assert len(_private_shmem_imports(bad)) == 3
