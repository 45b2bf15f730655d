"""PNG plots of a benchmark's metrics for the HTML report (matplotlib, Agg backend, no display).

Every function takes the run-level frames of ONE sweep x benchmark (``load_metrics(dir, latest=True)``
and ``load_task_results(dir, latest=True)`` filtered to it) and returns a ``Plot``: the bytes of a PNG
sized for what it shows (a bar per model, a row per model and a column per category), so that one
model's chart is small and several fit side by side on a page. When there is nothing to draw it returns
a ``NoPlot`` saying why (every task ended in an error, no categories, no usage), never an empty box.
Columns that an older results directory lacks (``stderr``, ``ci_low``, ``ci_high``, costs) are treated
as absent.
"""

from __future__ import annotations

import html
import io
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentcompass_dagster.reporting.results import newest_runs

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

DPI = 100
# Pixel sizes: the smallest (one model), and what each model or category adds.
MIN_WIDTH, MAX_WIDTH, BAR_HEIGHT = 400, 1000, 380
PER_MODEL_BAR, PER_CATEGORY, PER_MODEL_ROW = 90, 60, 36
SCATTER = (520, 380)
LABEL_MAX = 24  # characters of a model or category name shown on an axis
BAR_COLOR = "#4C72B0"
POINT_COLOR = "#DD8452"


@dataclass(frozen=True)
class Plot:
    png: bytes
    width: int
    height: int


@dataclass(frozen=True)
class NoPlot:
    """Why a plot has nothing to draw, shown in its place."""

    reason: str


def _figure(width: int, height: int = BAR_HEIGHT) -> tuple[Figure, Axes]:
    # A bare Figure with its own Agg canvas: no pyplot state, no display, safe in threads.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width / DPI, height / DPI), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _width(base: int, per_item: int, items: int) -> int:
    return max(MIN_WIDTH, min(MAX_WIDTH, base + per_item * items))


def _png(fig: Figure) -> Plot:
    # No bbox_inches="tight": it would change the pixel size.
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    width, height = fig.canvas.get_width_height()
    return Plot(buffer.getvalue(), width, height)


def _short(text: Any) -> str:
    text = str(text)
    return text if len(text) <= LABEL_MAX else text[: LABEL_MAX - 1] + "…"


