"""The scale-out benchmark's results (benchmarks/scale_out/scale_out.py): the ratios against the peers,
the table, the scale-out targets, the MoE table, the plots and the report on stdout.
"""

from __future__ import annotations

import os

from common.plots import pyplot, save
from common.units import MIB, human
from scale_out.moe import MOE_PLACEMENTS


# What our rows are compared with: (our test, peer system, peer test, label).
COMPARISONS = [
    ("put_bw", "oshmem", "put_bw", "put bandwidth vs OSHMEM putmem + quiet"),
    ("put_bw", "ucx_perftest", "put_bw", "put bandwidth vs ucx_perftest ucp_put_bw"),
    ("put_bw", "ucx_perftest", "am_bw", "put bandwidth vs ucx_perftest ucp_am_bw"),
    ("put_signal", "oshmem", "put_signal", "8 B put_signal vs OSHMEM put+fence+add+quiet"),
    ("put_signal", "ucx_perftest", "put_lat", "8 B put_signal vs ucx_perftest ucp_put_lat"),
    ("pingpong", "oshmem", "pingpong", "ping-pong 1/2 RTT vs OSHMEM (wait_until)"),
    ("pingpong", "ucx_perftest", "am_lat", "ping-pong 1/2 RTT vs ucx_perftest ucp_am_lat"),
    ("allgather", "gloo", "allgather", "all_gather vs gloo all_gather_into_tensor"),
    ("alltoall", "gloo", "alltoall", "all_to_all vs gloo all_to_all_single"),
]


def find(rows: list, system: str, test: str, size: int) -> dict | None:
    for row in rows:
        if (row["system"], row["test"], row["bytes"]) == (system, test, size):
            return row
    return None


def ratios(rows: list) -> list:
    """peer time / our time for every size both have (above 1: ours is faster)."""
    out = []
    for ours, peer, peer_test, label in COMPARISONS:
        for row in rows:
            if row["system"] != "hps" or row["test"] != ours:
                continue
            other = find(rows, peer, peer_test, row["bytes"])
            if other:
                out.append({"comparison": label, "bytes": row["bytes"],
                            "hps_us": row["median_us"], "peer_us": other["median_us"],
                            "speedup": other["median_us"] / row["median_us"]})
    return out


def table(rows: list, failures: list) -> str:
    """One line per measurement and size, a column per system (ping-pongs: the median of every
    half round trip / their mean)."""
    columns = [("tcp", None), ("oshmem", None), ("ucx_perftest", None), ("gloo", None),
               ("hps_native", None), ("hps", None)]
    tests = [("put_bw", "put bandwidth"), ("am_bw", "AM bandwidth"),
             ("am_bw_one", "AM bw, 1 in flight"),
             ("put_signal", "8 B put + signal"), ("put_lat", "8 B put latency"),
             ("am_lat", "8 B AM latency"), ("am_lat_sleep", "8 B AM latency, asleep"),
             ("pingpong", "ping-pong 1/2 RTT"), ("pingpong_block", "ping-pong, asleep"),
             ("allgather", "all_gather / PE"), ("alltoall", "all_to_all / PE")]
    failed = {}
    for bad in failures:
        for size in bad["sizes"] or [None]:
            failed[(bad["system"], bad["test"], size)] = bad["error"]
    keys = sorted({(r["test"], r["bytes"]) for r in rows if r["system"] != "breakdown"}
                  | {(f["test"], s) for f in failures for s in f["sizes"]},
                  key=lambda k: ([t for t, _ in tests].index(k[0]) if k[0] in dict(tests) else 99,
                                 k[1]))
    header = f"{'measurement':<22}{'size':>9}" + "".join(f" {c:>16}" for c, _ in columns)
    header += f"{'peer/hps':>12}"
    lines = [header, "-" * len(header)]
    for test, size in keys:
        cells = []
        for system, _ in columns:
            row = find(rows, system, test, size)
            if row and "gbps" in row:
                cells.append(f"{row['gbps']:>11.3f} GB/s")
            elif row and "mean_us" in row:
                cells.append(f"{row['median_us']:>6.2f} /{row['mean_us']:>6.1f} us")
            elif row:
                cells.append(f"{row['median_us']:>13.2f} us")
            elif (system, test, size) in failed:
                cells.append(f"{'FAIL ' + failed[(system, test, size)][:11]:>16}")
            else:
                cells.append(f"{'-':>16}")
        ours = find(rows, "hps", test, size)
        peers = [find(rows, s, t, size) for o, s, t, _ in COMPARISONS if o == test]
        peers = [r for r in peers if r]
        ratio = (f"{min(r['median_us'] for r in peers) / ours['median_us']:>11.2f}x"
                 if ours and peers else f"{'-':>12}")
        name = dict(tests).get(test, test)
        lines.append(f"{name:<22}{human(size):>9}" + "".join(" " + c for c in cells) + ratio)
    return "\n".join(lines)


