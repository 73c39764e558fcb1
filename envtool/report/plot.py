"""A PNG of all-reduce bus bandwidth against message size (the only module importing matplotlib)."""

from __future__ import annotations

import io
from pathlib import Path

from envtool.errors import InputError
from envtool.nccl.model import NcclRun, large_floor, peak_busbw
from envtool.report.nccl_text import size_text
from envtool.yamlio import write_atomic_bytes


def series(run: NcclRun) -> tuple[str, list[float], list[float], str]:
    """What the plot draws: busbw per size, or algbw (with why) when busbw is 0 at every size,
    as with one rank, where nothing crosses a link."""
    if any(r.oop.busbw or r.ip.busbw for r in run.rows):
        return "busbw", [r.oop.busbw for r in run.rows], [r.ip.busbw for r in run.rows], ""
    note = "\nbusbw is 0 at every size (one rank: nothing crosses a link): algbw shown"
    return "algbw", [r.oop.algbw for r in run.rows], [r.ip.algbw for r in run.rows], note


def busbw_png(run: NcclRun, path: Path, large: int, title: str = "") -> None:
    """busbw (out-of-place and in-place) per size, the peak at large sizes marked."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        raise InputError("--plot needs matplotlib: pip install 'envtool[plot]'") from None
    if not run.rows:
        raise InputError(f"{run.source}: no all-reduce rows to plot")
    sizes = [r.size for r in run.rows]
    large = large_floor(run.rows, large)  # a short sweep: its largest sizes
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    what, oop, ip, note = series(run)
    try:
        ax.plot(sizes, oop, marker="o", label="out-of-place")
        ax.plot(sizes, ip, marker="s", label="in-place")
        peak = peak_busbw(run.rows, min_bytes=large) if what == "busbw" else None
        if peak is not None:
            ax.axhline(peak, linestyle="--", color="grey", linewidth=1)
            ax.annotate(
                f"peak {peak:.2f} GB/s at sizes >= {size_text(large)}",
                (sizes[-1], peak),
                textcoords="offset points",
                xytext=(0, -12),
                ha="right",
                fontsize=8,
                color="grey",
            )
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: size_text(v)))
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(f"{what} (GB/s)")
        name = (run.collective or "nccl-tests").replace("_", "-")  # all-reduce, all-gather, ...
        ranks = f"{run.nranks} ranks" if run.nranks else "ranks: ?"
        version = f", NCCL {run.nccl_version}" if run.nccl_version else ""
        ax.set_title(title or f"{name} {what}: {Path(run.source).name} ({ranks}{version}){note}")
        ax.grid(True, which="major", alpha=0.3)
        ax.set_ylim(bottom=0)
        ax.legend(loc="lower right")
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        write_atomic_bytes(path, buf.getvalue())
    except OSError as exc:
        raise InputError(f"{path}: cannot write the plot: {exc.strerror}") from None
    finally:
        plt.close(fig)
