"""The MegaMoE part of the benchmark suite (benchmarks/run.py --moe, or --moe-only).

Runs benchmarks/moe/moe_bench.py through the package's launcher at 2 and 4 PEs:
  step   the full training step of the small decoder on SHMEM and on all-to-all (gloo), in
         alternating order in the same run, routers frozen: three model sizes (SIZES), and a
         sweep of the expert intermediate size at a fixed hidden size (SWEEP);
  memory each path's peak step memory and the symmetric heap bytes, for SIZES;
  comm   dispatch + combine alone (identity experts) against all_to_all_single.
Every job runs --rounds times (default 3; 1 with --quick) in alternating order, pooled. It
reports, per configuration, the rank-max median step of both paths, the share of the
all-to-all step spent in its communication, how much of that communication SHMEM removes,
dispatch + combine alone, peak memory and heap bytes, and the pipeline's overlap counter.
"""

from __future__ import annotations

import json
import os

from common.launch import pes_command
from common.plots import pyplot, save
from common.report import header
from common.stats import median as _median
from common.units import shape_text

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "moe_bench.py")

# NAME: hidden, intermediate, shared intermediate, experts, top-k, layers, sequence, batch.
SIZES = {"tiny": (64, 64, 32, 8, 2, 2, 32, 2), "small": (64, 128, 64, 8, 2, 2, 128, 4),
         "medium": (256, 512, 256, 8, 2, 2, 128, 4)}
SWEEP_HIDDEN = 128
SWEEP = (32, 128, 512, 2048)
QUICK_SWEEP = (32, 512)


def _config(name: str, shape: tuple) -> str:
    return shape_text(name, shape)


def sweep_config(intermediate: int) -> str:
    return _config(f"sweep-I{intermediate}", (SWEEP_HIDDEN, intermediate, 64, 8, 2, 2, 128, 4))


def jobs(quick: bool) -> list:
    """(label, command) of the MoE measurements."""
    steps = ["--warmup", "3", "--steps", "5" if quick else "9"]
    sizes = ["tiny", "small"] if quick else list(SIZES)
    sweep = QUICK_SWEEP if quick else SWEEP
    out = []
    for pes in (2, 4):
        configs = ",".join(_config(name, SIZES[name]) for name in sizes)
        def job(what: str, *program) -> tuple:
            return (f"moe {what} x{pes}", pes_command(pes, 1500, [SCRIPT, *program]))

        out.append(job("comm", "--test", "comm", "--configs", configs,
                       "--reps", "20" if quick else "60"))
        out.append(job("step", "--test", "step", "--configs", configs, *steps))
        out.append(job("memory", "--test", "memory", "--configs", configs))
        if pes == 2:  # compiling costs minutes per path on the 2-core machine: one size
            out.append(job("compiled", "--test", "compiled", "--configs",
                           _config("tiny", SIZES["tiny"]), *steps))
        out.append(job("sweep", "--test", "step", "--configs",
                       ",".join(sweep_config(i) for i in sweep), *steps))
    return out


def merge(records: list) -> list:
    """Joins the records of one (test, configuration, PEs) from several rounds: samples and
    steps pooled, counters summed, the largest peak memory kept."""
    merged: dict = {}
    for r in records:
        key = (r["moe"], r["config"], r["pes"])
        if key not in merged:
            merged[key] = json.loads(json.dumps(r))  # a deep copy
            continue
        m = merged[key]
        for field in ("samples_us", "steps_us", "comm_us", "comm_net_us", "cpu_floor_us"):
            for path, values in r.get(field, {}).items():
                m.setdefault(field, {}).setdefault(path, []).extend(values)
        for field in ("started_early", "experts"):
            if field in r:
                m[field] += r[field]
        for path, value in r.get("peak_step_bytes", {}).items():
            old = m["peak_step_bytes"][path]
            m["peak_step_bytes"][path] = None if old is None or value is None else max(old, value)
    return list(merged.values())