def targets(results: dict) -> list:
    """The scale-out targets, each with what this run measured and whether it is met; a
    target whose figures are missing (a system not run, or failed) is left out."""
    rows, out = results["rows"], []

    def per_size(ours_test, peer, peer_test, sizes=None):
        pairs = []
        for row in sorted((r for r in rows if r["system"] == "hps" and r["test"] == ours_test),
                          key=lambda r: r["bytes"]):
            other = find(rows, peer, peer_test, row["bytes"])
            if other and (sizes is None or row["bytes"] in sizes):
                pairs.append((row, other))
        return pairs

    def add(target, goal, pairs, value, test, fmt):
        if not pairs:
            return
        values = [(mine["bytes"], value(mine, other)) for mine, other in pairs]
        met = [ok for ok in (test(v) for _, v in values)]
        out.append({"target": target, "goal": goal,
                    "measured": ", ".join(f"{human(b)}: {fmt(v)}" for b, v in values),
                    "values": {str(b): v for b, v in values},
                    "met": all(met), "met_at": f"{sum(met)} of {len(met)}"})

    # Bandwidth ratios are our GB/s over theirs, the same as their time over ours.
    speedup = lambda mine, other: other["median_us"] / mine["median_us"]  # noqa: E731
    slowdown = lambda mine, other: mine["median_us"] / other["median_us"]  # noqa: E731
    add("put bandwidth vs OSHMEM putmem + quiet", ">= 1.0x",
        per_size("put_bw", "oshmem", "put_bw"), speedup, lambda v: v >= 1.0, "{:.2f}x".format)
    add("put bandwidth vs ucx_perftest ucp_am_bw (its defaults)", ">= 0.8x",
        per_size("put_bw", "ucx_perftest", "am_bw"), speedup, lambda v: v >= 0.8,
        "{:.2f}x".format)
    add("(the bound) put bandwidth vs ucp_am_bw -O 1, one message in flight", "reported",
        per_size("put_bw", "ucx_perftest", "am_bw_one"), speedup, lambda v: True,
        "{:.2f}x".format)
    # Latency against UCX's own active messages, polled: the median of every half round trip
    # (ucx_perftest's typical value), and the mean (the tail).
    am = find(rows, "ucx_perftest", "am_lat", 8)
    for system, who, goals in (("hps", "Python", (("median", 2.0), ("mean", 3.0))),
                               ("hps_native", "C++", (("median", 1.5),))):
        mine = find(rows, system, "pingpong", 8)
        if not (am and mine):
            continue
        for stat, goal in goals:
            if f"{stat}_us" not in mine:
                continue
            ratio = mine[f"{stat}_us"] / am["median_us"]
            out.append({"target": f"8 B ping-pong from {who}: {stat} vs ucp_am_lat -E poll",
                        "goal": f"<= {goal:.1f}x",
                        "measured": f"8 B: {ratio:.2f}x ({mine[f'{stat}_us']:.2f} us against "
                                    f"{am['median_us']:.2f} us)",
                        "values": {"8": ratio}, "met": ratio <= goal,
                        "met_at": f"{int(ratio <= goal)} of 1"})
    add("8 B put + signal latency vs OSHMEM put + fence + add + quiet", "<= 1.0x",
        per_size("put_signal", "oshmem", "put_signal"), slowdown, lambda v: v <= 1.0,
        "{:.2f}x".format)
    add("8 B ping-pong half round trip vs OSHMEM", "<= 1.0x",
        per_size("pingpong", "oshmem", "pingpong"), slowdown, lambda v: v <= 1.0,
        "{:.2f}x".format)
    add("all_gather vs gloo all_gather_into_tensor, 1 MiB per PE", ">= 1.5x",
        per_size("allgather", "gloo", "allgather", {MIB}), speedup, lambda v: v >= 1.5,
        "{:.2f}x".format)
    add("all_to_all vs gloo all_to_all_single, 1 MiB per PE", ">= 1.5x",
        per_size("alltoall", "gloo", "alltoall", {MIB}), speedup, lambda v: v >= 1.5,
        "{:.2f}x".format)
    steps = [r for r in results.get("moe", []) if r["placement"] == MOE_PLACEMENTS[0]]
    if steps:
        met = [r["step_ratio"] <= 0.8 for r in steps]
        out.append({"target": "MoE training step across the hosts: MegaMoE / AllToAllMoE (gloo)",
                    "goal": "<= 0.8x",
                    "measured": ", ".join(f"{r['config']}: {r['step_ratio']:.2f}x" for r in steps),
                    "values": {r["config"]: r["step_ratio"] for r in steps},
                    "met": all(met), "met_at": f"{sum(met)} of {len(met)}"})
    return out


