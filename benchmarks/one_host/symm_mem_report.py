"""The driver side of benchmarks/one_host/symm_mem_bench.py for benchmarks/run.py (--symm-mem): the
launches per PE count, the rows summarised from the PEs' JSON lines, and the report's tables.
Imports no torch."""

from __future__ import annotations

import json
import statistics

from common.launch import pes_command
from common.report import header
from common.units import csv, human
from one_host.symm_mem_bench import CONFIGS, GLOO_NAME, OPS, SCRIPT, SIZES, config_text


def jobs(quick: bool) -> list:
    """(label, command) of the measurements: one launch per PE count."""
    reps = ["--reps", "16" if quick else "48", "--moe-reps", "8" if quick else "32"]
    configs = ["small"] if quick else list(CONFIGS)
    out = []
    for pes in (2, 4):
        out.append((f"symm_mem x{pes}", pes_command(pes, 600, [
            SCRIPT, "--sizes", csv(SIZES), "--configs",
            ",".join(config_text(name) for name in configs)] + reps)))
    return out


def _median(values) -> float | None:
    return statistics.median(values) if values else None


def summarise(records: list) -> list:
    """One row per (kind, operator or configuration, size, PEs), rounds pooled."""
    merged: dict = {}
    for r in records:
        key = (r["symm"], r.get("op") or r.get("config"), r.get("bytes"), r["pes"])
        if key not in merged:
            merged[key] = json.loads(json.dumps(r))
            continue
        for path, values in r.get("samples_us", {}).items():
            merged[key]["samples_us"].setdefault(path, []).extend(values)
        merged[key]["errors"] = merged[key].get("errors", []) + r.get("errors", [])
    rows = []
    for r in merged.values():
        row = dict(r)
        row["median_us"] = {path: _median(v) for path, v in r.get("samples_us", {}).items()}
        m = row["median_us"]
        if r["symm"] == "op":
            symm, gloo = m.get("symm"), m.get("gloo")
            row["ratio"] = gloo / symm if symm and gloo else None
            known = m.get("gloo_known")
            row["ratio_known"] = known / symm if symm and known else None
        elif r["symm"] == "moe":
            t, mega, a2a = m.get("torch_symm"), m.get("mega"), m.get("a2a")
            row["mega_over_torch_symm"] = t / mega if t and mega else None
            row["a2a_over_torch_symm"] = a2a / t if t and a2a else None
            row["a2a_over_mega"] = a2a / mega if a2a and mega else None
        rows.append(row)
    order = {op: i for i, op in enumerate(OPS)}
    configs = {name: i for i, name in enumerate(CONFIGS)}
    rows.sort(key=lambda row: (row["symm"] != "op", row["pes"], order.get(row.get("op"), 99),
                               row.get("bytes") or 0, configs.get(row.get("config"), 99),
                               row.get("config") or ""))
    return rows


def _us(value) -> str:
    return "-" if value is None else (f"{value:.0f}" if value >= 100 else f"{value:.1f}")


def _x(value) -> str:
    return "-" if value is None else f"{value:.2f}x"


def table(rows: list) -> str:
    lines = ["torch symm_mem operators on HPS (CPU) against gloo, rank-max median us per call; "
             "ratio: gloo / symm_mem (known: gloo without its split exchange)",
             header(("operator", -28), ("PEs", 4), ("size", 9), ("symm_mem", 10), ("gloo", 10),
                    ("ratio", 8), ("known", 10), ("ratio", 8)) + "  check / gloo's equivalent"]
    for r in rows:
        if r["symm"] != "op":
            continue
        m = r["median_us"]
        check = "ok" if r.get("checked") else ("; ".join(r.get("errors", [])) or "not run")
        lines.append(f"{r['op']:<28}{r['pes']:>4}{human(r['bytes']):>9}{_us(m.get('symm')):>10}"
                     f"{_us(m.get('gloo')):>10}{_x(r['ratio']):>8}{_us(m.get('gloo_known')):>10}"
                     f"{_x(r['ratio_known']):>8}  {check[:90]} / {GLOO_NAME[r['op']]}")
    lines.append("")
    lines.append("MoE layer forward (no_grad), rank-max median ms; torch_symm: the layer written "
                 "against torch's symm_mem API; mega: MegaMoE; a2a: over gloo all_to_all_single")
    lines.append(f"{'config':<10}{'PEs':>4}{'tokens':>7}{'torch_symm':>11}{'mega':>8}{'a2a':>8}"
                 f"{'torch_symm/mega':>16}{'a2a/torch_symm':>15}{'a2a/mega':>9}  checks")
    for r in rows:
        if r["symm"] != "moe":
            continue
        m = r["median_us"]

        def ms(path):
            return "-" if m.get(path) is None else f"{m[path] / 1e3:.2f}"

        checks = ", ".join(f"{k} {v}" for k, v in r.get("checks", {}).items())
        if r.get("errors"):
            checks += "; " + "; ".join(r["errors"])
        lines.append(f"{r['config']:<10}{r['pes']:>4}{r['shape']['tokens']:>7}"
                     f"{ms('torch_symm'):>11}{ms('mega'):>8}{ms('a2a'):>8}"
                     f"{_x(r['mega_over_torch_symm']):>16}{_x(r['a2a_over_torch_symm']):>15}"
                     f"{_x(r['a2a_over_mega']):>9}  {checks[:160]}")
    return "\n".join(lines)


# ---- the PE side --------------------------------------------------------------------------
