"""The examples of README.md, docs/api.md and docs/teams.md run as written, so they cannot drift.

Every ```python block of those pages carries a marker, an HTML comment on the line before it
(invisible once rendered):

    <!-- example: 2 PEs -->                         the block is a whole program: it runs as
                                                    written on 2 PEs under the package's launcher
    <!-- example: 2 PEs; each PE prints "TEXT" -->  ... and its output holds TEXT once per PE
    <!-- example: excerpt of examples/NAME.py -->   the block's lines are lines of that file, in
                                                    order; the file runs (below)

A block without a marker fails the first test. Every examples/*.py runs with the launcher
command its docstring gives. Each run: the installed package (the working directory is a
temporary one), no prelude, the launcher's environment (docs/api.md, "Starting the PEs"),
FutureWarnings as errors (a deprecated torch call fails it), a 30 s bound on every SHMEM wait
and a deadline on the whole job. An example that exits 77 (transformers missing) is skipped.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGES = ("README.md", "docs/api.md", "docs/teams.md")
EXAMPLES = os.path.join(ROOT, "examples")
LAUNCH = "hyper_parallel.core.multicore.shmem.launch"
SKIPPED = 77

_MARKER = re.compile(r"^<!-- example: (.*) -->$")
_PROGRAM = re.compile(r'^(\d+) PEs?(?:; each PE prints "(.*)")?$')
_EXCERPT = re.compile(r"^excerpt of (examples/[\w.]+\.py)$")
_COMMAND = re.compile(rf"^\s*(python -m {re.escape(LAUNCH)} .*)$", re.MULTILINE)


class Block:
    def __init__(self, page: str, line: int, marker: str | None, code: str) -> None:
        self.page, self.line, self.marker, self.code = page, line, marker, code

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def _blocks(page: str) -> list:
    """The ```python blocks of `page`, each with the marker on the line before it (or None)."""
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        lines = f.read().splitlines()
    blocks, index = [], 0
    while index < len(lines):
        if lines[index].strip() == "```python":
            end = index + 1
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            found = _MARKER.match(lines[index - 1].strip()) if index > 0 else None
            blocks.append(Block(page, index + 1, found.group(1) if found else None,
                                "\n".join(lines[index + 1:end]) + "\n"))
            index = end
        index += 1
    return blocks


ALL_BLOCKS = [block for page in PAGES for block in _blocks(page)]
PROGRAMS = [b for b in ALL_BLOCKS if b.marker and _PROGRAM.match(b.marker)]
EXCERPTS = [b for b in ALL_BLOCKS if b.marker and _EXCERPT.match(b.marker)]
EXAMPLE_FILES = sorted(name for name in os.listdir(EXAMPLES) if name.endswith(".py"))


def _launch(nproc: int, program: list, cwd: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HYPER_PARALLEL_SHMEM_TIMEOUT_SEC="30",
               PYTHONWARNINGS="error::FutureWarning")
    for name in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
        env.pop(name, None)  # the launcher's own, as a user's shell would have none
    command = [sys.executable, "-m", LAUNCH, "--nproc", str(nproc), "--timeout", "150"] + program
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=200)


def _report(done: subprocess.CompletedProcess) -> str:
    return f"exit status {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"


def test_every_python_block_of_the_pages_is_marked():
    unmarked = [b.name for b in ALL_BLOCKS if b.marker is None]
    assert not unmarked, f"python blocks without an example marker: {unmarked}"
    unknown = [f"{b.name}: {b.marker}" for b in ALL_BLOCKS
               if b.marker is not None and b not in PROGRAMS and b not in EXCERPTS]
    assert not unknown, f"markers of no known form: {unknown}"
    assert PROGRAMS and EXCERPTS, "the parser found no marked blocks"


@pytest.mark.parametrize("block", PROGRAMS, ids=lambda b: b.name)
def test_a_block_runs_as_written(block, tmp_path):
    nproc, prints = _PROGRAM.match(block.marker).groups()
    (tmp_path / "example.py").write_text(block.code)
    done = _launch(int(nproc), ["example.py"], str(tmp_path))
    assert done.returncode == 0, _report(done)
    if prints is not None:
        assert done.stdout.count(prints) == int(nproc), _report(done)


@pytest.mark.parametrize("block", EXCERPTS, ids=lambda b: b.name)
def test_an_excerpt_is_in_its_example_in_order(block):
    path = _EXCERPT.match(block.marker).group(1)
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        lines = [line.rstrip() for line in f.read().splitlines()]
    at = 0
    for wanted in (line.rstrip() for line in block.code.splitlines()):
        if not wanted:
            continue
        try:
            at = lines.index(wanted, at) + 1
        except ValueError:
            pytest.fail(f"{block.name}: this line is not in {path} (after the block's earlier "
                        f"lines): {wanted!r}")


@pytest.mark.parametrize("name", EXAMPLE_FILES)
def test_an_example_runs_with_the_command_it_documents(name, tmp_path):
    with open(os.path.join(EXAMPLES, name), encoding="utf-8") as f:
        found = _COMMAND.search(f.read())
    assert found, f"examples/{name} documents no '{LAUNCH}' command"
    words = shlex.split(found.group(1))
    assert words[-1] == f"examples/{name}", words
    nproc = int(words[words.index("--nproc") + 1])
    done = _launch(nproc, [os.path.join(EXAMPLES, name)], str(tmp_path))
    if done.returncode == SKIPPED:
        pytest.skip(f"examples/{name} cannot run here: {done.stdout.strip()}")
    assert done.returncode == 0, _report(done)
    missing = [rank for rank in range(nproc) if f"PE {rank}:" not in done.stdout]
    assert not missing, f"no report from PEs {missing}\n" + _report(done)
