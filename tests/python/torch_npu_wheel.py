"""torch_npu's names, read from its unpacked wheel without importing it, and the torch.npu /
torch_npu names our sources touch (tests/python/test_torch_npu_names.py).

torch_npu cannot be imported without Ascend's CANN toolkit, so the wheel that
scripts/setup_deps.sh unpacks is read as files: its Python sources through `ast`, the names its
C extension defines through the strings of its shared libraries.

A use is a path: a root ("torch.npu", which is the package torch_npu.npu, or "torch_npu"), then
attribute names, with "()" where the value before it is called. torch.npu.current_stream().npu_stream
is ("torch.npu", "current_stream", "()", "npu_stream"); a use whose owner cannot be followed back
to a root (an object passed in) has the root "?".
"""

from __future__ import annotations

import ast
import mmap
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

REPO = Path(__file__).resolve().parents[2]
SETUP_DEPS = REPO / "scripts" / "setup_deps.sh"
ENV_OVERRIDE = "HPS_TORCH_NPU_WHEEL_DIR"

CALL = "()"
UNKNOWN = "?"
Path_ = Tuple[str, ...]


# --- Where the unpacked wheel is -------------------------------------------------------------

def pinned_version() -> Optional[str]:
    """The torch-npu version scripts/setup_deps.sh pins (its TORCH_NPU_VERSION=...)."""
    match = re.search(r"^TORCH_NPU_VERSION=([0-9A-Za-z.+-]+)\s*$", SETUP_DEPS.read_text(),
                      re.MULTILINE)
    return match.group(1) if match else None