def moe_table(steps: list) -> str:
    lines = [f"{'MoE training step (rank-max median)':<36}{'config':>8}{'a2a ms':>9}"
             f"{'MegaMoE ms':>12}{'ratio':>7}{'a2a comm':>10}{'share':>7}"]
    for r in steps:
        lines.append(f"{r['placement']:<36}{r['config']:>8}{r['a2a_step_us'] / 1e3:>9.1f}"
                     f"{r['shmem_step_us'] / 1e3:>12.1f}{r['step_ratio']:>6.2f}x"
                     f"{r['a2a_comm_us'] / 1e3:>8.1f}ms{100 * r['comm_share']:>6.0f}%")
    return "\n".join(lines)


STYLE = {"oshmem": ("OSHMEM (UCX tcp)", "tab:red"), "ucx_perftest": ("ucx_perftest", "tab:orange"),
         "gloo": ("gloo", "tab:green"), "hps": ("Hyper-Parallel SHMEM", "tab:blue"),
         "hps_native": ("Hyper-Parallel SHMEM, C++", "tab:cyan"), "tcp": ("TCP", "tab:gray")}


def plots(results: dict, folder: str) -> list:
    """scale_out_put_bw.png (bandwidth vs size, a line per system) and scale_out_latency.png
    (a bar per system and latency pattern) into `folder`; [] without matplotlib."""
    plt = pyplot(quiet=True)
    if plt is None:
        return []
    rows = results["rows"]
    os.makedirs(folder, exist_ok=True)
    written = []
    if any(r["test"] == "put_bw" for r in rows):
        written.append(_plot_put_bw(plt, rows, folder))
    path = _plot_latency(plt, rows, folder)
    if path:
        written.append(path)
    path = _plot_collectives(plt, results, folder)
    if path:
        written.append(path)
    path = _plot_breakdown(plt, results, folder)
    if path:
        written.append(path)
    return written


def _plot_breakdown(plt, results: dict, folder: str) -> str | None:
    """scale_out_breakdown.png: the 8 B half round trip from C++ and from Python, stacked by
    the layer each part of it was measured in (results["breakdown"])."""
    stages = {s["stage"]: s["us"] for s in results.get("breakdown", [])}
    layers = [("the kernel's TCP over the link (polled)", "TCP over the link", "tab:gray"),
              ("UCX's active-message layer", "UCX active messages", "tab:orange"),
              ("the runtime's send, handler, signal and wait", "the runtime", "tab:blue"),
              ("Python: put_signal and wait_signal calls", "Python", "tab:purple")]
    if not all(name in stages for name, _, _ in layers[:3]):
        return None
    fig, ax = plt.subplots(figsize=(8.5, 3.2))
    bars = [("C++", layers[:3]), ("Python", layers)]
    for y, (who, parts) in enumerate(bars):
        left = 0.0
        for name, label, color in parts:
            value = stages.get(name)
            if value is None:
                continue
            ax.barh(y, value, left=left, color=color, label=label if y == 1 else None)
            if value > 0.4:
                ax.text(left + value / 2, y, f"{value:.1f}", ha="center", va="center",
                        fontsize=8, color="white")
            left += max(0.0, value)
        ax.text(left, y, f" {left:.1f} us", va="center", fontsize=8)
    ax.set_yticks(range(len(bars)))
    ax.set_yticklabels([who for who, _ in bars])
    ax.set(title="where an 8 B ping-pong's half round trip goes (medians, 2 namespace hosts)",
           xlabel="us")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, axis="x", alpha=0.3)
    return _save(plt, fig, folder, "scale_out_breakdown.png")


def _save(plt, fig, folder: str, name: str) -> str:
    return save(plt, fig, os.path.join(folder, name))


