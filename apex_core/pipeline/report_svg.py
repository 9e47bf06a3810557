"""The plots of the run report, drawn as inline SVG by hand.

The report is one HTML file a person can mail, archive or open offline, so it cannot load a
plotting library or a script: each chart here is a few lines, rectangles and texts on a value axis
that picks its own ticks (linear, or logarithmic when the values span more than a factor of 20, as
device times and speedups of different kernels do). Every text goes through ``esc``: task ids and
profiled kernel names come from outside and may hold ``<`` and ``&``. A chart with nothing to show
is a short "no data: why" note, never an empty frame.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

PALETTE = ("#2f6db5", "#d9822b", "#2e8b57", "#c0392b", "#7a4fb5", "#8c6d3f", "#c2549d", "#5f6b7a")
BEFORE, AFTER = "#9aa0a6", "#2f6db5"
GOOD, BAD, NEUTRAL = "#2e8b57", "#c0392b", "#6b7280"
GRID, GRID_DARK, INK = "#e3e6ea", "#c4c8cd", "#1f2328"
LOG_WHEN = 20.0
"""A value axis turns logarithmic when its largest value is more than this times its smallest."""

Label = Callable[[float], str]


def esc(text: object) -> str:
    return escape(str(text), quote=True)


def plain(value: float) -> str:
    """A tick or value label: thousands separated, else four significant digits."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def times(value: float) -> str:
    return f"{plain(value)}x"


def duration_ns(value: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(value) >= scale:
            return f"{plain(value / scale)} {unit}"
    return f"{plain(value)} ns"


@dataclass(frozen=True)
class Axis:
    """Values ``lo``..``hi`` drawn from pixel ``start`` to pixel ``end`` (end < start for a y axis)."""

    lo: float
    hi: float
    start: float
    end: float
    log: bool
    ticks: tuple[float, ...]

    def at(self, value: float) -> float:
        value = min(max(value, self.lo), self.hi)
        if self.log:
            share = math.log(value / self.lo) / math.log(self.hi / self.lo)
        else:
            share = (value - self.lo) / (self.hi - self.lo)
        return self.start + share * (self.end - self.start)


def make_axis(values: Sequence[float], start: float, end: float, *, zero: bool, log_allowed: bool = True) -> Axis:
    """An axis over ``values`` with round ticks; linear ones include 0 when ``zero``."""
    finite = [v for v in values if math.isfinite(v)] or [0.0, 1.0]
    lo, hi = min(finite), max(finite)
    if log_allowed and lo > 0 and hi / lo > LOG_WHEN:
        ticks = _log_ticks(lo, hi)
        return Axis(ticks[0], ticks[-1], start, end, True, ticks)
    if zero:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    if hi == lo:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    ticks = _linear_ticks(lo, hi)
    return Axis(ticks[0], ticks[-1], start, end, False, ticks)


def _linear_ticks(lo: float, hi: float, count: int = 5) -> tuple[float, ...]:
    raw = (hi - lo) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw * (1 - 1e-9))
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return tuple(round(i * step, 12) for i in range(first, last + 1))


def _log_ticks(lo: float, hi: float) -> tuple[float, ...]:
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    stride = max(1, math.ceil((last - first) / 8))
    multiples = (1, 2, 5) if last - first <= 3 else (1,)
    candidates = sorted(m * 10.0 ** e for e in range(first, last + stride, stride) for m in multiples)
    low = max(t for t in candidates if t <= lo * (1 + 1e-9))
    high = min(t for t in candidates if t >= hi * (1 - 1e-9))
    return tuple(t for t in candidates if low <= t <= high)


