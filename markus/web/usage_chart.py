"""The usage pages' charts, drawn on the server as inline SVG (no script): tokens per day
(input and output stacked) under each daily token limit, and cost per day with the
month's running total under each monthly cost limit. Here only the geometry; the
template ``usage/_chart.html`` writes the elements (so every label is escaped)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

WIDTH, HEIGHT = 640, 220  # the viewBox; the SVG scales to the page's width
LEFT, RIGHT, TOP, BOTTOM = 8, 8, 16, 22  # the plot's margins inside it (labels below)
HEADROOM = 1.1  # the tallest bar or limit reaches 1/1.1 of the plot's height


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    part: str  # the CSS class: input | output | cost
    title: str  # its tooltip: the day and the number


@dataclass(frozen=True)
class Line:
    y: float
    label: str  # "team: 50000 tokens a day, 12000 left"
    exhausted: bool


@dataclass
class Chart:
    title: str
    peak: str  # the top of the scale, as the label says it
    bars: list[Bar] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    running: str = ""  # a polyline's points: the month's running cost
    first_day: str = ""
    last_day: str = ""
    width: int = WIDTH
    height: int = HEIGHT
    plot_bottom: float = HEIGHT - BOTTOM


def window(days: int, today: date) -> list[date]:
    return [today - timedelta(days=days - 1 - n) for n in range(days)]


def _scale(peak: float) -> Any:
    span = HEIGHT - TOP - BOTTOM
    top = peak * HEADROOM or 1.0
    return lambda value: HEIGHT - BOTTOM - span * (value / top)


def _slots(n: int) -> tuple[float, float]:
    """Each day's slot width and its bar's width (a gap between days)."""
    slot = (WIDTH - LEFT - RIGHT) / max(n, 1)
    return slot, max(slot * 0.7, 1.0)


def tokens_chart(per_day: dict[date, tuple[int, int]], days: list[date], limits: list[dict[str, Any]]) -> Chart:
    """Input and output tokens per day, stacked; a line at each daily token limit."""
    limits = [limit for limit in limits if limit["kind"] == "dailyTokens"]
    totals = [sum(per_day.get(d, (0, 0))) for d in days]
    peak = max([*totals, *(limit["limit"] for limit in limits), 0])
    y = _scale(peak)
    slot, bar = _slots(len(days))
    chart = Chart("Tokens per day", f"{peak:,.0f} tokens", first_day=str(days[0]), last_day=str(days[-1]))
    for n, day in enumerate(days):
        tokens_in, tokens_out = per_day.get(day, (0, 0))
        x = LEFT + n * slot + (slot - bar) / 2
        below = 0
        for part, value in (("input", tokens_in), ("output", tokens_out)):
            if value:
                top = y(below + value)
                chart.bars.append(Bar(x, top, bar, y(below) - top, part, f"{day}: {value:,} {part} tokens"))
                below += value
    for limit in limits:
        left = max(limit["limit"] - limit["used"], 0)
        label = f"{limit['scope']}: {limit['limit']:,} tokens a day, {left:,} left today"
        chart.lines.append(Line(y(limit["limit"]), label, limit["exhausted"]))
    return chart


def cost_chart(per_day: dict[date, float], days: list[date], limits: list[dict[str, Any]], before: float) -> Chart:
    """Cost per day; the month's running total (``before``: the month's cost before the
    window) as a line, starting again on the 1st; a line at each monthly cost limit."""
    limits = [limit for limit in limits if limit["kind"] == "monthlyCost"]
    running, total = [], before
    for day in days:
        total = (0.0 if day.day == 1 else total) + per_day.get(day, 0.0)
        running.append(total)
    peak = max([*running, *(limit["limit"] for limit in limits), 0.0])
    y = _scale(peak)
    slot, bar = _slots(len(days))
    chart = Chart("Cost per day (USD), and this month's running total", f"${peak:,.4f}")
    chart.first_day, chart.last_day = str(days[0]), str(days[-1])
    points = []
    for n, day in enumerate(days):
        cost = per_day.get(day, 0.0)
        x = LEFT + n * slot + (slot - bar) / 2
        if cost:
            chart.bars.append(Bar(x, y(cost), bar, HEIGHT - BOTTOM - y(cost), "cost", f"{day}: ${cost:,.4f}"))
        points.append(f"{x + bar / 2:.1f},{y(running[n]):.1f}")
    chart.running = " ".join(points)
    for limit in limits:
        left = max(limit["limit"] - limit["used"], 0.0)
        label = f"{limit['scope']}: ${limit['limit']:,.2f} a month, ${left:,.4f} left this month"
        chart.lines.append(Line(y(limit["limit"]), label, limit["exhausted"]))
    return chart