def _number(value: Any) -> float | None:
    """A finite float, or None for missing values (None, NaN, pd.NA)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _newest(metrics: pd.DataFrame) -> pd.DataFrame:
    """One row per model x metric: the newest run's (``newest_runs``) when a frame holds several runs of a
    model."""
    if metrics.empty:
        return metrics
    newest = metrics.merge(newest_runs(metrics, ["model"]), on=["model", "run_id"])
    return newest.drop_duplicates(subset=["model", "metric"], keep="last")


def _accuracy_rows(metrics: pd.DataFrame) -> list[tuple[str, float, float | None, float | None]]:
    """(model, accuracy, ci_low, ci_high) per model with an accuracy, in first-seen model order."""
    if metrics.empty or not {"model", "metric", "value"} <= set(metrics.columns):
        return []
    rows = _newest(metrics[metrics["metric"] == "accuracy"])
    out = []
    for _, row in rows.iterrows():
        value = _number(row["value"])
        if value is None:
            continue
        low, high = _number(row.get("ci_low")), _number(row.get("ci_high"))
        if low is None or high is None:
            low = high = None
        out.append((str(row["model"]), value, low, high))
    return out


def _no_accuracy(metrics: pd.DataFrame) -> str:
    """Why no model has an accuracy to draw."""
    if not metrics.empty and {"metric", "n"} <= set(metrics.columns):
        accuracy = metrics[metrics["metric"] == "accuracy"]
        if not accuracy.empty and not accuracy["n"].fillna(0).astype(bool).any():
            return "No task was evaluated: every task of every model ended in an error."
    return "No accuracy recorded: the benchmark's metrics have none."


def _error_bars(rows: list[tuple[str, float, float | None, float | None]]) -> list[list[float]] | None:
    """Asymmetric error bar lengths (below, above); zero-length for models without an interval."""
    if all(low is None for _, _, low, _ in rows):
        return None
    below = [max(value - low, 0.0) if low is not None else 0.0 for _, value, low, _ in rows]
    above = [max(high - value, 0.0) if high is not None else 0.0 for _, value, _, high in rows]
    return [below, above]


def accuracy_with_ci(metrics_df: pd.DataFrame) -> Plot | NoPlot:
    """Bars of accuracy per model with their 95% bootstrap interval (where the metrics carry one)."""
    title = "Accuracy per model (95% CI over tasks)"
    rows = _accuracy_rows(metrics_df)
    if not rows:
        return NoPlot(_no_accuracy(metrics_df))
    fig, ax = _figure(_width(310, PER_MODEL_BAR, len(rows)))
    positions = list(range(len(rows)))
    values = [value for _, value, _, _ in rows]
    ax.bar(positions, values, width=0.6, color=BAR_COLOR, zorder=2)
    errors = _error_bars(rows)
    if errors is not None:
        ax.errorbar(positions, values, yerr=errors, fmt="none", ecolor="black", elinewidth=1.5, capsize=8, zorder=3)
    for x, (_, value, low, high) in zip(positions, rows):
        top = high if high is not None else value
        label = f"{value:.3f}" if low is None else f"{value:.3f}\n[{low:.2f}, {high:.2f}]"
        ax.text(x, min(top + 0.02, 1.08), label, ha="center", va="bottom", fontsize=9)
    ax.set_xticks(
        positions,
        [_short(model) for model, _, _, _ in rows],
        rotation=30 if len(rows) > 4 else 0,
        ha="right" if len(rows) > 4 else "center",
    )
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ax.set_ylim(0, 1.2)
    ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_ylabel("accuracy")
    ax.set_xlabel("model")
    ax.set_title(title)
    ax.grid(axis="y", color="#dddddd", zorder=0)
    if errors is None:
        ax.text(
            0.99,
            0.98,
            "no confidence intervals in these metrics",
            ha="right",
            va="top",
            fontsize=9,
            color="#777777",
            transform=ax.transAxes,
        )
    return _png(fig)


def category_heatmap(metrics_df: pd.DataFrame) -> Plot | NoPlot:
    """Models x categories, coloured by the ``accuracy/<category>`` metrics (grey: no value)."""
    import numpy as np

    title = "Accuracy per category"
    frame = metrics_df
    if not frame.empty and {"model", "metric", "value"} <= set(frame.columns):
        frame = _newest(frame[frame["metric"].astype(str).str.startswith("accuracy/")])
    else:
        frame = frame.iloc[0:0]
    if frame.empty:
        if not _accuracy_rows(metrics_df):
            return NoPlot(_no_accuracy(metrics_df))
        return NoPlot("No accuracy per category: the tasks have no categories.")
    models = list(dict.fromkeys(frame["model"].astype(str)))
    categories = sorted(dict.fromkeys(frame["metric"].astype(str).str.removeprefix("accuracy/")))
    fig, ax = _figure(_width(280, PER_CATEGORY, len(categories)), max(260, min(900, 190 + PER_MODEL_ROW * len(models))))
    grid = np.full((len(models), len(categories)), np.nan)
    for _, row in frame.iterrows():
        value = _number(row["value"])
        if value is not None:
            grid[models.index(str(row["model"])), categories.index(str(row["metric"])[len("accuracy/") :])] = value
    from matplotlib import colormaps

    cmap = colormaps["RdYlGn"].with_extremes(bad="#cccccc")
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
    fig.colorbar(image, ax=ax, label="accuracy", fraction=0.05)
    if len(models) * len(categories) <= 200:
        size = 10 if len(categories) <= 12 else 7
        for i in range(len(models)):
            for j in range(len(categories)):
                value = grid[i, j]
                ax.text(
                    j,
                    i,
                    "n/a" if np.isnan(value) else f"{value:.2f}",
                    ha="center",
                    va="center",
                    fontsize=size,
                    color="black",
                )
    ax.set_xticks(
        range(len(categories)),
        [_short(c) for c in categories],
        rotation=30 if len(categories) > 5 else 0,
        ha="right" if len(categories) > 5 else "center",
    )
    ax.set_yticks(range(len(models)), [_short(m) for m in models])
    ax.set_xlabel("category")
    ax.set_ylabel("model")
    ax.set_title(title)
    return _png(fig)


def _usage(task_results: pd.DataFrame) -> tuple[str, str, dict[str, float]]:
    """What to put on the x axis: total cost per model if any cost was recorded, else total tokens, else
    total duration; (what it is, axis label, model -> value)."""
    if task_results is None or task_results.empty or "model" not in task_results.columns:
        return "", "", {}
    frame = task_results.copy()
    for column in ("cost_usd", "input_tokens", "output_tokens", "duration_s"):
        if column not in frame.columns:
            frame[column] = float("nan")
        frame[column] = frame[column].astype("float64")
    grouped = frame.groupby(frame["model"].astype(str), sort=False)
    cost = grouped["cost_usd"].sum(min_count=1)
    if cost.notna().any() and float(cost.fillna(0).max()) > 0:
        return "cost", "total cost (USD)", {m: float(v) for m, v in cost.dropna().items()}
    tokens = grouped["input_tokens"].sum(min_count=1).fillna(0) + grouped["output_tokens"].sum(min_count=1).fillna(0)
    if float(tokens.max()) > 0:
        return "tokens", "total tokens (input + output)", {m: float(v) for m, v in tokens.items()}
    duration = grouped["duration_s"].sum(min_count=1)
    if duration.notna().any():
        label = "total task duration (s): no tokens or cost recorded"
        return "duration", label, {m: float(v) for m, v in duration.dropna().items()}
    return "", "", {}


def cost_vs_accuracy(metrics_df: pd.DataFrame, task_results_df: pd.DataFrame) -> Plot | NoPlot:
    """One point per model: what it spent (cost, else tokens, else time) against its accuracy."""
    kind, label, spent = _usage(task_results_df)
    title = f"Accuracy against {kind or 'cost'} per model"
    accuracy = _accuracy_rows(metrics_df)
    if not accuracy:
        return NoPlot(_no_accuracy(metrics_df))
    rows = [row for row in accuracy if row[0] in spent]
    if not rows:
        return NoPlot("No usage recorded: no model with an accuracy recorded cost, tokens or task time.")
    fig, ax = _figure(*SCATTER)
    xs = [spent[model] for model, _, _, _ in rows]
    ys = [value for _, value, _, _ in rows]
    errors = _error_bars(rows)
    ax.errorbar(
        xs,
        ys,
        yerr=errors,
        fmt="o",
        color=POINT_COLOR,
        ecolor="#555555",
        markersize=9,
        elinewidth=1.2,
        capsize=5,
        zorder=3,
    )
    for (model, _, _, _), x, y in zip(rows, xs, ys):
        ax.annotate(_short(model), (x, y), xytext=(8, 6), textcoords="offset points", fontsize=10)
    low, high = min(xs), max(xs)
    pad = (high - low) * 0.15 if high > low else (abs(high) * 0.5 or 1.0)
    ax.set_xlim(max(low - pad, 0.0) if low >= 0 else low - pad, high + pad)
    ax.set_ylim(-0.05, 1.1)
    ax.set_xlabel(label)
    ax.set_ylabel("accuracy")
    ax.set_title(title)
    ax.grid(color="#dddddd", zorder=0)
    return _png(fig)


def markdown_image(title: str, plot: Plot | NoPlot) -> str:
    """The plot as a markdown image (a data: URI), or why there is none, for Dagster metadata."""
    import base64

    if isinstance(plot, NoPlot):
        return f"_{plot.reason}_"
    return f"![{title}](data:image/png;base64,{base64.b64encode(plot.png).decode()})"


# The Dagster UI shows a markdown metadata value inline when it is shorter than this; longer ones are
# behind a click.
INLINE_MARKDOWN = 1000
SVG_SAFE = "='/:,."  # left as they are in the data: URL; everything else is percent-encoded


def inline_accuracy(metrics: pd.DataFrame) -> str | None:
    """Accuracy per model (bar, 95% interval as a line) as a markdown image of a tiny SVG, short enough
    for the Dagster UI to show inline; None when there are too many models for that."""
    from urllib.parse import quote

    rows = list(metrics[metrics["metric"] == "accuracy"].itertuples()) if not metrics.empty else []
    parts = []
    for i, row in enumerate(rows):
        y, value = 4 + 20 * i, _number(row.value) or 0.0
        low, high = _number(getattr(row, "ci_low", None)), _number(getattr(row, "ci_high", None))
        parts.append(
            f"<text x='0' y='{y + 11}'>{html.escape(str(row.model)[:12], quote=False)}</text>"
            f"<rect x='84' y='{y}' width='{160 * value:.0f}' height='14' fill='{BAR_COLOR}'/>"
        )
        if low is not None and high is not None:
            parts.append(f"<path d='M{84 + 160 * low:.0f} {y + 7}H{84 + 160 * high:.0f}' stroke='#000'/>")
        parts.append(f"<text x='250' y='{y + 11}'>{value:.3f}</text>")
    svg = (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='290' height='{8 + 20 * len(rows)}' font-size='11' "
        f"font-family='sans-serif'>{''.join(parts)}</svg>"
    )
    markdown = f"![accuracy](data:image/svg+xml,{quote(svg, safe=SVG_SAFE)})"
    return markdown if rows and len(markdown) < INLINE_MARKDOWN else None
