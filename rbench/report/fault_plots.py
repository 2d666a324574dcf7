"""Faults in a report's plots: the shading every timeline uses and the rates around each fault."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter

from rbench.report.plot_style import rate_fmt

FAULT_COLOR = "#c0392b"


def shade_fault(ax: Any, fault: dict[str, Any], origin_s: float, right: float) -> None:
    """Shade a fault on ``ax`` (x in s, ``origin_s`` subtracted): light from its start until the node was
    back, darker while the node was down (end of the action until the restart began); up to ``right``
    (in the axis' x) when the node did not come back during the run."""
    start, end = fault["at_s"] - origin_s, fault["end_s"] - origin_s
    back = right if fault.get("back_s") is None else fault["back_s"] - origin_s
    down_end = right if fault.get("back_start_s") is None else fault["back_start_s"] - origin_s
    ax.axvspan(start, max(back, start), color=FAULT_COLOR, alpha=0.08, lw=0)
    ax.axvspan(end, max(down_end, end), color=FAULT_COLOR, alpha=0.18, lw=0)


def fault_plot(faults: list[dict[str, Any]], path: Path) -> Path:
    """One panel per fault: published, confirmed and consumed per second around it (x = s since the fault's
    start, each 1 s bucket drawn at its middle), the pre-fault mean and its 95 % line, the instant the
    consume rate was back, and the fault shaded as on the timeline."""
    fig, axes = plt.subplots(len(faults), 1, figsize=(12, 3.2 * len(faults)), dpi=110, squeeze=False)
    for ax, f in zip(axes[:, 0], faults):
        pts = f.get("series") or []
        xs = [p["t_s"] + 0.5 for p in pts]
        ax.plot(xs, [p["consumed"] for p in pts], color="tab:blue", lw=1.6, label="consumed/s")
        ax.plot(xs, [p["published"] for p in pts], color="tab:orange", lw=1.0, ls="--", label="published/s")
        ax.plot(xs, [p["confirmed"] for p in pts], color="tab:green", lw=1.0, ls=":", label="confirmed (ack)/s")
        if xs:
            ax.set_xlim(min(xs) - 0.5, max(xs) + 0.5)
        shade_fault(ax, f, f["at_s"], max(xs) + 0.5 if xs else 0.0)
        if f.get("baseline_consume_rate"):
            ax.axhline(f["baseline_consume_rate"], color="grey", lw=0.8, ls=":", label="pre-fault mean (consumed)")
            ax.axhline(0.95 * f["baseline_consume_rate"], color="grey", lw=0.6, ls="--", label="95 % of it")
        if f.get("consume_back_s") is not None:
            ax.axvline(f["consume_back_s"], color="tab:blue", lw=0.8, ls="-.", label="consume rate back")
        if f.get("first_confirm_s") is not None:
            ax.axvline(f["first_confirm_s"], color="tab:green", lw=0.8, ls="-.", label="first confirm after the fault")
        ax.yaxis.set_major_formatter(FuncFormatter(rate_fmt))
        ax.set_ylim(bottom=0)
        ax.set_ylabel("msg/s")
        ax.set_title(f"fault {int(f['index']) + 1}: {f['action']} {f['node']} on {f['cluster']} at {f['at_s']:.2f} s "
                     f"(red: until the node was back, darker: node down)", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right", ncol=2)
    axes[-1, 0].set_xlabel("seconds since the fault started (1 s buckets since the cluster's t0, drawn at their middle)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