class Canvas:
    """An SVG being drawn: shapes and texts in pixel coordinates, escaped as they are added."""

    def __init__(self, width: int, height: int, title: str) -> None:
        self.width, self.height, self.title = width, height, title
        self.parts: list[str] = []
        self.text(width / 2, 20, title, anchor="middle", size=14, weight="600")

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str = INK, width: float = 1, dash: str = "") -> None:
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{stroke}" '
                          f'stroke-width="{width}"{dashed}/>')

    def rect(self, x: float, y: float, w: float, h: float, fill: str, tip: str = "", opacity: float = 1.0) -> None:
        self._shape(f'rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{max(h, 0):.1f}" fill="{fill}" '
                    f'fill-opacity="{opacity}"', tip)

    def dot(self, x: float, y: float, fill: str, tip: str = "", r: float = 4.5) -> None:
        self._shape(f'circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="{fill}" stroke="#ffffff" stroke-width="1"', tip)

    def path(self, points: Sequence[tuple[float, float]], stroke: str, width: float = 2) -> None:
        coordinates = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        self.parts.append(f'<polyline points="{coordinates}" fill="none" stroke="{stroke}" stroke-width="{width}"/>')

    def text(self, x: float, y: float, content: str, *, anchor: str = "start", size: int = 12, weight: str = "normal",
             fill: str = INK, rotate: bool = False, tip: str = "") -> None:
        turn = f' transform="rotate(-90 {x:.1f} {y:.1f})"' if rotate else ""
        inner = esc(content) + (f"<title>{esc(tip)}</title>" if tip else "")
        self.parts.append(f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" font-weight="{weight}" '
                          f'fill="{fill}"{turn}>{inner}</text>')

    def _shape(self, element: str, tip: str) -> None:
        name = element.split(" ", 1)[0]
        self.parts.append(f"<{element}><title>{esc(tip)}</title></{name}>" if tip else f"<{element}/>")

    def legend(self, x: float, y: float, entries: Sequence[tuple[str, str]]) -> None:
        for index, (name, color) in enumerate(entries):
            self.dot(x + 5, y + 18 * index - 4, color)
            self.text(x + 14, y + 18 * index, shorten(name, 34), tip=name)

    def svg(self) -> str:
        return (f'<svg class="plot" viewBox="0 0 {self.width} {self.height}" width="{self.width}" height="{self.height}" '
                f'role="img" font-family="system-ui, sans-serif"><title>{esc(self.title)}</title>'
                + "".join(self.parts) + "</svg>")


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class Plot:
    """A finished figure: its HTML (an SVG with its caption, or the note saying why there is none)."""

    html: str


def figure(canvas: Canvas, caption: str) -> Plot:
    return Plot(f"<figure>{canvas.svg()}<figcaption>{esc(caption)}</figcaption></figure>")


def no_data(title: str, why: str) -> Plot:
    return Plot(f'<figure class="nodata"><p class="plot-title">{esc(title)}</p><p>no data: {esc(why)}</p></figure>')


def _x_axis(canvas: Canvas, axis: Axis, y: float, label: Label, title: str) -> None:
    """Grid lines, tick labels and the title of a horizontal value axis whose plot ends at ``y``."""
    for tick in axis.ticks:
        x = axis.at(tick)
        canvas.line(x, 34, x, y, GRID)
        canvas.line(x, y, x, y + 4)
        canvas.text(x, y + 17, label(tick), anchor="middle", size=11)
    canvas.line(axis.start, y, axis.end, y)
    canvas.text((axis.start + axis.end) / 2, y + 34, title + (" (log scale)" if axis.log else ""), anchor="middle")


def _y_axis(canvas: Canvas, axis: Axis, x: float, right: float, label: Label, title: str) -> None:
    for tick in axis.ticks:
        y = axis.at(tick)
        canvas.line(x, y, right, y, GRID)
        canvas.line(x - 4, y, x, y)
        canvas.text(x - 7, y + 4, label(tick), anchor="end", size=11)
    canvas.line(x, axis.start, x, axis.end)
    canvas.text(16, (axis.start + axis.end) / 2, title + (" (log scale)" if axis.log else ""), anchor="middle", rotate=True)


@dataclass(frozen=True)
class IntervalRow:
    name: str
    value: float
    low: float
    high: float
    note: str = ""


