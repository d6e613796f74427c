"""What every benchmark returns and how ``bench`` prints it: a figure, its baseline from
the same run, and the goal it is held to.

A suite's ``run(stdout, options)`` measures, writes its own detail lines if it likes,
and returns a list of :class:`Figure`. ``bench all`` gathers them into one table (and
``--json`` into one document), so every figure reads the same way: what was measured,
against what, and whether it meets the goal. Benchmarks never assert: a figure that
misses its goal is printed as such, not raised.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Literal

from django.db import connection

if TYPE_CHECKING:
    from _typeshed import SupportsWrite


@dataclass(frozen=True)
class Figure:
    """One measured figure.

    ``value`` is the figure itself (a ratio, a latency, a count...), in ``unit``.
    ``baseline`` says what it is measured against in the same run, in words (e.g.
    "bare INSERT 5210/s"); ``goal`` is the bound it should meet, with ``better`` saying
    which side is good ("higher": value >= goal; "lower": value <= goal). A figure
    without a goal is informative only.
    """

    suite: str
    name: str
    value: float
    unit: str = ""
    baseline: str = ""
    goal: float | None = None
    better: Literal["higher", "lower"] = "higher"

    @property
    def meets_goal(self) -> bool | None:
        if self.goal is None:
            return None
        return self.value >= self.goal if self.better == "higher" else self.value <= self.goal

    def goal_text(self) -> str:
        if self.goal is None:
            return ""
        return f"{'>=' if self.better == 'higher' else '<='} {_fmt(self.goal)}{(' ' + self.unit) if self.unit else ''}"


def timings_ms(fn: Callable[[], object], reps: int, *, warmup: int) -> list[float]:
    """Milliseconds of each of ``reps`` calls of ``fn``, after ``warmup`` unmeasured ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return times


def percentile(values: list[float], q: float) -> float:
    """The value at fraction ``q`` of ``values`` in order (0.99: the p99)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return f"{value:.3f}"


def environment() -> dict[str, str]:
    """Where the figures were taken: database, channel layer backing, machine."""
    from django.conf import settings

    if connection.vendor == "sqlite":
        database = "sqlite " + ".".join(map(str, connection.Database.sqlite_version_info))  # type: ignore[attr-defined]
    elif connection.vendor == "postgresql":
        connection.ensure_connection()
        version = connection.pg_version  # type: ignore[attr-defined]
        database = f"postgresql {version // 10000}.{version % 10000}"
    else:
        database = connection.vendor
    return {
        "database": database,
        "redis": "yes" if getattr(settings, "REDIS_URL", "") else "no (embedded in-memory layer)",
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": str(os.cpu_count() or "?"),
    }


def write_table(stdout: SupportsWrite[str], figures: list[Figure]) -> None:
    """One line per figure: suite, name, value, baseline, goal, verdict."""
    rows = [
        (
            f.suite,
            f.name,
            f"{_fmt(f.value)}{(' ' + f.unit) if f.unit else ''}",
            f.goal_text(),
            {True: "ok", False: "MISSES", None: ""}[f.meets_goal],
            f.baseline,
        )
        for f in figures
    ]
    header = ("suite", "figure", "value", "goal", "", "baseline (same run)")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(5)]
    for row in [header, *rows]:
        cells = [row[i].ljust(widths[i]) for i in range(5)]
        stdout.write("  ".join(cells) + "  " + row[5] + "\n")


def write_json(stdout: SupportsWrite[str], figures: list[Figure]) -> None:
    doc = {
        "environment": environment(),
        "figures": [{**asdict(f), "meets_goal": f.meets_goal} for f in figures],
    }
    stdout.write(json.dumps(doc, indent=2) + "\n")
