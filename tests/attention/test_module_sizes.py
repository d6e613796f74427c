"""The loop's house stays readable: no module of ``attention/`` grows past 500 lines (issue
38). A module that would is a module with two jobs; split it by job, not by size."""

from __future__ import annotations

from pathlib import Path

ATTENTION = Path(__file__).resolve().parents[2] / "attention"
MOST_LINES = 500


def test_no_module_of_the_loop_is_over_500_lines() -> None:
    sizes = {path.name: len(path.read_text().splitlines()) for path in ATTENTION.glob("*.py")}
    assert len(sizes) > 20, "the counter found the loop's modules"
    assert {name: n for name, n in sizes.items() if n > MOST_LINES} == {}