def summarise(records: list) -> list:
    """One row per (test, configuration, PEs), rounds pooled; the memory records join their
    step rows."""
    rows = []
    records = merge(records)
    memory = {(r["config"], r["pes"]): r for r in records if r["moe"] == "memory"}
    for r in records:
        row = {"test": r["moe"], "config": r["config"], "pes": r["pes"]}
        if r["moe"] == "memory":
            continue
        row["shape"] = r["shape"]
        if r["moe"] == "compiled":
            step = {side: _median(values) for side, values in r["steps_us"].items()}
            row.update(steps=len(r["steps_us"]["shmem_eager"]), compile_s=r["compile_s"],
                       graph_breaks=r["graph_breaks"],
                       **{f"{side}_step_us": value for side, value in step.items()},
                       **{f"{path}_compiled_over_eager":
                          step[f"{path}_compiled"] / step[f"{path}_eager"]
                          for path in ("shmem", "a2a")},
                       shmem_over_a2a_compiled=step["shmem_compiled"] / step["a2a_compiled"],
                       step_samples_us=r["steps_us"])
            rows.append(row)
            continue
        if r["moe"] == "comm":
            shmem_us, a2a_us = (_median(r["samples_us"][p]) for p in ("shmem", "a2a"))
            copy_us = _median(r["samples_us"].get("shmem_copy", []))
            row.update(bytes_per_pe=r["bytes_per_pe"], rows_per_pe=r["rows_per_pe"],
                       shmem_us=shmem_us, a2a_us=a2a_us, speedup=a2a_us / shmem_us,
                       shmem_copy_us=copy_us, speedup_copy=a2a_us / copy_us,
                       samples=len(r["samples_us"]["shmem"]))
        else:
            step = {p: _median(r["steps_us"][p]) for p in ("shmem", "a2a")}
            comm = {p: _median(r["comm_us"][p]) for p in ("shmem", "a2a")}
            net = {p: _median(r["comm_net_us"][p]) for p in ("shmem", "a2a")}
            floor = {p: _median(r.get("cpu_floor_us", {}).get(p, [])) for p in ("shmem", "a2a")}
            mem = memory.get((r["config"], r["pes"]), {})
            row.update(
                parameters=r["parameters"], steps=len(r["steps_us"]["shmem"]),
                shmem_step_us=step["shmem"], a2a_step_us=step["a2a"],
                step_ratio=step["shmem"] / step["a2a"],
                shmem_comm_us=comm["shmem"], a2a_comm_us=comm["a2a"],
                comm_share=comm["a2a"] / step["a2a"],
                step_saving_of_comm=(step["a2a"] - step["shmem"]) / comm["a2a"],
                comm_left=comm["shmem"] / comm["a2a"],
                shmem_comm_net_us=net["shmem"], a2a_comm_net_us=net["a2a"],
                shmem_cpu_floor_us=floor["shmem"], a2a_cpu_floor_us=floor["a2a"],
                shmem_step_over_floor=step["shmem"] / floor["shmem"],
                # The most the SHMEM path could remove with its own CPU work as it is: the
                # a2a step less the SHMEM step's floor, as a share of the a2a communication.
                removable_at_floor=(step["a2a"] - floor["shmem"]) / comm["a2a"],
                peak_step_bytes=mem.get("peak_step_bytes", {"shmem": None, "a2a": None}),
                heap_bytes=mem.get("heap_bytes", {"shmem": None, "a2a": 0}),
                started_early=r["started_early"], experts=r["experts"],
                step_samples_us=r["steps_us"])
        rows.append(row)
    return rows


def targets(rows: list) -> list:
    out = []
    for row in rows:
        where = f"{row['config']} x{row['pes']}"
        if row["test"] == "compiled":  # reported, no target
            continue
        if row["test"] == "comm":
            out.append({"target": f"MoE dispatch+combine alone, {where}: gloo all-to-all / SHMEM "
                                  "(rows back in its return buffer)",
                        "measured": f"{row['speedup']:.1f}x ({row['speedup_copy']:.1f}x copied out)",
                        "goal": ">= 10x", "met": row["speedup"] >= 10})
            continue
        # Removed from the step: how much shorter the SHMEM step is, as a share of the time
        # the all-to-all step spends in dispatch and combine.
        out.append({"target": f"MoE step {where}: share of a2a dispatch+combine time removed",
                    "measured": f"{100 * row['step_saving_of_comm']:.0f}% of "
                                f"{row['a2a_comm_us'] / 1e3:.1f} ms",
                    "goal": ">= 85%", "met": row["step_saving_of_comm"] >= 0.85})
        if row["comm_share"] >= 0.30:
            out.append({"target": f"MoE step {where} (a2a comm {100 * row['comm_share']:.0f}%): "
                                  "SHMEM step / a2a step",
                        "measured": f"{row['step_ratio']:.2f}x", "goal": "<= 0.75x",
                        "met": row["step_ratio"] <= 0.75})
    return out