def interval_rows(title: str, rows: Sequence[IntervalRow], reference: float, axis_title: str, caption: str) -> Plot:
    """One row per name: a dot at its value, whiskers over its interval, a dashed line at ``reference``;
    green when the whole interval lies above the reference, red below, grey across it."""
    labels = [f"{r.value:.3f}x [{r.low:.3f}, {r.high:.3f}] {r.note}".rstrip() for r in rows]
    left, right, row = _left_margin([r.name for r in rows]), _right_margin(labels), 30
    height = 62 + row * len(rows) + 44
    canvas = Canvas(760, height, title)
    bottom = 48 + row * len(rows)
    axis = make_axis([reference, *(v for r in rows for v in (r.value, r.low, r.high))], left, 760 - right, zero=False)
    _x_axis(canvas, axis, bottom, times, axis_title)
    canvas.line(axis.at(reference), 34, axis.at(reference), bottom, NEUTRAL, 1.5, "5 4")
    for index, r in enumerate(rows):
        y = 48 + row * index + row / 2
        color = GOOD if r.low > reference else BAD if r.high < reference else NEUTRAL
        canvas.text(left - 8, y + 4, shorten(r.name, 36), anchor="end", tip=r.name)
        canvas.line(axis.at(r.low), y, axis.at(r.high), y, color, 2)
        for end in (r.low, r.high):
            canvas.line(axis.at(end), y - 6, axis.at(end), y + 6, color, 2)
        canvas.dot(axis.at(r.value), y, color, f"{r.name}: {times(r.value)} (95% interval {times(r.low)}-{times(r.high)})")
        canvas.text(760 - right + 10, y + 4, labels[index], size=11)
    return figure(canvas, caption)


@dataclass(frozen=True)
class PairRow:
    name: str
    before: float
    after: float


def before_after_rows(title: str, rows: Sequence[PairRow], label: Label, axis_title: str, legend: tuple[str, str],
                      caption: str) -> Plot:
    """One row per name: a grey dot before, a blue dot after, joined by a line (a dumbbell plot,
    honest on a log axis where bars would start from an arbitrary floor)."""
    left, right, row = _left_margin([r.name for r in rows]), 200, 30
    height = 62 + row * len(rows) + 44 + 24
    canvas = Canvas(760, height, title)
    top, bottom = 48 + 24, 48 + 24 + row * len(rows)
    canvas.legend(left, 44, [(legend[0], BEFORE)])
    canvas.legend(left + 200, 44, [(legend[1], AFTER)])
    axis = make_axis([v for r in rows for v in (r.before, r.after)], left, 760 - right, zero=True)
    _x_axis(canvas, axis, bottom, label, axis_title)
    for index, r in enumerate(rows):
        y = top + row * index + row / 2
        canvas.text(left - 8, y + 4, shorten(r.name, 36), anchor="end", tip=r.name)
        canvas.line(axis.at(r.before), y, axis.at(r.after), y, NEUTRAL, 2)
        canvas.dot(axis.at(r.before), y, BEFORE, f"{r.name} {legend[0]}: {label(r.before)}", 5.5)
        canvas.dot(axis.at(r.after), y, AFTER, f"{r.name} {legend[1]}: {label(r.after)}", 5.5)
        canvas.text(760 - right + 10, y + 4, f"{label(r.before)} → {label(r.after)}", size=11)
    return figure(canvas, caption)


