"""Profile figures with matplotlib (the `plot` extra): time per function, and execution over time.

The heat map's rows are the executed addresses in address order (grouped into at most
`ADDRESS_ROWS` rows), so code far apart in memory does not leave the picture empty; rows
where a new function starts are labelled with its name.
"""

from __future__ import annotations

import os

import numpy as np

from ..errors import CputraceError
from .profile import Profile

ADDRESS_ROWS = 256
TOP_FUNCTIONS = 15


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise CputraceError("plots need matplotlib: pip install 'cputrace[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _function_bars(ax, result: Profile, unit: str) -> None:
    table = result.functions
    weight = "time_self" if result.has_time else "insns_self"
    values = np.asarray(table.column(weight).fill_null(0).to_numpy(), dtype=float)
    names = [
        f"{n} [cpu{c}]" if len(set(table.column("cpu").to_pylist())) > 1 else n
        for n, c in zip(table.column("name").to_pylist(), table.column("cpu").to_pylist(), strict=True)
    ]
    order = np.argsort(values)[::-1][:TOP_FUNCTIONS][::-1]
    ax.barh(np.arange(len(order)), values[order], color="tab:blue")
    ax.set_yticks(np.arange(len(order)), [names[i] for i in order], fontsize=8)
    ax.set_xlabel(f"self time ({unit})" if result.has_time else "self instructions")
    ax.set_title("Time per function" if result.has_time else "Instructions per function")


def _heat_map(ax, fig, result: Profile, unit: str) -> None:
    heat = result.heat
    if heat is None or not heat.cells.num_rows:
        ax.set_axis_off()
        return
    pcs = heat.cells.column("pc").to_numpy()
    distinct = np.unique(pcs)
    per_row = max(1, -(-len(distinct) // ADDRESS_ROWS))
    rows = np.searchsorted(distinct, pcs) // per_row
    grid = np.zeros((rows.max() + 1, heat.bins))
    np.add.at(grid, (rows, heat.cells.column("bin").to_numpy()), heat.cells.column("count").to_numpy())
    shown = np.ma.masked_equal(grid, 0)
    image = ax.imshow(shown, aspect="auto", origin="lower", interpolation="nearest", cmap="viridis",
                      extent=(heat.lo, heat.hi, 0, grid.shape[0]),
                      norm=_log_norm(grid))  # fmt: skip
    fig.colorbar(image, ax=ax, label="instructions")
    ax.set_xlabel(f"time ({unit})" if heat.axis == "time" else "instruction (seq)")
    ax.set_ylabel("executed addresses, in address order")
    ax.set_title("Execution over time")
    labels = _row_labels(result, distinct, per_row)
    if labels:
        positions, names = zip(*labels, strict=True)
        ax.set_yticks(np.asarray(positions) + 0.5, names, fontsize=7)


def _log_norm(grid: np.ndarray):
    from matplotlib.colors import LogNorm

    return LogNorm(vmin=1, vmax=max(float(grid.max()), 1.0))


def _row_labels(result: Profile, distinct: np.ndarray, per_row: int) -> list[tuple[int, str]]:
    """(row, function) where a function's code starts, leaving out those too close to the last."""
    table = result.addresses
    name_of = dict(zip(table.column("pc").to_pylist(), table.column("name").to_pylist(), strict=True))
    rows = -(-len(distinct) // per_row)
    gap = max(1, rows // 40)  # rows between labels, so they do not overlap
    labels: list[tuple[int, str]] = []
    previous = None
    for index, address in enumerate(distinct.tolist()):
        function = (name_of.get(address) or "").split("+")[0]
        row = index // per_row
        if (
            function != previous
            and not function.startswith("0x")
            and (not labels or row - labels[-1][0] >= gap)
        ):
            labels.append((row, function))
        previous = function
    return labels


def plot_profile(
    result: Profile, path: str | os.PathLike[str], title: str = "", unit: str | None = None,
    file_format: str | None = None,
) -> None:
    """Write the figure to `path` in `file_format` (png, svg, pdf...), else the one its suffix
    names."""
    plt = _pyplot()
    fig, (bars, heat) = plt.subplots(1, 2, figsize=(15, 6.5), gridspec_kw={"width_ratios": [2, 3]})
    _function_bars(bars, result, unit or "trace units")
    _heat_map(heat, fig, result, unit or "trace units")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110, format=file_format)
    plt.close(fig)
