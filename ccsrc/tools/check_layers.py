#!/usr/bin/env python3
"""Checks that #include edges between the layers of ccsrc/ point one way (docs/architecture.md).

Usage: check_layers.py [ccsrc dir] [--graph]

Also checks the sizes: no product source over LINE_LIMIT lines, no binding source over
BINDING_LIMIT, the README no longer than README_LIMIT (below).

Every product file (tests, fakes and fuzz harnesses excepted) is assigned a layer by its folder;
each "..." include must go to the same layer or to one the table below allows. Two files may
name what their layer otherwise may not: backends/builtin_backends.cc names every backend, and
ops/collectives.cc every collective. The Runtime names no op at all: it neither includes ops/
nor mentions the ops:: namespace; it runs whatever collective it is given. The generic torch
binding names no consumer: it neither includes ops/mega_moe/ nor mentions MegaMoE in code
(mega_moe, MegaMoe, moe_...); a consumer's ops are bound in a folder of their own
(bindings/mega_moe/), over the generic binding's headers. base/ names no vendor or backend
in code (cuda, cann, ascend, acl, nvidia, npu, gpu): the backends' names live with the backends
(backends/backend_kind.h) and their settings are checked there. --graph prints the folder-level
include graph that was found. Exits 1 naming every violation.
"""
import pathlib
import re
import sys

# layer -> the layers it may include (besides itself)
ALLOWED = {
    "base": set(),
    "data_plane": {"base"},
    "backends": {"base", "data_plane"},
    "backends/<vendor>": {"base", "data_plane", "backends"},
    # How a host thread waits (doorbells, the wait policy, where each host call may be made):
    # shared by the host backend and the transports.
    "backends/wait": {"base", "data_plane", "backends"},
    # How the host backend reaches PEs it cannot map: the RemoteTransport interface and its
    # implementations (ucx/, the reordering transport for tests). It knows nothing of the host
    # backend that uses it.
    "backends/transport": {"base", "data_plane", "backends", "backends/wait"},
    "backends/host": {"base", "data_plane", "backends", "backends/wait", "backends/transport"},
    "ops": {"base", "data_plane"},  # the list of collectives (ops/collectives.h)
    "ops/<op>": {"base", "data_plane", "ops/reduce", "ops/exchange"},
    # What the reductions share (all_reduce, reduce_scatter): their arithmetic and kernel.
    "ops/reduce": {"base", "data_plane"},
    # How collectives whose sizes differ per member learn each other's (all_gather_v, ...).
    "ops/exchange": {"base", "data_plane"},
    "ops/mega_moe": {"base", "data_plane"},  # a consumer: only its own binding includes it
    "runtime": {"base", "data_plane", "backends"},
    "bindings/torch": {"base", "data_plane", "backends", "runtime", "ops", "ops/reduce"},
    # The OpenSHMEM C API: a binding without torch over the same Runtime.
    "bindings/openshmem": {"base", "data_plane", "backends", "runtime", "ops", "ops/reduce"},
    "bindings/mega_moe": {"base", "data_plane", "backends", "runtime", "ops/mega_moe",
                          "bindings/torch"},
    "tools": {"base", "runtime", "backends", "ops"},
}
# The files that name every member of a layer: the backends a build provides, and its
# collectives.
REGISTRATIONS = {
    "backends/builtin_backends.cc": {"backends/<vendor>", "backends/host", "backends/wait"},
    "ops/collectives.cc": {"ops/<op>"},
}
# The Runtime runs collectives it is given: a mention of the ops namespace is a violation too.
NAMES_NO_OP = "runtime"
# layer -> the consumers it must not name in code (comments aside), by a pattern and a name.
NAMES_NO_CONSUMER = {
    "bindings/torch": [(re.compile(r"mega_?moe|\bmoe", re.IGNORECASE), "MegaMoE")],
}
# layer -> the vendors it must not name in code (comments aside): base/ is shared by every layer
# and holds no backend's name or setting.
NAMES_NO_VENDOR = {
    "base": re.compile(r"cuda|cann|ascend|\bacl|nvidia|\bnpu|\bgpu", re.IGNORECASE),
}
SKIPPED = ("testing/", "tests/", "fuzz/")


