"""Every torch.npu / torch_npu name our sources touch exists in the real torch_npu.

torch_npu needs Ascend's CANN toolkit to import, so its names are read from the files of the
torch-npu wheel scripts/setup_deps.sh unpacks (its Python sources, and the strings of its
compiled libraries for what it defines in C, like the npu_stream property of a Stream). The
names come from a scan of python/ and ccsrc/bindings/ (tests/python/torch_npu_wheel.py), plus a
minimum set our NPU streams path uses, checked even before our sources use them. Skipped when
the wheel is not there (scripts/setup_deps.sh could not fetch it); $HPS_TORCH_NPU_WHEEL_DIR
points at another unpacked wheel.
"""

from __future__ import annotations

import os
import re

import pytest

import torch_npu_wheel as tnw

CALL = tnw.CALL

# The minimum set: what our NPU streams path calls (torch.npu.current_stream().npu_stream and
# the device, stream and event calls around it), and the Stream / Event methods it may use.
EXPECTED = [
    ("torch.npu", "current_stream"),
    ("torch.npu", "current_stream", CALL, "npu_stream"),
    ("torch.npu", "current_stream", CALL, "synchronize"),
    ("torch.npu", "current_stream", CALL, "wait_stream"),
    ("torch.npu", "current_stream", CALL, "record_event"),
    ("torch.npu", "current_device"),
    ("torch.npu", "set_device"),
    ("torch.npu", "Stream"),
    ("torch.npu", "Stream", CALL, "npu_stream"),
    ("torch.npu", "stream"),
    ("torch.npu", "synchronize"),
    ("torch.npu", "Event"),
    ("torch.npu", "Event", CALL, "record"),
    ("torch.npu", "Event", CALL, "wait"),
    ("torch.npu", "Event", CALL, "synchronize"),
]


def show(path) -> str:
    out = path[0]
    for segment in path[1:]:
        out += segment if segment == CALL else "." + segment
    return out


@pytest.fixture(scope="module")
def wheel() -> tnw.Wheel:
    root, where = tnw.wheel_root()
    if root is None:
        pytest.skip(f"no unpacked torch-npu wheel at {where} (scripts/setup_deps.sh fetches it; "
                    f"${tnw.ENV_OVERRIDE} points at another)")
    return tnw.Wheel(root)


@pytest.fixture(scope="module")
def uses() -> tnw.Uses:
    return tnw.scan_repo()


# --- The scanner on synthetic sources (no wheel needed) ----------------------------------------

PY_SNIPPET = '''
import torch
import torch_npu
from torch_npu.npu import Event as NpuEvent
import torch_npu.npu as tnpu

def enqueue(x):
    dev = torch.npu.current_device()
    torch.npu.set_device(dev)
    handle = torch.npu.current_stream().npu_stream
    side = torch.npu.Stream()
    side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(side):
        pass
    done = NpuEvent()
    tnpu.synchronize()
    getattr(torch_npu, "npu_format_cast")
    return x.npu_private_handle  # an object passed in: its owner is unknown

# Comments and strings are not uses: torch.npu.not_a_use
TEXT = "torch.npu.nor_this"
'''

CPP_SNIPPET = r'''
// torch.npu.comment_is_not_a_use
py::object NpuStream() {
  py::object npu = py::module_::import("torch").attr("npu");
  npu.attr("set_device")(0);
  auto current = npu.attr("current_stream")();
  auto raw = current.attr("npu_stream").cast<std::uintptr_t>();
  py::module_::import("torch_npu").attr("npu").attr("synchronize")();
  py::object event(py::module_::import("torch_npu.npu").attr("Event")());
  event.attr("record")(current);
  static py::object* const device = new py::object(  // kept past interpreter exit
      py::module_::import("torch").attr("npu").attr("current_device"));
  const int index = (*device)().cast<int>();
  static py::object* const stream_of = new py::object(npu.attr("Stream"));
  (*stream_of)().attr("wait_stream")(current);
  return other.attr("npu_private_handle");  /* attr("npu_in_comment") */
}
'''


def test_scanner_finds_python_uses():
    found = tnw.scan_python(PY_SNIPPET, "snippet.py").paths
    expected = {
        ("torch.npu", "current_device"), ("torch.npu", "set_device"),
        ("torch.npu", "current_stream"), ("torch.npu", "current_stream", CALL, "npu_stream"),
        ("torch.npu", "Stream"), ("torch.npu", "Stream", CALL, "wait_stream"),
        ("torch.npu", "stream"), ("torch.npu", "Event"), ("torch.npu", "synchronize"),
        ("torch_npu", "npu_format_cast"), (tnw.UNKNOWN, "npu_private_handle"),
    }
    assert expected <= set(found), f"missed: {sorted(expected - set(found))}"
    assert not any(p[-1] in ("not_a_use", "nor_this") for p in found), sorted(found)
    assert found[("torch.npu", "current_stream", CALL, "npu_stream")] == ["snippet.py:10"]


def test_scanner_finds_cpp_uses():
    found = tnw.scan_cpp(CPP_SNIPPET, "snippet.cc").paths
    expected = {
        ("torch.npu", "set_device"), ("torch.npu", "current_stream"),
        ("torch.npu", "current_stream", CALL, "npu_stream"), ("torch.npu", "synchronize"),
        ("torch.npu", "Event"), ("torch.npu", "Event", CALL, "record"),
        ("torch.npu", "current_device"), ("torch.npu", "Stream", CALL, "wait_stream"),
        (tnw.UNKNOWN, "npu_private_handle"),
    }
    assert expected <= set(found), f"missed: {sorted(expected - set(found))}"
    assert not any(p[-1] in ("comment_is_not_a_use", "npu_in_comment") for p in found), \
        sorted(found)
    assert found[("torch.npu", "current_stream", CALL, "npu_stream")] == ["snippet.cc:7"]