def _mib(value) -> str:
    return "n/a" if value is None else f"{value / (1 << 20):.1f}"


def table(rows: list) -> str:
    lines = ["MegaMoE training step, rank-max median. comm: the a2a step's dispatch + combine "
             "time and its share of the step; removed: (a2a step - shmem step) / a2a comm; "
             "left: shmem's own dispatch + combine time / a2a's; floor: the shmem step over its "
             "CPU floor (its PEs' CPU time over the cores: the least wall time it could take); at "
             "floor: what removed would be with the shmem step at its floor; overlap: experts "
             "that started while a later expert's rows were still arriving",
             header(("config", -14), ("PEs", 4), ("params", 9), ("a2a ms", 9), ("shmem ms", 10),
                    ("ratio", 7), ("comm ms", 9), ("share", 7), ("removed", 9), ("left", 6),
                    ("floor", 7), ("at floor", 9), ("peak MiB a2a/shmem", 20), ("heap MiB", 10),
                    ("overlap", 10))]
    for r in rows:
        if r["test"] != "step":
            continue
        peak = r["peak_step_bytes"]
        lines.append(
            f"{r['config']:<14}{r['pes']:>4}{r['parameters'] / 1e6:>8.2f}M"
            f"{r['a2a_step_us'] / 1e3:>9.1f}{r['shmem_step_us'] / 1e3:>10.1f}{r['step_ratio']:>7.2f}"
            f"{r['a2a_comm_us'] / 1e3:>9.1f}{100 * r['comm_share']:>6.0f}%"
            f"{100 * r['step_saving_of_comm']:>8.0f}%{100 * r['comm_left']:>5.0f}%"
            f"{r['shmem_step_over_floor']:>7.2f}{100 * r['removable_at_floor']:>8.0f}%"
            f"{_mib(peak['a2a']) + ' / ' + _mib(peak['shmem']):>20}"
            f"{_mib(r['heap_bytes']['shmem']):>10}"
            f"{r['started_early']:>5}/{r['experts']:<4}")
    lines.append("")
    lines.append("MegaMoE dispatch + combine alone (identity experts; rank-max median); shmem: the "
                 "rows back in the return buffer; +copy: then copied into a tensor of their own")
    lines.append(f"{'config':<14}{'PEs':>4}{'KiB/PE':>9}{'gloo us':>10}{'shmem us':>10}"
                 f"{'speed-up':>10}{'+copy us':>10}{'speed-up':>10}")
    for r in rows:
        if r["test"] == "comm":
            lines.append(f"{r['config']:<14}{r['pes']:>4}{r['bytes_per_pe'] / 1024:>9.0f}"
                         f"{r['a2a_us']:>10.0f}{r['shmem_us']:>10.0f}{r['speedup']:>9.1f}x"
                         f"{r['shmem_copy_us']:>10.0f}{r['speedup_copy']:>9.1f}x")
    compiled = [r for r in rows if r["test"] == "compiled"]
    if compiled:
        lines.append("")
        lines.append("MegaMoE training step eager and compiled (forward and loss under "
                     "torch.compile, inductor; rank-max median); ratio: compiled / eager; "
                     "compile: the first compiled step; breaks: graph breaks of the forward")
        lines.append(f"{'config':<14}{'PEs':>4}{'path':>7}{'eager ms':>10}{'compiled ms':>13}"
                     f"{'ratio':>7}{'compile s':>11}{'breaks':>8}")
        for r in compiled:
            for path in ("shmem", "a2a"):
                lines.append(
                    f"{r['config']:<14}{r['pes']:>4}{path:>7}"
                    f"{r[path + '_eager_step_us'] / 1e3:>10.1f}"
                    f"{r[path + '_compiled_step_us'] / 1e3:>13.1f}"
                    f"{r[path + '_compiled_over_eager']:>7.2f}{r['compile_s'][path]:>11.0f}"
                    f"{r['graph_breaks'][path]:>8}")
    return "\n".join(lines)