def layer_of(relative: str) -> str:
    """The layer of a file; an explicit entry of ALLOWED ("ops/mega_moe") wins over the
    generic one ("ops/<op>")."""
    parts = relative.split("/")
    if parts[0] == "backends":
        if len(parts) == 2:
            return "backends"
        return "backends/" + parts[1] if "backends/" + parts[1] in ALLOWED else "backends/<vendor>"
    if parts[0] == "ops":
        if len(parts) == 2:
            return "ops"
        return "ops/" + parts[1] if "ops/" + parts[1] in ALLOWED else "ops/<op>"
    if parts[0] == "bindings":
        return "/".join(parts[:2])
    return parts[0]


def same_layer(source: str, target_layer: str, source_folder: str, target_folder: str) -> bool:
    """Within a layer, includes are free; each vendor and each op is a layer of its own."""
    if target_layer != source:
        return False
    if source in ("backends/<vendor>", "ops/<op>"):
        return target_folder == source_folder
    return True


# Sizes (docs/contributing.md): a product source (.cc, .h, .cu, .py under ccsrc/ and python/;
# tests, fakes and fuzz harnesses excepted) has at most LINE_LIMIT lines, a binding source
# (ccsrc/bindings/) at most BINDING_LIMIT, and the README at most README_LIMIT.
LINE_LIMIT = 600
BINDING_LIMIT = 450
README_LIMIT = 200
# Files allowed over their limit, each at most as long as it is here until it is split: an
# entry may only shrink, and goes once its file is within the limit. None today.
OVER_LIMIT: dict = {}


def size_violations(repo: pathlib.Path) -> list:
    """Every file over its limit (and not allowed its present size by OVER_LIMIT)."""
    found = []
    for folder in ("ccsrc", "python"):
        for path in sorted((repo / folder).rglob("*")):
            if path.suffix not in (".h", ".cc", ".cu", ".py") or not path.is_file():
                continue
            relative = path.relative_to(repo).as_posix()
            inner = relative.split("/", 1)[1]
            if inner.startswith(SKIPPED) or "/tests/" in relative or "_test." in path.name:
                continue
            limit = BINDING_LIMIT if inner.startswith("bindings/") else LINE_LIMIT
            lines = len(path.read_text(errors="replace").splitlines())
            allowed = max(limit, OVER_LIMIT.get(relative, 0))
            if lines > allowed:
                found.append(f"{relative}: {lines} lines, over its limit of {allowed}: split it "
                             f"along its seams")
            elif relative in OVER_LIMIT and lines <= limit:
                found.append(f"{relative}: {lines} lines, within {limit}: drop it from OVER_LIMIT")
    readme = repo / "README.md"
    if readme.is_file() and len(readme.read_text().splitlines()) > README_LIMIT:
        found.append(f"README.md: over {README_LIMIT} lines: it is an entry page; move the rest "
                     f"into docs/")
    return found


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = pathlib.Path(args[0] if args else pathlib.Path(__file__).resolve().parent.parent)
    edges, violations = set(), []
    if (root.parent / "python").is_dir():
        violations.extend(size_violations(root.parent))
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".h", ".cc", ".cu") or not path.is_file():
            continue
        relative = path.relative_to(root).as_posix()
        if relative.startswith(SKIPPED) or relative.endswith("_test.cc"):
            continue
        source = layer_of(relative)
        source_folder = relative.rsplit("/", 1)[0]
        for line_number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("//")[0]
            if source == NAMES_NO_OP and re.search(r"\bops::", code):
                violations.append(f"{relative}:{line_number}: runtime must not name an op "
                                  f"(ops::)")
            for pattern, consumer in NAMES_NO_CONSUMER.get(source, []):
                if pattern.search(code):
                    violations.append(f"{relative}:{line_number}: {source} must not name a "
                                      f"consumer ({consumer})")
            vendor = NAMES_NO_VENDOR.get(source)
            if vendor is not None and (found := vendor.search(code)):
                violations.append(f"{relative}:{line_number}: {source} must not name a vendor "
                                  f"({found.group(0)})")
            match = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not match:
                continue
            target = match.group(1)
            if not (root / target).is_file():
                continue  # not ours: a system or vendor header
            target_layer = layer_of(target)
            target_folder = target.rsplit("/", 1)[0]
            if target_folder != source_folder:
                edges.add((source_folder, target_folder))
            if same_layer(source, target_layer, source_folder, target_folder):
                continue
            if target_layer in ALLOWED.get(source, set()):
                continue
            if target_layer in REGISTRATIONS.get(relative, set()):
                continue
            violations.append(f"{relative}:{line_number}: {source} must not include {target}")
    if "--graph" in sys.argv:
        for source, target in sorted(edges):
            print(f"{source} -> {target}")
    for violation in violations:
        print(violation, file=sys.stderr)
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
