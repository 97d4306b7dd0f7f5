#!/usr/bin/env python3
"""Checks that #include edges between the layers of ccsrc/ point one way (DESIGN §3).

Usage: check_layers.py [ccsrc dir] [--graph]

Every product file (tests, fakes and fuzz harnesses excepted) is assigned a layer by its folder;
each "..." include must go to the same layer or to one the table below allows. --graph prints
the folder-level include graph that was found. Exits 1 naming every include that runs the wrong
way.
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
    "ops/all_gather": {"base", "data_plane"},
    "ops/mega_moe": {"base", "data_plane"},
    "runtime": {"base", "data_plane", "backends", "ops/all_gather"},
    "bindings/torch": {"base", "data_plane", "backends", "runtime", "ops/mega_moe"},
    "tools": {"base", "runtime", "backends"},
}
# The one file that names the backends a build provides.
REGISTRATION = "backends/builtin_backends.cc"
SKIPPED = ("testing/", "tests/", "fuzz/")


def layer_of(relative: str) -> str:
    parts = relative.split("/")
    if parts[0] == "backends":
        return "backends/<vendor>" if len(parts) > 2 else "backends"
    if parts[0] in ("ops", "bindings"):
        return "/".join(parts[:2])
    return parts[0]


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = pathlib.Path(args[0] if args else pathlib.Path(__file__).resolve().parent.parent)
    edges, violations = set(), []
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".h", ".cc", ".cu") or not path.is_file():
            continue
        relative = path.relative_to(root).as_posix()
        if relative.startswith(SKIPPED) or relative.endswith("_test.cc"):
            continue
        source = layer_of(relative)
        source_folder = relative.rsplit("/", 1)[0]
        for line_number, line in enumerate(path.read_text().splitlines(), 1):
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
            if target_layer == source and (source != "backends/<vendor>"
                                           or target_folder == source_folder):
                continue
            if target_layer in ALLOWED.get(source, set()):
                continue
            if relative == REGISTRATION and target_layer == "backends/<vendor>":
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
