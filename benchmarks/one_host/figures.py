"""The one-host suite's plots (benchmarks/run.py): put_get.png, all_gather_pingpong.png and
all_to_all.png.
"""

from __future__ import annotations

import os

from common.plots import pyplot, save
from one_host.summary import all_to_all_bound_us


def plots(rows: list, out_dir: str) -> list:
    plt = pyplot(quiet=True)
    if plt is None:
        return []
    written = []
    styles = {"memcpy": ("local copy (limit)", "k", "--"), "hps_native": ("hps C++", "tab:blue", "-"),
              "hps_python": ("hps Python", "tab:cyan", "-"), "oshmem": ("OSHMEM", "tab:red", "-"),
              "gloo": ("gloo", "tab:green", "-")}

    def series(impl, test, pes, scenario="idle"):
        points = sorted((r["bytes"], r) for r in rows
                        if r["impl"] == impl and r["test"] == test and r["pes"] == pes
                        and r["bytes"] > 0 and r["scenario"] == scenario)
        return [p[0] for p in points], [p[1] for p in points]

    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    for column, test in enumerate(("put", "get")):
        bw, lat = axes[0][column], axes[1][column]
        for impl, label_test, pes in (("memcpy", "memcpy", 1), ("hps_native", test, 2), ("hps_python", test, 2),
                                      ("oshmem", test, 2), ("gloo", "sendrecv", 2)):
            xs, rs = series(impl, label_test, pes)
            if not xs:
                continue
            label, color, style = styles[impl]
            if impl == "gloo":
                label += " send/recv"
            bw.plot(xs, [x / r["median_us"] / 1e3 for x, r in zip(xs, rs)], style, color=color,
                    marker="o", label=label)
            lat.plot(xs, [r["median_us"] for r in rs], style, color=color, marker="o", label=label)
        bw.set(title=f"{test}: bandwidth (GB/s)", xscale="log", yscale="log", xlabel="bytes")
        lat.set(title=f"{test}: time per call (us)", xscale="log", yscale="log", xlabel="bytes")
        bw.legend(fontsize=8)
        lat.legend(fontsize=8)
        bw.grid(True, which="both", alpha=0.3)
        lat.grid(True, which="both", alpha=0.3)
    written.append(save(plt, fig, os.path.join(out_dir, "put_get.png")))

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    for column, pes in enumerate((2, 4)):
        ax = axes[column]
        for impl, test in (("hps_native", "allgather"), ("hps_python", "allgather"),
                           ("oshmem", "fcollect"), ("gloo", "allgather")):
            xs, rs = series(impl, test, pes)
            if xs:
                label, color, style = styles[impl]
                ax.plot(xs, [r["median_us"] for r in rs], style, color=color, marker="o", label=label)
        ax.set(title=f"all_gather, {pes} PEs: time per call (us)", xscale="log", yscale="log",
               xlabel="bytes per PE")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    ax = axes[2]
    for impl, test, pes in (("hps_native", "pingpong", 2), ("hps_native", "pingpong_fused", 2),
                            ("hps_python", "pingpong", 2), ("oshmem", "pingpong", 2),
                            ("gloo", "pingpong", 2)):
        xs, rs = series(impl, test, pes)
        if xs:
            label, color, style = styles[impl]
            if test == "pingpong_fused":
                label, style = label + " put_signal", ":"
            ax.plot(xs, [r["median_us"] for r in rs], style, color=color, marker="o", label=label)
    for impl in ("hps_native", "hps_python", "oshmem"):
        xs, rs = series(impl, "pingpong", 2, "contended")
        if xs:
            label, color, _ = styles[impl]
            ax.plot(xs, [r["median_us"] for r in rs], "--", color=color, marker="x",
                    label=label + " under a CPU hog")
    ax.set(title="ping-pong: half round trip (us)", xscale="log", yscale="log", xlabel="bytes")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    written.append(save(plt, fig, os.path.join(out_dir, "all_gather_pingpong.png")))

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.8))
    for column, pes in enumerate((2, 4)):
        ax = axes[column]
        for impl in ("hps_python", "gloo"):
            xs, rs = series(impl, "alltoall", pes)
            if xs:
                label, color, style = styles[impl]
                ax.plot(xs, [r["median_us"] for r in rs], style, color=color, marker="o",
                        label=label + (" all_to_all_single" if impl == "gloo" else ""))
        xs, _ = series("hps_python", "alltoall", pes)
        bounds = [(x, all_to_all_bound_us(rows, pes, x)) for x in xs]
        bounds = [(x, b) for x, b in bounds if b]
        if bounds:
            label, color, style = styles["memcpy"]
            ax.plot([x for x, _ in bounds], [b for _, b in bounds], style, color=color,
                    marker="o", label="the copies alone (bound)")
        ax.set(title=f"all_to_all, {pes} PEs: time per call (us)", xscale="log", yscale="log",
               xlabel="bytes per PE")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    written.append(save(plt, fig, os.path.join(out_dir, "all_to_all.png")))
    return written