def plot(rows: list, out_dir: str) -> str | None:
    plt = pyplot(quiet=True)
    if plt is None:
        return None
    steps = [r for r in rows if r["test"] == "step" and not r["config"].startswith("sweep")]
    sweep = [r for r in rows if r["test"] == "step" and r["config"].startswith("sweep")]
    comm = [r for r in rows if r["test"] == "comm"]
    fig, axes = plt.subplots(1, 3, figsize=(17, 5))
    ax = axes[0]
    labels = [f"{r['config']}\nx{r['pes']}" for r in steps]
    xs = range(len(steps))
    for offset, path, color in ((-0.2, "a2a", "tab:green"), (0.2, "shmem", "tab:blue")):
        total = [r[f"{path}_step_us"] / 1e3 for r in steps]
        part = [r[f"{path}_comm_us"] / 1e3 for r in steps]
        ax.bar([x + offset for x in xs], total, 0.4, color=color, alpha=0.45,
               label=f"{path} step")
        ax.bar([x + offset for x in xs], part, 0.4, color=color, label=f"{path} communication")
    floors = [(x + 0.2, r["shmem_cpu_floor_us"] / 1e3) for x, r in zip(xs, steps)
              if r.get("shmem_cpu_floor_us") == r.get("shmem_cpu_floor_us")]  # not NaN
    if floors:
        ax.scatter([f[0] for f in floors], [f[1] for f in floors], marker="_", s=300,
                   color="black", label="shmem CPU floor", zorder=3)
    for x, r in zip(xs, steps):
        ax.annotate(f"{r['step_ratio']:.2f}x", (x, max(r["a2a_step_us"], r["shmem_step_us"]) / 1e3),
                    ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(xs), labels, fontsize=8)
    ax.set(title="training step (ms, rank-max median); label: shmem / a2a", yscale="log")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax = axes[1]
    for pes, style in ((2, "-"), (4, "--")):
        points = sorted((r["shape"]["intermediate_size"], r) for r in sweep if r["pes"] == pes)
        if not points:
            continue
        xs_ = [p[0] for p in points]
        ax.set_xscale("log")
        ax.set_xticks(xs_, [str(x) for x in xs_])
        ax.minorticks_off()
        ax.plot(xs_, [p[1]["step_ratio"] for p in points], style, color="tab:blue", marker="o",
                label=f"shmem step / a2a step, x{pes}")
        ax.plot(xs_, [p[1]["comm_share"] for p in points], style, color="tab:green", marker="s",
                label=f"a2a communication share, x{pes}")
    ax.axhline(0.75, color="grey", linestyle=":", label="0.75 (target where share >= 30%)")
    ax.axhline(0.30, color="lightgrey", linestyle=":")
    ax.set(title=f"sweep: expert intermediate size at hidden {SWEEP_HIDDEN}",
           xlabel="intermediate size", ylim=(0, 1.1))
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    ax = axes[2]
    labels = [f"{r['config']}\nx{r['pes']}\n{r['bytes_per_pe'] // 1024} KiB" for r in comm]
    xs = range(len(comm))
    ax.bar([x - 0.27 for x in xs], [r["a2a_us"] for r in comm], 0.27, color="tab:green",
           label="gloo all_to_all_single")
    ax.bar(list(xs), [r["shmem_us"] for r in comm], 0.27, color="tab:blue",
           label="SHMEM, rows back in its return buffer")
    ax.bar([x + 0.27 for x in xs], [r["shmem_copy_us"] for r in comm], 0.27, color="tab:blue",
           alpha=0.45, label="SHMEM, then copied out")
    for x, r in zip(xs, comm):
        ax.annotate(f"{r['speedup']:.1f}x", (x, r["a2a_us"]), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(xs), labels, fontsize=8)
    ax.set(title="dispatch + combine alone (us per call, rank-max median)", yscale="log")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    return save(plt, fig, os.path.join(out_dir, "moe.png"))