def _plot_put_bw(plt, rows: list, folder: str) -> str:
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    lines = [(system, "put_bw", label, color, "-o") for system, (label, color) in STYLE.items()]
    lines.insert(2, ("ucx_perftest", "am_bw", "ucx_perftest ucp_am_bw", "tab:orange", "--s"))
    lines.insert(3, ("ucx_perftest", "am_bw_one", "ucx_perftest ucp_am_bw -O 1", "tab:orange",
                     ":^"))
    for system, test, label, color, style in lines:
        points = sorted((r["bytes"], r) for r in rows
                        if r["system"] == system and r["test"] == test)
        if not points:
            continue
        if system == "ucx_perftest" and test == "put_bw":
            label = "ucx_perftest ucp_put_bw (-O 1)"
        xs = [x for x, _ in points]
        ax.plot(xs, [r["gbps"] for _, r in points], style, color=color, label=label)
        ax.fill_between(xs, [x / r["max_us"] / 1e3 for x, r in points],
                        [x / r["min_us"] / 1e3 for x, r in points], color=color, alpha=0.15)
    ax.set(title="put bandwidth, 2 hosts (namespaces), 1 PE each, tcp over veth",
           xscale="log", xlabel="bytes per put", ylabel="GB/s")
    ax.set_xticks(sorted({r["bytes"] for r in rows if r["test"] == "put_bw"}) or [1])
    ax.set_xticklabels([human(x) for x in ax.get_xticks()], fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return _save(plt, fig, folder, "scale_out_put_bw.png")


def _plot_latency(plt, rows: list, folder: str) -> str | None:
    bars = [("put_signal", "oshmem", "OSHMEM put+fence+add+quiet"),
            ("put_signal", "hps", "hps put_signal"),
            ("put_lat", "ucx_perftest", "ucx_perftest ucp_put_lat"),
            ("pingpong", "tcp", "TCP ping-pong 1/2 RTT"),
            ("am_lat", "ucx_perftest", "ucx_perftest ucp_am_lat"),
            ("pingpong", "oshmem", "OSHMEM ping-pong 1/2 RTT"),
            ("pingpong", "hps_native", "hps C++ ping-pong 1/2 RTT"),
            ("pingpong", "hps", "hps Python ping-pong 1/2 RTT")]
    present = [(find(rows, system, test, 8), system, label) for test, system, label in bars]
    present = [item for item in present if item[0]]
    if present:
        fig, ax = plt.subplots(figsize=(8.5, 4.8))
        for i, (row, system, label) in enumerate(present):
            if "mean_us" in row:  # a ping-pong: its mean too (the tail), as a hollow bar
                ax.bar(i, row["mean_us"], color="none", edgecolor=STYLE[system][1], hatch="//")
            ax.bar(i, row["median_us"], color=STYLE[system][1],
                   yerr=[[max(0.0, row["median_us"] - row["min_us"])],
                         [max(0.0, row["max_us"] - row["median_us"])]], capsize=3)
            ax.text(i, row["median_us"], f"{row['median_us']:.1f}", ha="center", va="bottom",
                    fontsize=8)
        ax.set_xticks(range(len(present)))
        ax.set_xticklabels([label for _, _, label in present], rotation=20, ha="right",
                           fontsize=8)
        ax.set(title="8-byte latency, 2 hosts (namespaces), tcp over veth\n(median, min-max of "
                     "repetitions; hatched: a ping-pong's mean)", ylabel="us")
        ax.grid(True, axis="y", alpha=0.3)
        return _save(plt, fig, folder, "scale_out_latency.png")
    return None


def _plot_collectives(plt, results: dict, folder: str) -> str | None:
    """scale_out_collectives.png: all_gather and all_to_all against gloo (time per call by
    bytes per PE) and the MoE training step of both layers in each placement."""
    rows, steps = results["rows"], results.get("moe", [])
    panels = [test for test in ("allgather", "alltoall")
              if any(r["test"] == test for r in rows)] + (["moe"] if steps else [])
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.8), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        if panel == "moe":
            short = {MOE_PLACEMENTS[0]: "2 hosts", MOE_PLACEMENTS[1]: "1 host\nUCX lo",
                     MOE_PLACEMENTS[2]: "1 host\nshm"}
            labels = [f"{r['config']}\n{short.get(r['placement'], r['placement'])}"
                      for r in steps]
            xs = range(len(steps))
            for offset, path, label, color in ((-0.2, "a2a", "AllToAllMoE (gloo)", "tab:green"),
                                               (0.2, "shmem", "MegaMoE (SHMEM)", "tab:blue")):
                ax.bar([x + offset for x in xs], [r[f"{path}_step_us"] / 1e3 for r in steps], 0.4,
                       color=color, label=label)
            for x, r in zip(xs, steps):
                ax.annotate(f"{r['step_ratio']:.2f}x",
                            (x, max(r["a2a_step_us"], r["shmem_step_us"]) / 1e3),
                            ha="center", va="bottom", fontsize=8)
            ax.set_xticks(list(xs))
            ax.set_xticklabels(labels, fontsize=7)
            ax.set(title="MoE training step, 2 PEs (ms; label: MegaMoE / a2a)", ylabel="ms")
            ax.grid(True, axis="y", which="both", alpha=0.3)
            ax.legend(fontsize=8)
            continue
        name = {"allgather": "all_gather", "alltoall": "all_to_all"}[panel]
        for system in ("gloo", "hps"):
            points = sorted((r["bytes"], r) for r in rows
                            if r["system"] == system and r["test"] == panel)
            if not points:
                continue
            label, color = STYLE[system]
            xs = [x for x, _ in points]
            ax.plot(xs, [r["median_us"] / 1e3 for _, r in points], "-o", color=color,
                    label=label)
            ax.fill_between(xs, [r["min_us"] / 1e3 for _, r in points],
                            [r["max_us"] / 1e3 for _, r in points], color=color, alpha=0.15)
            if system == "hps":
                for x, r in points:
                    peer = find(rows, "gloo", panel, x)
                    if peer:
                        ax.annotate(f"{peer['median_us'] / r['median_us']:.2f}x",
                                    (x, r["median_us"] / 1e3), textcoords="offset points",
                                    xytext=(0, -12), ha="center", fontsize=8)
        ax.set(title=f"{name}, 2 hosts, 1 PE each (label: gloo / ours)", xscale="log",
               yscale="log", xlabel="bytes per PE", ylabel="ms per call")
        ticks = sorted({r["bytes"] for r in rows if r["test"] == panel})
        ax.set_xticks(ticks)
        ax.set_xticklabels([human(x) for x in ticks], fontsize=8)
        ax.minorticks_off()
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    return _save(plt, fig, folder, "scale_out_collectives.png")


