"""Bar charts as plain geometry; ``admin/console/bar_chart.html`` draws them as inline
SVG (no JavaScript, no CDN, labels escaped by the template engine)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Bar:
    label: str  # shortened to fit under the bar
    full_label: str  # the tooltip
    value: int
    x: float
    y: float
    width: float
    height: float
    label_x: float
    show_label: bool

    @property
    def value_y(self) -> float:
        return round(self.y - 3, 1)


@dataclass
class BarChart:
    title: str
    width: int
    height: int
    baseline: float
    max_value: int
    bars: list[Bar] = field(default_factory=list)

    @property
    def label_y(self) -> float:
        return self.height - 10

    @property
    def total(self) -> int:
        return sum(b.value for b in self.bars)


def _fit(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


def bar_chart(
    title: str, points: list[dict[str, Any]], *, width: int = 720, height: int = 220, label_every: int = 1
) -> BarChart:
    """Vertical bars scaled to the largest value; every ``label_every``-th bar gets its
    label under the axis (all bars carry it as a tooltip)."""
    top, bottom, left, right = 18, 28, 8, 8
    plot_w, plot_h = width - left - right, height - top - bottom
    max_value = max([int(p["value"]) for p in points] + [1])
    slot = plot_w / max(len(points), 1)
    bar_w = min(max(slot * 0.7, 1.0), 60.0)
    fits = max(2, int(slot * label_every / 6))  # characters of a ~6 px wide font under one label's room
    chart = BarChart(title=title, width=width, height=height, baseline=top + plot_h, max_value=max_value)
    for i, p in enumerate(points):
        value = int(p["value"])
        h = plot_h * value / max_value
        x = left + i * slot + (slot - bar_w) / 2
        chart.bars.append(
            Bar(
                label=_fit(str(p["label"]), fits),
                full_label=str(p["label"]),
                value=value,
                x=round(x, 1),
                y=round(top + plot_h - h, 1),
                width=round(bar_w, 1),
                height=round(h, 1),
                label_x=round(x + bar_w / 2, 1),
                show_label=i % label_every == 0,
            )
        )
    return chart
