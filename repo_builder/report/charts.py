"""Charts as inline SVG text, drawn by matplotlib's SVG backend (offline; nothing fetched when shown).

Each chart takes plain data and returns one ``<svg>`` element for the page. What makes them fit a page:
- text stays text (``svg.fonttype: none``), so names are searchable and escaped by matplotlib's writer, and
  mathtext is off, so a model called ``$x$`` is shown as typed;
- every id in a chart is prefixed with the chart's id, so several charts live in one HTML document;
- each drawn series carries the id ``<chart>-series-<n>``: the browser test finds it in the DOM.
matplotlib is imported inside ``_drawing`` (heavy; only ``report`` and ``bench --report`` need it).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from repo_builder.errors import require

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

# Okabe & Ito's palette: told apart with every common colour-vision deficiency (the page says so too).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#F0E442")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", "-.", ":")
WIDTH_IN, HEIGHT_IN = 8.0, 4.6  # 576 x 331 pt: scaled to the page's width, 9-10 pt text stays readable


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    label: str  # drawn beside the point (the concurrency, or the candidate's id)


@dataclass(frozen=True)
class Curve:
    name: str
    points: tuple[Point, ...]
    joined: bool = True  # False: a scatter (tune's candidates)
    chosen: int | None = None  # index into points of the configuration to mark
    chosen_word: str = "chosen"  # its label on the chart ("winner" for a search)


@dataclass(frozen=True)
class StepBars:
    """One ensemble step: per-request queue and compute time (ms) at each concurrency."""

    name: str
    queue_ms: tuple[float, ...]
    compute_ms: tuple[float, ...]


def require_plotting(purpose: str) -> None:
    """A one-line ToolError naming the extra when matplotlib is missing (checked before long work)."""
    require("matplotlib", "report", purpose)


@contextmanager
def _drawing(chart_id: str) -> Iterator[Any]:
    """Axes on a fresh Figure (no pyplot state), under the settings every chart is drawn with."""
    require("matplotlib", "report", "drawing report charts")
    import matplotlib  # heavy: imported only when a chart is drawn
    from cycler import cycler  # matplotlib's own dependency (its re-export is not in matplotlib's stubs)
    from matplotlib.figure import Figure

    settings: dict[RcKeyType, Any] = {
        "svg.fonttype": "none",
        "svg.hashsalt": chart_id,  # clip-path and marker ids differ between charts
        "text.parse_math": False,
        "font.size": 10,
        "axes.prop_cycle": cycler(color=PALETTE),
        "axes.grid": True,
        "grid.alpha": 0.3,
    }
    with matplotlib.rc_context(settings):
        yield Figure(figsize=(WIDTH_IN, HEIGHT_IN), layout="constrained").add_subplot()


def _svg(ax: Any, chart_id: str) -> str:
    buffer = io.StringIO()
    ax.figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    return namespace_ids(buffer.getvalue(), chart_id)


def namespace_ids(svg: str, chart_id: str) -> str:
    """The ``<svg>`` element alone (no XML prolog), every id and reference prefixed with ``chart_id``."""
    svg = svg[svg.index("<svg"):]
    prefix = f"{chart_id}-"

    def named(name: str) -> str:
        return name if name.startswith(prefix) else prefix + name

    def tag(match: re.Match[str]) -> str:
        text = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{named(m.group(1))}"', match.group(0))
        return re.sub(r'(url\(#|href="#)([^")]+)', lambda m: m.group(1) + named(m.group(2)), text)

    # Inside tags only: text nodes hold names from the repository (escaped, so never a "<").
    return re.sub(r"<[^>]+>", tag, svg)


def _style(index: int) -> dict[str, Any]:
    return {
        "color": PALETTE[index % len(PALETTE)],
        "marker": MARKERS[index % len(MARKERS)],
        "linestyle": LINESTYLES[(index // len(PALETTE)) % len(LINESTYLES)],
    }


def curve_chart(chart_id: str, curves: Sequence[Curve], *, xlabel: str, ylabel: str, budget_ms: float | None = None,
                from_zero: bool = True) -> str:
    """Throughput against p99 latency (or any x/y): one series per curve, points labelled, the chosen
    point starred, the latency budget as a vertical line. ``from_zero`` False: the axes span the data (and
    the budget) only, so points close together are told apart."""
    with _drawing(chart_id) as ax:
        for index, curve in enumerate(curves):
            _draw_curve(ax, chart_id, index, curve)
        if budget_ms is not None:
            ax.axvline(budget_ms, color="#555555", linestyle="--", linewidth=1.2, label=f"p99 budget {budget_ms:g} ms", gid=f"{chart_id}-budget")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        # With room above and right for the point labels and the star.
        xs = [p.x for c in curves for p in c.points] + ([budget_ms] if budget_ms is not None else [])
        ys = [p.y for c in curves for p in c.points]
        ax.set_xlim(*_span(xs, 0.15, from_zero))
        ax.set_ylim(*_span(ys, 0.18, from_zero))
        ax.legend(loc="best", fontsize=9)
        return _svg(ax, chart_id)


def _span(values: Sequence[float], room: float, from_zero: bool) -> tuple[float, float]:
    """Axis limits: 0 to the top plus ``room``, or the data's range padded (``room`` above, half of it below,
    where the star's word sits)."""
    top = max([*values, 1e-3])
    if from_zero:
        return 0.0, top * (1.0 + room)
    low = min(values) if values else 0.0
    width = top - low
    if width <= 0:  # one value: a band around it
        width = max(abs(top) * 0.1, 1e-3)
        return max(0.0, low - width), top + width
    return max(0.0, low - width * room / 2), top + width * room