def breakdown_table(rows: list, stages: list) -> str:
    """The breakdown's variants (half round trip; the send call and the one-way trip as PE 1
    saw them), then the stages derived from them."""
    def cell(stats):
        return f"{stats['median']:>6.2f} /{stats['mean']:>6.1f}" if stats else f"{'-':>14}"

    lines = [f"{'8 B ping-pong variant (median / mean, us)':<36}{'1/2 RTT':>14}{'send call':>16}"
             f"{'one-way':>16}  what differs"]
    for row in (r for r in rows if r["system"] == "breakdown"):
        peer = (row.get("per_rank") or [None, None])[1] or {}
        lines.append(f"{row['test']:<36}{cell(row.get('round_trips')):>14}"
                     f"{cell(peer.get('send_us')):>16}{cell(peer.get('one_way_us')):>16}  "
                     f"{row.get('note', '')}")
    lines.append("")
    lines.append(f"{'where the half round trip goes (medians)':<52}{'us':>8}  measured as")
    for stage in stages:
        lines.append(f"{stage['stage']:<52}{stage['us']:>8.2f}  {stage['how']}")
    return "\n".join(lines)


def report(results: dict) -> None:
    print(table(results["rows"], results["failures"]))
    if results.get("breakdown"):
        print()
        print(breakdown_table(results["rows"], results["breakdown"]))
    if results.get("moe"):
        print()
        print(moe_table(results["moe"]))
    if results["ratios"]:
        print()
        print(f"{'comparison (peer time / our time; above 1: ours is faster)':<62}{'size':>9}"
              f"{'ratio':>9}")
        for r in results["ratios"]:
            print(f"{r['comparison']:<62}{human(r['bytes']):>9}{r['speedup']:>8.2f}x")
    if results.get("targets"):
        print()
        print(f"{'target':<64}{'goal':>9}  {'met':<14}measured")
        for t in results["targets"]:
            met = ("yes" if t["met"] else "no") + f" ({t['met_at']})"
            print(f"{t['target']:<64}{t['goal']:>9}  {met:<14}{t['measured']}")
    if results["failures"]:
        print()
        for bad in results["failures"]:
            sizes = ",".join(human(s) for s in bad["sizes"]) or "-"
            print(f"failed: {bad['system']} {bad['test']} [{sizes}]: {bad['error']}: "
                  f"{bad['message'][:300]}")
    for note in results.get("notes", []):
        print(f"note: {note}")