def cache_dir(version: str) -> Path:
    """The folder scripts/setup_deps.sh unpacks the wheel into (outside the checkout)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hyper_parallel_shmem" / "torch_npu" / version


def wheel_root() -> Tuple[Optional[Path], str]:
    """(the folder holding the unpacked torch_npu/ package, or None; where it was looked for)."""
    override = os.environ.get(ENV_OVERRIDE)
    if override:
        candidates = [Path(override)]
        where = f"${ENV_OVERRIDE}={override}"
    else:
        version = pinned_version()
        if version is None:
            return None, f"no TORCH_NPU_VERSION= line in {SETUP_DEPS}"
        candidates = [cache_dir(version)]
        where = str(candidates[0])
    for candidate in candidates:
        if (candidate / "torch_npu" / "npu" / "__init__.py").is_file():
            return candidate, where
        if (candidate / "npu" / "__init__.py").is_file() and candidate.name == "torch_npu":
            return candidate.parent, where  # pointed at the package itself
    return None, where


# --- Scanning our sources ----------------------------------------------------------------------

@dataclass
class Uses:
    """Paths our sources touch, each with the places (file:line) that touch it."""
    paths: Dict[Path_, List[str]] = field(default_factory=dict)
    # Attribute names our own code defines (a free-standing `x.npu_foo` may be ours).
    own_names: set = field(default_factory=set)

    def add(self, path: Path_, where: str) -> None:
        self.paths.setdefault(tuple(path), []).append(where)

    def merge(self, other: "Uses") -> None:
        for path, wheres in other.paths.items():
            for where in wheres:
                self.add(path, where)
        self.own_names |= other.own_names

    def checked(self) -> Dict[Path_, List[str]]:
        """The uses to check: free-standing names our own code defines are left out."""
        return {p: w for p, w in self.paths.items()
                if not (p[0] == UNKNOWN and p[-1] in self.own_names)}


def _normalise(path: Path_) -> Path_:
    # torch.npu and torch_npu.npu are the same module (torch_npu registers one as the other).
    if path[:2] in (("torch", "npu"), ("torch_npu", "npu")):
        return ("torch.npu",) + path[2:]
    return path


def npu_named(name: str) -> bool:
    """An attribute whose name says it is torch_npu's (npu_stream, is_npu), not `input`'s."""
    return name != "npu" and re.search(r"(?:^|_)npu(?:_|$)", name) is not None


def _is_npu(path: Optional[Path_]) -> bool:
    return bool(path) and path[0] in ("torch.npu", "torch_npu")


class _PyScanner:
    """Follows attribute chains from torch / torch_npu in one Python file (flow-insensitive:
    a name is an alias only where every binding of it in the file is the same npu path)."""

    def __init__(self, source: str, label: str) -> None:
        self.tree = ast.parse(source)
        self.label = label
        self.uses = Uses()
        self.aliases: Dict[str, Path_] = {"torch": ("torch",), "torch_npu": ("torch_npu",)}

    def resolve(self, node: ast.AST) -> Optional[Path_]:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return _normalise(base + (node.attr,)) if base else None
        if isinstance(node, ast.Call):
            func = node.func
            const = [a.value for a in node.args[1:2]
                     if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if isinstance(func, ast.Name) and func.id in ("getattr", "hasattr") and const:
                base = self.resolve(node.args[0])
                return _normalise(base + (const[0],)) if base else None
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__") and node.args and \
                    isinstance(node.args[0], ast.Constant) and \
                    str(node.args[0].value).split(".")[0] in ("torch", "torch_npu"):
                return _normalise(tuple(str(node.args[0].value).split(".")))
            base = self.resolve(func)
            return base + (CALL,) if base else None
        return None

    def _bindings(self) -> Dict[str, List[Optional[Path_]]]:
        """Every binding of every name in the file: its npu path, or None (anything else)."""
        out: Dict[str, List[Optional[Path_]]] = {}

        def bind(name: str, path: Optional[Path_]) -> None:
            out.setdefault(name, []).append(path)

        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        bind(alias.asname, _normalise(tuple(alias.name.split("."))))
                    else:
                        top = alias.name.split(".")[0]
                        bind(top, (top,) if top in ("torch", "torch_npu") else None)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                module = _normalise(tuple(node.module.split(".")))
                for alias in node.names:
                    if alias.name == "*":
                        continue
                    path = _normalise(module + (alias.name,))
                    bind(alias.asname or alias.name,
                         path if _is_npu(path) or path == ("torch",) else None)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                value = getattr(node, "value", None)
                for target in targets:
                    for sub in ast.walk(target):
                        if isinstance(sub, ast.Name):
                            single = isinstance(target, ast.Name) and value is not None
                            bind(sub.id, ("@", id(value)) if single else None)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                args = node.args
                for arg in args.posonlyargs + args.args + args.kwonlyargs + \
                        [a for a in (args.vararg, args.kwarg) if a]:
                    bind(arg.arg, None)
                if not isinstance(node, ast.Lambda):
                    bind(node.name, None)
            elif isinstance(node, ast.ClassDef):
                bind(node.name, None)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                for sub in ast.walk(node.target):
                    if isinstance(sub, ast.Name):
                        bind(sub.id, None)
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                for sub in ast.walk(node.optional_vars):
                    if isinstance(sub, ast.Name):
                        bind(sub.id, None)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                bind(node.name, None)
        return out

    def scan(self) -> Uses:
        bindings = self._bindings()
        values = {id(n.value): n.value for n in ast.walk(self.tree)
                  if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr))
                  and getattr(n, "value", None) is not None}
        # Assignments resolve through other aliases: iterate to a fixed point.
        for _ in range(8):
            changed = False
            for name, paths in bindings.items():
                resolved = []
                for path in paths:
                    if path and path[0] == "@":
                        path = self.resolve(values[path[1]])
                    resolved.append(path if _is_npu(path) or path == ("torch",) else None)
                first = resolved[0]
                alias = first if first is not None and all(p == first for p in resolved) \
                    else None
                if alias is not None and self.aliases.get(name) != alias:
                    self.aliases[name] = alias
                    changed = True
                elif alias is None and name in self.aliases:
                    del self.aliases[name]
                    changed = True
            if not changed:
                break

        for node in ast.walk(self.tree):
            where = f"{self.label}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                module = _normalise(tuple(node.module.split(".")))
                for alias in node.names:
                    path = _normalise(module + (alias.name,))
                    if _is_npu(path) and len(path) > 1 and alias.name != "*":
                        self.uses.add(path, where)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    path = _normalise(tuple(alias.name.split(".")))
                    if _is_npu(path) and len(path) > 1:
                        self.uses.add(path, where)
            elif isinstance(node, (ast.Attribute, ast.Call)):
                path = self.resolve(node)
                if _is_npu(path) and len(path) > 1 and path[-1] != CALL:
                    self.uses.add(path, where)
                elif path is None:
                    name = _attribute_name(node)
                    if name and npu_named(name):
                        self.uses.add((UNKNOWN, name), where)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.uses.own_names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                self.uses.own_names.add(node.attr)
        return self.uses


def _attribute_name(node: ast.AST) -> Optional[str]:
    """The attribute an Attribute or a getattr(x, "name") reads (None for anything else)."""
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
        return node.attr
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id in ("getattr", "hasattr") and len(node.args) >= 2 and \
            isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
        return node.args[1].value
    return None


def scan_python(source: str, label: str = "<python>") -> Uses:
    return _PyScanner(source, label).scan()


def _blank_cpp_comments(source: str) -> str:
    """The source with its comments blanked (offsets and newlines kept), string literals kept."""
    out = list(source)
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if source.startswith("//", i):
            j = source.find("\n", i)
            j = n if j < 0 else j
            out[i:j] = " " * (j - i)
            i = j
        elif source.startswith("/*", i):
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out[i:j] = [ch if ch == "\n" else " " for ch in source[i:j]]
            i = j
        elif c == 'R' and source.startswith('R"', i) and (i == 0 or not
                                                             source[i - 1].isalnum()):
            m = re.match(r'R"([^(\s]*)\(', source[i:])
            if m:
                end = source.find(")" + m.group(1) + '"', i)
                i = n if end < 0 else end + len(m.group(1)) + 2
            else:
                i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and source[j] != c and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            i = j + 1
        else:
            i += 1
    return "".join(out)


_CPP_ROOT = re.compile(r'\bimport\s*\(\s*"(torch_npu\.npu|torch_npu|torch)"\s*\)')
_CPP_ATTR = re.compile(r'\s*(?:\.|->)\s*attr\s*\(\s*"([A-Za-z_][A-Za-z0-9_]*)"\s*\)')
# `name = <chain>` (also `name = new py::object(<chain>)`), or a declaration
# `py::object name(<chain>)` / `auto name{<chain>}`.
_CPP_ASSIGNED = re.compile(r'(?:\b([A-Za-z_][A-Za-z0-9_]*)\s*=\s*'
                           r'(?:new\s+[A-Za-z_][\w:<>]*\s*[({]\s*)?$)|'
                           r'(?:(?:\bpy::\w+|\bauto|\bobject|\bhandle)\s*[&*]?\s*(?:const\s+)?'
                           r'([A-Za-z_][A-Za-z0-9_]*)\s*[({]\s*$)')
_CPP_ANY_ATTR = re.compile(r'\battr\s*\(\s*"([A-Za-z_][A-Za-z0-9_]*)"\s*\)')


def _cpp_chain(text: str, pos: int) -> Tuple[List[str], int, List[int]]:
    """The .attr("x") and call segments from pos: (segments, end, offset of each segment)."""
    segments: List[str] = []
    offsets: List[int] = []
    while True:
        m = _CPP_ATTR.match(text, pos)
        if m:
            segments.append(m.group(1))
            offsets.append(m.start(1))
            pos = m.end()
            continue
        j = pos
        while j < len(text) and text[j] in " \t\n":
            j += 1
        if j < len(text) and text[j] == "(":
            depth, k = 0, j
            while k < len(text):
                if text[k] == "(":
                    depth += 1
                elif text[k] == ")":
                    depth -= 1
                    if depth == 0:
                        break
                elif text[k] == '"':
                    k += 1
                    while k < len(text) and text[k] != '"':
                        k += 2 if text[k] == "\\" else 1
                k += 1
            segments.append(CALL)
            offsets.append(j)
            pos = k + 1
            continue
        return segments, pos, offsets


def scan_cpp(source: str, label: str = "<c++>") -> Uses:
    """pybind11 chains from py::module_::import("torch_npu" / "torch_npu.npu" / "torch") through
    .attr("...") and calls, also through the variables such a chain is assigned to."""
    text = _blank_cpp_comments(source)
    uses = Uses()
    line_of = lambda offset: text.count("\n", 0, offset) + 1  # noqa: E731
    variables: Dict[str, Path_] = {}
    attributed: set = set()

    def follow(start_path: Path_, start: int, expr_start: int) -> None:
        segments, _, offsets = _cpp_chain(text, start)
        path = start_path
        for segment, offset in zip(segments, offsets):
            path = _normalise(path + (segment,))
            if segment != CALL:
                attributed.add(offset)
                if _is_npu(path) and len(path) > 1:
                    uses.add(path, f"{label}:{line_of(offset)}")
        assigned = _CPP_ASSIGNED.search(text[max(0, expr_start - 200):expr_start])
        name = assigned and (assigned.group(1) or assigned.group(2))
        if name and (_is_npu(path) or path == ("torch",)) and variables.get(name) != path:
            variables[name] = path
            pending.append(name)

    pending: List[str] = []
    for m in _CPP_ROOT.finditer(text):
        # The start of the expression: back over `py::module_::` and the like.
        head = re.search(r'[A-Za-z_:]*$', text[:m.start()])
        follow(_normalise(tuple(m.group(1).split("."))), m.end(), head.start())
    seen = set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        # name, or *name / (*name) where it holds a pointer to the object.
        for m in re.finditer(r'(?:\(\s*\*\s*' + re.escape(name) + r'\s*\)|'
                             r'(?<![A-Za-z0-9_.:>"])\*?\s*' + re.escape(name) +
                             r'\b)(?!\s*(?:=[^=]|\{))', text):
            if _CPP_ASSIGNED.search(text[max(0, m.start() - 200):m.end()] + "("):
                continue  # its own declaration `py::object name(...)`
            follow(variables[name], m.end(), m.start())
    for m in _CPP_ANY_ATTR.finditer(text):
        name = m.group(1)
        if m.start(1) not in attributed and npu_named(name):
            uses.add((UNKNOWN, name), f"{label}:{line_of(m.start(1))}")
    for m in re.finditer(r'\.\s*def(?:_property\w*|_readonly\w*|_readwrite\w*|_static)?\s*\(\s*'
                         r'"([A-Za-z_][A-Za-z0-9_]*)"', text):
        uses.own_names.add(m.group(1))
    return uses


PY_DIRS = ("python",)
CPP_DIRS = ("ccsrc/bindings",)
CPP_SUFFIXES = (".cc", ".cpp", ".cxx", ".h", ".hpp")


def source_files(root: Path = REPO) -> Iterable[Tuple[Path, str]]:
    """(file, "py" or "cpp") for every source the scan reads."""
    for folder in PY_DIRS:
        for path in sorted((root / folder).rglob("*.py")):
            yield path, "py"
    for folder in CPP_DIRS:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in CPP_SUFFIXES and path.is_file():
                yield path, "cpp"


def scan_repo(root: Path = REPO) -> Uses:
    uses = Uses()
    for path, kind in source_files(root):
        label = str(path.relative_to(root))
        text = path.read_text(encoding="utf-8", errors="replace")
        uses.merge(scan_python(text, label) if kind == "py" else scan_cpp(text, label))
    return uses


# --- Reading the wheel -------------------------------------------------------------------------

@dataclass
class Found:
    where: str          # file:line in the wheel, or "C strings of <libs>"
    kind: str           # "module", "class", "function", "value", "c"
    target: object = None  # _Module / _Class / return class for calls


@dataclass
class _Class:
    module: "_Module"
    node: ast.ClassDef


class _Module:
    def __init__(self, wheel: "Wheel", dotted: str, file: Path) -> None:
        self.wheel, self.dotted, self.file = wheel, dotted, file
        self.is_package = file.name == "__init__.py"
        self.tree = _parse(file.read_text(encoding="utf-8", errors="replace"))
        self._names: Optional[Dict[str, Tuple[str, object]]] = None
        self.listed: List[str] = []

    def _absolute(self, module: Optional[str], level: int) -> str:
        if level == 0:
            return module or ""
        parts = self.dotted.split(".")
        if not self.is_package:
            parts = parts[:-1]
        parts = parts[:len(parts) - (level - 1)]
        return ".".join(parts + ([module] if module else []))

    def names(self) -> Dict[str, Tuple[str, object]]:
        """name -> (how it is bound, what: an ast node, or ("import", module, name))."""
        if self._names is not None:
            return self._names
        names: Dict[str, Tuple[str, object]] = {}
        listed: List[Tuple[str, ast.AST]] = []  # __all__: what binds them wins
        self._names = names  # set first: star imports may come back here
        for node in self.tree.body:
            for sub in _top_level(node):
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.setdefault(sub.name, ("def", sub))
                    if sub.name == "__getattr__":  # names a module __getattr__ hands out
                        for cmp in ast.walk(sub):
                            if isinstance(cmp, ast.Compare):
                                for c in [cmp.left] + cmp.comparators:
                                    if isinstance(c, ast.Constant) and isinstance(c.value, str):
                                        names.setdefault(c.value, ("getattr", sub))
                elif isinstance(sub, ast.ClassDef):
                    names.setdefault(sub.name, ("class", sub))
                elif isinstance(sub, (ast.Assign, ast.AnnAssign)):
                    targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                    for target in targets:
                        for t in ast.walk(target):
                            if isinstance(t, ast.Name):
                                names.setdefault(t.id, ("assign", sub))
                            if isinstance(t, ast.Name) and t.id == "__all__" and \
                                    isinstance(sub.value, (ast.List, ast.Tuple)):
                                listed += [(e.value, sub) for e in sub.value.elts
                                           if isinstance(e, ast.Constant)
                                           and isinstance(e.value, str)]
                elif isinstance(sub, ast.Import):
                    for alias in sub.names:
                        names.setdefault(alias.asname or alias.name.split(".")[0],
                                         ("import", (alias.name if alias.asname else
                                                     alias.name.split(".")[0], None)))
                elif isinstance(sub, ast.ImportFrom):
                    source = self._absolute(sub.module, sub.level)
                    for alias in sub.names:
                        if alias.name == "*":
                            star = self.wheel.module(source)
                            if star is not None:
                                for name in star.public_names():
                                    names.setdefault(name, ("import", (source, name)))
                        else:
                            names.setdefault(alias.asname or alias.name,
                                             ("import", (source, alias.name)))
        for name, node in listed:
            names.setdefault(name, ("__all__", node))
        self.listed = [name for name, _ in listed]
        return names

    def public_names(self) -> List[str]:
        names = self.names()
        return self.listed or [n for n in names if not n.startswith("_")]

    def lookup(self, name: str, depth: int = 0) -> Optional[Found]:
        entry = self.names().get(name)
        if entry is None and self.is_package:
            sub = self.wheel.module(f"{self.dotted}.{name}")
            if sub is not None:
                return Found(self.wheel.rel(sub.file), "module", sub)
        if entry is None:
            return None
        how, what = entry
        where = f"{self.wheel.rel(self.file)}:{getattr(what, 'lineno', 0)}"
        if how == "import" and depth < 10:
            source, original = what
            if original is None:
                target = self.wheel.module(source)
                return Found(where, "module", target) if target else Found(where, "value")
            module = self.wheel.module(source)
            if module is None:
                return Found(where, "value")
            found = module.lookup(original, depth + 1)
            return found or Found(where, "value")
        if how == "class":
            return Found(where, "class", _Class(self, what))
        if how == "def":
            return Found(where, "function", (self, what))
        if how == "assign" and isinstance(what, (ast.Assign, ast.AnnAssign)) and \
                isinstance(what.value, (ast.Name, ast.Attribute)):
            # name = other_name (an alias): follow it inside this module.
            other = what.value
            if isinstance(other, ast.Attribute) and isinstance(other.value, ast.Name):
                mod = self.lookup(other.value.id, depth + 1)
                if mod and mod.kind == "module" and mod.target is not None:
                    return mod.target.lookup(other.attr, depth + 1) or Found(where, "value")
        return Found(where, "value")


def _parse(source: str) -> ast.Module:
    with warnings.catch_warnings():  # the wheel's invalid escapes in strings
        warnings.simplefilter("ignore")
        return ast.parse(source)


def _top_level(node: ast.stmt) -> Iterable[ast.stmt]:
    """A module-level statement, and those inside its top-level if/try blocks."""
    yield node
    if isinstance(node, ast.If):
        for sub in node.body + node.orelse:
            yield from _top_level(sub)
    elif isinstance(node, ast.Try):
        for sub in node.body + node.orelse + node.finalbody + \
                [s for h in node.handlers for s in h.body]:
            yield from _top_level(sub)


class Wheel:
    """The unpacked wheel's torch_npu package, read as files."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.package = root / "torch_npu"
        self._modules: Dict[str, Optional[_Module]] = {}
        self.libraries = sorted(self.package.glob("_C*.so")) + \
            sorted((self.package / "lib").glob("*.so"))
        self._strings: Dict[str, Optional[str]] = {}
        self._all_defs: Optional[set] = None

    def rel(self, path: Path) -> str:
        return str(path.relative_to(self.root))

    def module(self, dotted: str) -> Optional[_Module]:
        if dotted not in self._modules:
            parts = dotted.split(".")
            module = None
            if parts[0] == "torch_npu":
                base = self.root.joinpath(*parts)
                for file in (base / "__init__.py", base.with_suffix(".py")):
                    if file.is_file():
                        module = _Module(self, dotted, file)
                        break
            self._modules[dotted] = module
        return self._modules[dotted]

    def c_string(self, name: str) -> Optional[str]:
        """The first library holding name as a NUL-terminated string (not the tail of a longer
        identifier), or None."""
        if name not in self._strings:
            needle = name.encode() + b"\0"
            self._strings[name] = None
            for lib in self.libraries:
                with open(lib, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                    pos = m.find(needle)
                    while pos >= 0:
                        before = m[pos - 1:pos] if pos else b"\0"
                        if not (before.isalnum() or before == b"_"):
                            self._strings[name] = self.rel(lib)
                            break
                        pos = m.find(needle, pos + 1)
                if self._strings[name]:
                    break
        return self._strings[name]

    def class_member(self, cls: _Class, name: str, depth: int = 0) -> Optional[Found]:
        """name in the class body, its Python bases' bodies, or (for a base defined in C, like
        torch_npu._C._NPUStreamBase) in the libraries' strings beside the base's own name."""
        for node in cls.node.body:
            hit = None
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                hit = node.name == name
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                hit = any(isinstance(t, ast.Name) and t.id == name for t in targets)
            if hit:
                return Found(f"{self.rel(cls.module.file)}:{node.lineno}", "value")
        if depth > 10:
            return None
        for base in cls.node.bases:
            dotted = ast.unparse(base)
            if "._C." in f".{dotted}" or dotted.startswith("_C."):
                base_name = dotted.split(".")[-1]
                lib = self.c_string(name)
                if self.c_string(base_name) and lib:
                    return Found(f"C strings of {lib} (base {dotted})", "c")
                continue
            found = self._resolve_expr(cls.module, base)
            if found and found.kind == "class":
                member = self.class_member(found.target, name, depth + 1)
                if member:
                    return member
        return None

    def _resolve_expr(self, module: _Module, node: ast.AST) -> Optional[Found]:
        if isinstance(node, ast.Name):
            return module.lookup(node.id)
        if isinstance(node, ast.Attribute):
            owner = self._resolve_expr(module, node.value)
            if owner is None and isinstance(node.value, (ast.Name, ast.Attribute)):
                dotted = ast.unparse(node.value)
                target = self.module(dotted)
                owner = Found(dotted, "module", target) if target else None
            if owner and owner.kind == "module" and owner.target is not None:
                return owner.target.lookup(node.attr)
        return None

    def returned_class(self, function: Tuple[_Module, ast.AST]) -> Optional[_Class]:
        """The class a function returns, where each of its returns calls the same class."""
        module, node = function
        classes = []
        for sub in ast.walk(node):
            if isinstance(sub, ast.Return) and sub.value is not None:
                call = sub.value
                found = self._resolve_expr(module, call.func) \
                    if isinstance(call, ast.Call) else None
                if found is None or found.kind != "class":
                    return None
                classes.append(found.target)
        if classes and all(c.node is classes[0].node for c in classes):
            return classes[0]
        return None

    def any_definition(self, name: str) -> Optional[str]:
        """For a use whose owner is unknown: a def/class/attribute of that name anywhere in the
        wheel's Python, else the libraries' strings."""
        if self._all_defs is None:
            self._all_defs = {}
            for file in sorted(self.package.rglob("*.py")):
                try:
                    tree = _parse(file.read_text(encoding="utf-8", errors="replace"))
                except SyntaxError:
                    continue
                for node in ast.walk(tree):
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        self._all_defs.setdefault(node.name, f"{self.rel(file)}:{node.lineno}")
                    elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                        self._all_defs.setdefault(node.attr, f"{self.rel(file)}:{node.lineno}")
        if name in self._all_defs:
            return self._all_defs[name]
        lib = self.c_string(name)
        return f"C strings of {lib}" if lib else None

    def check(self, path: Path_) -> Tuple[Optional[str], str]:
        """(where the wheel defines the last name of path, or None; what was searched)."""
        if path[0] == UNKNOWN:
            return self.any_definition(path[-1]), "any torch_npu definition or C string"
        root = self.module("torch_npu.npu" if path[0] == "torch.npu" else "torch_npu")
        current: Optional[Found] = Found(self.rel(root.file), "module", root)
        searched = path[0]
        for i, segment in enumerate(path[1:], start=1):
            last = i == len(path) - 1
            if segment == CALL:
                if current.kind == "class":
                    current = Found(current.where, "instance", current.target)
                elif current.kind == "function":
                    cls = self.returned_class(current.target)
                    current = Found(current.where, "instance", cls) if cls else \
                        Found(current.where, "unknown")
                else:
                    current = Found(current.where, "unknown")
                searched += CALL
                continue
            found: Optional[Found] = None
            if current.kind == "module":
                found = current.target.lookup(segment)
                if found is None and current.target.dotted == "torch_npu":
                    lib = self.c_string(segment)  # e.g. operators bound from C at import
                    found = Found(f"C strings of {lib}", "c") if lib else None
                what = f"module {current.target.dotted}"
            elif current.kind in ("instance", "class") and current.target is not None:
                found = self.class_member(current.target, segment)
                what = f"class {current.target.node.name} ({self.rel(current.target.module.file)})"
            else:
                where = self.any_definition(segment)
                found = Found(where, "value") if where else None
                what = "any torch_npu definition or C string (owner's type unknown)"
            if found is None:
                return None, f"{what}, reached by {searched}"
            if last:
                return found.where, what
            searched += "." + segment
            current = found
        return current.where, searched

    def registers_torch_npu(self) -> Optional[str]:
        """Where torch_npu makes torch.npu its npu package (torch._register_device_module)."""
        pattern = re.compile(r'_register_device_module\(\s*["\']npu["\']\s*,\s*torch_npu\.npu\s*\)')
        for file in sorted(self.package.rglob("*.py")):
            text = file.read_text(encoding="utf-8", errors="replace")
            m = pattern.search(text)
            if m:
                return f"{self.rel(file)}:{text.count(chr(10), 0, m.start()) + 1}"
        return None