def paired_bars(title: str, names: tuple[str, str], pairs: Sequence[tuple[float, float]], axis_title: str, caption: str) -> Plot:
    """Two bars at the medians of the firsts and the seconds of ``pairs``, each pair's two values as
    points joined by a thin line, so a reader sees the pairing the median ratio is taken over."""
    width, height, left, top, bottom = 560, 340, 86, 40, 290
    canvas = Canvas(width, height, title)
    firsts, seconds = [p[0] for p in pairs], [p[1] for p in pairs]
    axis = make_axis([*firsts, *seconds], bottom, top, zero=True, log_allowed=False)
    _y_axis(canvas, axis, left, width - 20, plain, axis_title)
    centers = (left + (width - left) * 0.3, left + (width - left) * 0.7)
    spread = min(12.0, 90.0 / max(len(pairs), 1))
    for center, values, name, color in zip(centers, (firsts, seconds), names, (BEFORE, AFTER)):
        median = statistics.median(values)
        canvas.rect(center - 60, axis.at(median), 120, axis.at(axis.lo) - axis.at(median), color, f"{name} median {plain(median)}", 0.35)
        canvas.text(center, axis.at(median) + 20, f"median {plain(median)}", anchor="middle", size=11, weight="600")
        canvas.text(center, bottom + 18, name, anchor="middle")
    for index, (first, second) in enumerate(pairs):
        offset = (index - (len(pairs) - 1) / 2) * spread
        a, b = (centers[0] + offset, axis.at(first)), (centers[1] + offset, axis.at(second))
        canvas.line(*a, *b, GRID_DARK, 0.8)
        canvas.dot(*a, BEFORE, f"pair {index + 1} {names[0]}: {plain(first)}", 4)
        canvas.dot(*b, AFTER, f"pair {index + 1} {names[1]}: {plain(second)}", 4)
    return figure(canvas, caption)


def line_chart(title: str, series: Sequence[tuple[str, Sequence[tuple[int, float | None]]]], x_title: str, y_title: str,
               reference: tuple[float, str] | None, caption: str) -> Plot:
    """A line per named series over integer x values; a None value breaks its line."""
    width, height, left, top, bottom, right = 820, 330, 70, 40, 280, 260  # the legend: task ids of ~34 characters
    canvas = Canvas(width, height, title)
    ys = [y for _, points in series for _, y in points if y is not None] + ([reference[0]] if reference else [])
    last = max((x for _, points in series for x, _ in points), default=1)
    y_axis = make_axis(ys, bottom, top, zero=True, log_allowed=False)
    x_axis = Axis(0.5, last + 0.5, left, width - right, False, tuple(range(1, last + 1, max(1, math.ceil(last / 12)))))
    _y_axis(canvas, y_axis, left, width - right, plain, y_title)
    for tick in x_axis.ticks:
        canvas.line(x_axis.at(tick), bottom, x_axis.at(tick), bottom + 4)
        canvas.text(x_axis.at(tick), bottom + 17, str(int(tick)), anchor="middle", size=11)
    canvas.line(left, bottom, width - right, bottom)
    canvas.text((left + width - right) / 2, bottom + 34, x_title, anchor="middle")
    if reference:
        canvas.line(left, y_axis.at(reference[0]), width - right, y_axis.at(reference[0]), NEUTRAL, 1.2, "5 4")
        canvas.text(width - right - 4, y_axis.at(reference[0]) - 5, reference[1], anchor="end", size=10, fill=NEUTRAL)
    for index, (name, points) in enumerate(series):
        color = PALETTE[index % len(PALETTE)]
        runs: list[list[tuple[float, float]]] = [[]]
        for x, y in points:
            if y is None:
                runs.append([])
            else:
                runs[-1].append((x_axis.at(x), y_axis.at(y)))
        for run in runs:
            if len(run) > 1:
                canvas.path(run, color)
        for x, y in points:
            if y is not None:
                canvas.dot(x_axis.at(x), y_axis.at(y), color, f"{name} iteration {x}: {plain(y)}")
    canvas.legend(width - right + 16, top + 8, [(name, PALETTE[i % len(PALETTE)]) for i, (name, _) in enumerate(series)])
    return figure(canvas, caption)


def _left_margin(names: Sequence[str]) -> int:
    return min(max((len(shorten(n, 36)) for n in names), default=8) * 7 + 20, 270)


def _right_margin(labels: Sequence[str]) -> int:
    """Room for the value labels right of the plot (11 px text, about 6.6 px a character), so the
    longest one ("185.500x [170.123, 200.456] integrated") is not cut at the canvas's edge."""
    return max(200, min(int(max((len(label) for label in labels), default=0) * 6.6) + 16, 330))