def test_scanner_leaves_out_our_own_npu_names():
    uses = tnw.scan_python("class A:\n    def __init__(self):\n        self.npu_ready = 1\n"
                           "def f(a):\n    return a.npu_ready\n", "own.py")
    assert (tnw.UNKNOWN, "npu_ready") in uses.paths
    assert (tnw.UNKNOWN, "npu_ready") not in uses.checked()


def test_scan_reads_our_sources():
    files = list(tnw.source_files())
    assert any(kind == "py" for _, kind in files) and any(kind == "cpp" for _, kind in files)
    tnw.scan_repo()  # every file parses


# Independent of the scanner: a plain text search for each minimum-set name in a form that
# clearly reaches torch_npu: torch.npu.NAME / attr("NAME") beside torch_npu, a method called
# straight on the result (torch.npu.current_stream().NAME), or an npu-named member anywhere
# (.npu_stream, attr("npu_stream")). Where it hits, the scan must have found that name too, on
# an owner it followed back to torch.npu / torch_npu.
def _text_hits(path) -> list:
    name = re.escape(path[-1])
    hits = []
    for file, kind in tnw.source_files():
        text = file.read_text(encoding="utf-8", errors="replace")
        if kind == "py":
            if len(path) == 2:
                pattern = r"\b(?:torch|torch_npu)\.npu\.%s\b" % name
            elif tnw.npu_named(path[-1]):
                pattern = r"\.\s*%s\b" % name
            else:
                pattern = r"\b(?:torch|torch_npu)\.npu\.%s\(.*?\)\.%s\b" % (
                    re.escape(path[1]), name)
        else:
            if '"torch_npu' not in text and 'attr("npu")' not in text:
                continue
            if len(path) == 2 or tnw.npu_named(path[-1]):
                pattern = r'\battr\(\s*"%s"\s*\)' % name
            else:
                pattern = r'\battr\(\s*"%s"\s*\)\s*\(.*?\)\s*\.\s*attr\(\s*"%s"\s*\)' % (
                    re.escape(path[1]), name)
        for m in re.finditer(pattern, text):
            hits.append(f"{file.relative_to(tnw.REPO)}:{text.count(chr(10), 0, m.start()) + 1}")
    return hits


@pytest.mark.parametrize("path", EXPECTED, ids=show)
def test_scan_finds_expected_names_in_our_sources(path, uses):
    hits = _text_hits(path)
    if not hits:
        return  # not (yet) in our sources in a form a text search sees
    found = [p for p in uses.paths if p[-1] == path[-1] and p[0] in ("torch.npu", "torch_npu")]
    assert found, (f"{show(path)} is used at {', '.join(hits)} but the scan of our sources "
                   f"(tests/python/torch_npu_wheel.py) did not follow it back to torch.npu / "
                   f"torch_npu: teach the scanner that form")


# --- The names against the wheel ---------------------------------------------------------------

def test_wheel_is_the_pinned_torch_npu(wheel):
    version = tnw.pinned_version()
    text = (wheel.package / "version.py").read_text()
    if tnw.ENV_OVERRIDE not in os.environ:
        assert re.search(r"__version__\s*=\s*['\"]%s" % re.escape(version), text), \
            f"{wheel.package}/version.py is not torch-npu {version}: {text[:200]!r}"
    assert wheel.libraries, f"no torch_npu/_C*.so or torch_npu/lib/*.so under {wheel.root}"


def test_torch_npu_is_torch_npu_npu(wheel):
    # The scan treats torch.npu and torch_npu.npu as one module: torch_npu must register it so.
    assert wheel.registers_torch_npu(), \
        "torch_npu no longer calls torch._register_device_module('npu', torch_npu.npu)"


def test_current_stream_returns_a_stream(wheel):
    found = wheel.module("torch_npu.npu").lookup("current_stream")
    assert found and found.kind == "function", found
    cls = wheel.returned_class(found.target)
    assert cls is not None and cls.node.name == "Stream", \
        "torch.npu.current_stream() no longer returns a torch_npu.npu.Stream"
    assert wheel.c_string("_NPUStreamBase") and wheel.c_string("npu_stream"), \
        "the C base of torch_npu.npu.Stream (_NPUStreamBase) or its npu_stream is gone"


def test_missing_name_is_reported(wheel):
    where, searched = wheel.check(("torch.npu", "no_such_function_hps"))
    assert where is None and "torch_npu.npu" in searched
    where, _ = wheel.check(("torch.npu", "current_stream", CALL, "no_such_member_hps"))
    assert where is None


def test_every_name_we_touch_exists(wheel, uses):
    paths = dict(uses.checked())
    for path in EXPECTED:
        paths.setdefault(path, []).append("(minimum set in tests/python/test_torch_npu_names.py)")
    missing = []
    for path, wheres in sorted(paths.items()):
        where, searched = wheel.check(path)
        if where is None:
            missing.append(f"{show(path)}: not in {searched}; used at {', '.join(wheres)}")
    assert not missing, (f"names missing from torch-npu {tnw.pinned_version()} "
                         f"({wheel.root}):\n  " + "\n  ".join(missing))