def _draw_curve(ax: Any, chart_id: str, index: int, curve: Curve) -> None:
    style = _style(index)
    xs, ys = [p.x for p in curve.points], [p.y for p in curve.points]
    width = 1.8 if curve.joined else 0
    ax.plot(xs, ys, label=curve.name, gid=f"{chart_id}-series-{index}", markersize=6, linewidth=width, **style)
    for p in curve.points:
        ax.annotate(p.label, (p.x, p.y), textcoords="offset points", xytext=(5, 5), fontsize=8, color=style["color"])
    if curve.chosen is not None:
        best = curve.points[curve.chosen]
        ax.plot([best.x], [best.y], marker="*", markersize=18, color=style["color"], markeredgecolor="black", linestyle="none", gid=f"{chart_id}-chosen-{index}")
        ax.annotate(curve.chosen_word, (best.x, best.y), textcoords="offset points", xytext=(8, -14), fontsize=9, fontweight="bold")


def step_chart(chart_id: str, concurrencies: Sequence[int], steps: Sequence[StepBars]) -> str:
    """Per concurrency, one bar per request: each step's queue (hatched) then compute, stacked."""
    positions = list(range(len(concurrencies)))
    bottom = [0.0] * len(positions)
    with _drawing(chart_id) as ax:
        for index, step in enumerate(steps):
            colour = PALETTE[index % len(PALETTE)]
            for part, values, fill in (("queue", step.queue_ms, False), ("compute", step.compute_ms, True)):
                bars = ax.bar(
                    positions, values, 0.6, bottom=bottom, color=colour if fill else "white", edgecolor=colour,
                    hatch=None if fill else "///", linewidth=1.2, label=f"{step.name} {part}",
                )
                for position, bar in zip(positions, bars, strict=True):
                    bar.set_gid(f"{chart_id}-series-{index}-{part}-{position}")
                bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        ax.set_xticks(positions, [str(c) for c in concurrencies])
        ax.set_xlabel("concurrency (closed-loop clients)")
        ax.set_ylabel("time per request (ms)")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)  # beside the bars, never on them
        return _svg(ax, chart_id)
